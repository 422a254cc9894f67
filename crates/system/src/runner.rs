//! The one place that starts other programs.
//!
//! Every `tc`, `ip`, `modprobe` or `linux.uml` that unbloat runs goes through here, as an argument
//! vector (never a shell line), so nothing a user typed can be reinterpreted by a shell.
//!
//! What callers can rely on:
//! - [`Runner::run`] returns `Ok` whenever the program ran, whatever its exit status: a non-zero
//!   exit is a [`CmdOutput`] with that status, not an `Err`. `Err` means the program could not be
//!   started at all ([`RunError`]), and names the program and the package that provides it.
//! - A child gets `/dev/null` as stdin unless the [`Cmd`] carries stdin text, so nothing ever waits on
//!   a terminal (CI runs without one).
//! - Every child of [`SystemRunner::run`] that configures the kernel (`tc`, `ip`, `nft`,
//!   `iptables`..., `modprobe`, `sysctl`: [`Cmd::deadline`]) has a deadline ([`DEFAULT_TIMEOUT`],
//!   or the [`Cmd`]'s own): one that hangs would otherwise hold the transaction lock for ever
//!   (procd and systemd wait as long). At the deadline its whole process group gets SIGKILL and
//!   the call fails with [`RunError::TimedOut`], which names the command. Other programs (the
//!   lab's measurements and far ends, `ip netns exec NS PROGRAM`) run as long as their [`Cmd`]
//!   allows, without a limit if it sets none: a 45 s test is not a hung `tc`.
//! - [`SystemRunner`] finds programs through `PATH`. In test builds only (the `test-knobs`
//!   feature, [`crate::knobs`]), the environment variables `UNBLOAT_TC`, `UNBLOAT_IP` and
//!   `UNBLOAT_NFT` replace the `tc`, `ip` and `nft` programs (tests put a fault-injecting
//!   wrapper there, or one that answers as a kernel with flowtables would).
//! - [`RecordingRunner`] runs nothing: it records every command and answers from a script, for tests
//!   of the code that builds commands.
//! - [`Cmd::display`] is a line a POSIX shell would run with the same meaning (used by `--dry-run`).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// How long a child may run unless its [`Cmd`] says otherwise: far beyond any `tc -batch` of
/// ours (a few hundred milliseconds in User-Mode Linux), short enough that a hung one frees the
/// lock before a user or a supervisor gives up.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A program and its arguments, run without a shell, and optionally text fed to its stdin
/// (`tc -batch -` reads its script there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    /// How long it may run: None is [`Cmd::deadline`]'s default.
    pub timeout: Option<Duration>,
}

impl Cmd {
    /// A command with no arguments yet.
    pub fn new(program: impl Into<String>) -> Cmd {
        Cmd {
            program: program.into(),
            args: Vec::new(),
            stdin: None,
            timeout: None,
        }
    }

    /// Lets it run for `limit` (a measurement that runs for a minute), not [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, limit: Duration) -> Cmd {
        self.timeout = Some(limit);
        self
    }

    /// How long it may run: its own limit, else `default` for a program that configures the
    /// kernel (it answers in milliseconds, and the transaction lock is held meanwhile), else no
    /// limit. `ip netns exec NS PROGRAM` is judged by PROGRAM.
    pub fn deadline(&self, default: Duration) -> Option<Duration> {
        if self.timeout.is_some() {
            return self.timeout;
        }
        let mut words = std::iter::once(&self.program).chain(&self.args);
        let mut program = words.next()?;
        if base(program) == "ip" && self.args.get(..2) == Some(&["netns".into(), "exec".into()]) {
            program = self.args.get(3)?;
        }
        const CONFIGURES_THE_KERNEL: &[&str] = &[
            "tc",
            "ip",
            "nft",
            "iptables",
            "ip6tables",
            "iptables-save",
            "ip6tables-save",
            "iptables-restore",
            "ip6tables-restore",
            "iptables-legacy",
            "ip6tables-legacy",
            "modprobe",
            "rmmod",
            "sysctl",
            "ethtool",
        ];
        CONFIGURES_THE_KERNEL
            .contains(&base(program))
            .then_some(default)
    }

    /// `tc ARGS...`.
    pub fn tc<I, S>(args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd::new("tc").args(args)
    }

    /// `ip ARGS...`.
    pub fn ip<I, S>(args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd::new("ip").args(args)
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Cmd {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Feeds `text` to the program's stdin.
    pub fn stdin(mut self, text: impl Into<String>) -> Cmd {
        self.stdin = Some(text.into());
        self
    }

    /// The program followed by its arguments.
    pub fn argv(&self) -> Vec<&str> {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect()
    }

    /// A shell line with the same meaning: words are single-quoted only when they hold a character
    /// the shell would treat specially. Stdin text is shown as a quoted here-document
    /// (`<<'EOF' ... EOF`, whose body the shell does not expand), with a delimiter chosen so that it
    /// does not occur as a line of the text; the result is then several lines.
    pub fn display(&self) -> String {
        let mut line = self
            .argv()
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(text) = &self.stdin {
            let delimiter = here_doc_delimiter(text);
            line.push_str(&format!(" <<'{delimiter}'\n{text}"));
            if !text.is_empty() && !text.ends_with('\n') {
                line.push('\n');
            }
            line.push_str(&delimiter);
        }
        line
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// True when this process runs as root (needed to make network namespaces and change qdiscs).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Quotes one word for a POSIX shell, only when needed.
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn here_doc_delimiter(text: &str) -> String {
    let mut delimiter = "EOF".to_string();
    let mut n = 0;
    while text.lines().any(|l| l == delimiter) {
        n += 1;
        delimiter = format!("EOF{n}");
    }
    delimiter
}

/// What a program that ran left behind. `status` is its exit code, or 128 + the signal number when
/// a signal ended it (the shell's convention).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CmdOutput {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CmdOutput {
    /// Exit status 0.
    pub fn success(&self) -> bool {
        self.status == 0
    }

    /// A successful run that printed `stdout`.
    pub fn ok_with_stdout(stdout: impl Into<String>) -> CmdOutput {
        CmdOutput {
            status: 0,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    /// A failed run with this status and stderr.
    pub fn failed(status: i32, stderr: impl Into<String>) -> CmdOutput {
        CmdOutput {
            status,
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }
}

/// Why a program could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `program` is the name asked for (`tc`); `replacement` says what replaced it, if anything
    /// did (`/path/to/wrapper, set by UNBLOAT_TC`).
    #[error("cannot run `{program}`{}: not found{}", .replacement.as_ref().map(|r| format!(" ({r})")).unwrap_or_default(), package_hint(.program))]
    NotFound {
        program: String,
        replacement: Option<String>,
    },
    #[error("cannot run `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    /// `command` is the program with its arguments (without its stdin text).
    #[error("`{command}` did not finish within {} s and was killed", .after.as_secs_f64())]
    TimedOut { command: String, after: Duration },
    #[error("lost contact with `{program}` while it ran")]
    Wait {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// Which package provides the programs unbloat runs, as a sentence tail for messages: OpenWrt's
/// on OpenWrt (`/etc/openwrt_release`), Debian's elsewhere.
fn package_hint(program: &str) -> String {
    let openwrt = std::fs::symlink_metadata("/etc/openwrt_release").is_ok_and(|m| m.is_file());
    hint_for(program, openwrt)
}

/// [`package_hint`] for a system that is OpenWrt or not.
fn hint_for(program: &str, openwrt: bool) -> String {
    let base = program.rsplit('/').next().unwrap_or(program);
    let owrt = |pkg: &str| {
        format!("; it is in the package {pkg} (opkg install {pkg}; apk add {pkg} on OpenWrt 25)")
    };
    match (openwrt, base) {
        (true, "tc") => owrt("tc-tiny"),
        (true, "ip") => owrt("ip-tiny"),
        (true, "nft") => owrt("nftables"),
        (true, _) => String::new(),
        (false, _) => match package_for(base) {
            Some(pkg) => format!("; it is in the package {pkg} (apt-get install {pkg})"),
            None => String::new(),
        },
    }
}

/// The Debian package that provides `program`, when unbloat knows it.
pub fn package_for(program: &str) -> Option<&'static str> {
    match program {
        "tc" | "ip" => Some("iproute2"),
        "modprobe" => Some("kmod"),
        "linux.uml" => Some("user-mode-linux"),
        "iperf3" => Some("iperf3"),
        _ => None,
    }
}

/// Runs commands. Implemented by [`SystemRunner`] (for real) and [`RecordingRunner`] (for tests).
pub trait Runner {
    /// Runs `cmd` to completion. A non-zero exit is `Ok` with that status.
    fn run(&self, cmd: &Cmd) -> Result<CmdOutput, RunError>;

    /// Whether it runs programs on this machine (what it learns about the kernel holds for
    /// the next call too), rather than answering from a script.
    fn is_this_machine(&self) -> bool {
        false
    }
}

/// Runs commands on this machine with `std::process::Command`.
#[derive(Debug, Clone, Default)]
pub struct SystemRunner {
    /// Program name -> (replacement path, the environment variable that set it).
    overrides: BTreeMap<String, (PathBuf, String)>,
}

/// The environment variables that replace a program, and the program they replace.
pub const PROGRAM_OVERRIDES: [(&str, &str); 3] = [
    ("tc", "UNBLOAT_TC"),
    ("ip", "UNBLOAT_IP"),
    ("nft", "UNBLOAT_NFT"),
];

impl SystemRunner {
    /// The runner of the product. Test builds (feature `test-knobs`) honour `UNBLOAT_TC`,
    /// `UNBLOAT_IP` and `UNBLOAT_NFT` as they are set now (empty = unset); a release build never reads them, so a
    /// root process that inherits them (sudo, a unit file, cron) still runs the real `tc`.
    pub fn from_env() -> SystemRunner {
        let mut runner = SystemRunner::default();
        for (program, var) in PROGRAM_OVERRIDES {
            if let Some(path) = crate::knobs::var(var) {
                runner
                    .overrides
                    .insert(program.to_string(), (PathBuf::from(path), var.to_string()));
            }
        }
        runner
    }

    /// A runner that runs programs exactly as named, ignoring the environment's overrides.
    pub fn plain() -> SystemRunner {
        SystemRunner::default()
    }

    /// Starts `cmd` with the given stdout and stderr and returns the child without waiting.
    /// `env` is added to our environment. Stdin is `/dev/null` (stdin text is not supported here). With `new_group`, the child leads a
    /// process group of its own, so that the whole group can be signalled (the UML kernel runner
    /// uses this: linux.uml starts helper processes), and is killed if the calling thread ends
    /// first, so the caller must wait for it in that thread. Public for the test bench's kernel
    /// runner (unbloat-testbed), which boots User-Mode Linux through it: programs start here, and
    /// nowhere else.
    pub fn spawn(
        &self,
        cmd: &Cmd,
        env: &[(String, String)],
        stdout: Stdio,
        stderr: Stdio,
        new_group: bool,
    ) -> Result<Child, RunError> {
        let mut command = self.command(cmd);
        command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        if new_group {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
            // A child in its own group misses the terminal's Ctrl-C, and nothing reaches it when
            // this process is killed outright (a CI timeout, `kill -9`): have the kernel send it
            // SIGTERM when the thread that started it goes (that thread waits for it), so a
            // User-Mode Linux never outlives the run that booted it. SIGTERM, not SIGKILL:
            // linux.uml ends its helper processes on SIGTERM, and they would outlive a SIGKILL.
            // SAFETY: prctl is async-signal-safe and touches only the child's own state.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command.spawn().map_err(|e| self.spawn_error(cmd, e))
    }

    fn command(&self, cmd: &Cmd) -> Command {
        let program = match self.overrides.get(&cmd.program) {
            Some((path, _)) => path.clone(),
            None => PathBuf::from(&cmd.program),
        };
        let mut command = Command::new(program);
        command.args(&cmd.args);
        command
    }

    fn spawn_error(&self, cmd: &Cmd, e: io::Error) -> RunError {
        if e.kind() == io::ErrorKind::NotFound {
            let overridden = self.overrides.get(&cmd.program);
            RunError::NotFound {
                program: cmd.program.clone(),
                replacement: overridden
                    .map(|(path, var)| format!("{}, set by {var}", path.display())),
            }
        } else {
            RunError::Spawn {
                program: cmd.program.clone(),
                source: e,
            }
        }
    }
}

impl Runner for SystemRunner {
    fn is_this_machine(&self) -> bool {
        true
    }

    fn run(&self, cmd: &Cmd) -> Result<CmdOutput, RunError> {
        use std::os::unix::process::CommandExt;
        let mut command = self.command(cmd);
        command
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so that the deadline ends what it started too (a wrapper
            // script's `tc`, a `sleep`), and a hang cannot leave a grandchild holding our pipes.
            .process_group(0);
        let mut child = command.spawn().map_err(|e| self.spawn_error(cmd, e))?;
        let wait_error = |source| RunError::Wait {
            program: cmd.program.clone(),
            source,
        };
        // Stdin is written from a thread of its own: a program that prints much before it has read
        // all of its input would otherwise block on a full stdout pipe while we block on its stdin.
        let writer = match (child.stdin.take(), &cmd.stdin) {
            (Some(mut pipe), Some(text)) => {
                let text = text.clone();
                Some(std::thread::spawn(move || pipe.write_all(text.as_bytes())))
            }
            _ => None,
        };
        let limit = cmd.deadline(default_timeout());
        let waited = match limit {
            Some(limit) => wait_within(child, limit),
            None => child.wait_with_output().map_err(Waited::Io),
        };
        let output = waited.map_err(|e| match e {
            Waited::Io(source) => wait_error(source),
            Waited::TimedOut => RunError::TimedOut {
                command: Cmd {
                    stdin: None,
                    ..cmd.clone()
                }
                .display(),
                after: limit.unwrap_or_default(),
            },
        })?;
        if let Some(writer) = writer {
            match writer.join() {
                // A program may exit without reading all of its stdin (tc -batch stops at the first
                // error); the broken pipe that follows is not our error: its status tells.
                Ok(Err(e)) if e.kind() != io::ErrorKind::BrokenPipe => return Err(wait_error(e)),
                _ => {}
            }
        }
        Ok(CmdOutput {
            status: exit_code(output.status),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// [`DEFAULT_TIMEOUT`]; in test builds `UNBLOAT_CHILD_TIMEOUT_MS` shortens it, so that a test
/// of a hung `tc` does not wait 30 s.
fn default_timeout() -> Duration {
    crate::knobs::var("UNBLOAT_CHILD_TIMEOUT_MS")
        .and_then(|v| v.to_str()?.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// The file name of a program named by path or by name.
fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

enum Waited {
    Io(io::Error),
    TimedOut,
}

/// The child's output once it exits, or SIGKILL to its process group at `limit`. A thread of its
/// own reads both pipes and reaps it (`wait_with_output`, which cannot deadlock on a full pipe);
/// this one waits for that thread's answer, or for the deadline.
fn wait_within(child: Child, limit: Duration) -> Result<std::process::Output, Waited> {
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(done) => return done.map_err(Waited::Io),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            return Err(Waited::Io(io::Error::other("the waiting thread died")))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
    }
    // The child has not been reaped (that thread would have answered), so its id, which is its
    // group's, is still ours; only an exit in the very instant since the deadline races this.
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the process group.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    // The group is gone and the pipes with it; a process that left the group and kept a pipe
    // would keep that thread waiting, never this one.
    let _ = rx.recv_timeout(Duration::from_secs(1));
    Err(Waited::TimedOut)
}

/// The exit code, or 128 + the signal number for a program a signal ended. Public for the test
/// bench's kernel runner, which waits for its guests itself (with a timeout and streaming).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => -1,
    }
}

type Predicate = Box<dyn Fn(&Cmd) -> bool + Send + Sync>;

enum Reply {
    Output(CmdOutput),
    NotFound,
}

/// A [`Runner`] that runs nothing: it records each command and answers from a script.
///
/// Answers, first match wins: a rule for the call's number ([`RecordingRunner::fail_nth`]), then the
/// predicate rules in the order they were added ([`RecordingRunner::reply_when`] and friends), then
/// success with empty output.
#[derive(Default)]
pub struct RecordingRunner {
    calls: Mutex<Vec<Cmd>>,
    nth: Mutex<BTreeMap<usize, CmdOutput>>,
    rules: Mutex<Vec<(Predicate, Reply)>>,
}

impl RecordingRunner {
    /// A runner whose every command succeeds with empty output.
    pub fn new() -> RecordingRunner {
        RecordingRunner::default()
    }

    /// The `n`th call (counting from 1, over all calls) exits with `status` and prints `stderr`.
    pub fn fail_nth(self, n: usize, status: i32, stderr: impl Into<String>) -> RecordingRunner {
        lock(&self.nth).insert(n, CmdOutput::failed(status, stderr));
        self
    }

    /// Calls for which `pred` holds get `output`.
    pub fn reply_when(
        self,
        pred: impl Fn(&Cmd) -> bool + Send + Sync + 'static,
        output: CmdOutput,
    ) -> RecordingRunner {
        lock(&self.rules).push((Box::new(pred), Reply::Output(output)));
        self
    }

    /// Calls for which `pred` holds succeed and print `stdout`.
    pub fn stdout_when(
        self,
        pred: impl Fn(&Cmd) -> bool + Send + Sync + 'static,
        stdout: impl Into<String>,
    ) -> RecordingRunner {
        self.reply_when(pred, CmdOutput::ok_with_stdout(stdout))
    }

    /// Calls for which `pred` holds exit with `status` and print `stderr`.
    pub fn fail_when(
        self,
        pred: impl Fn(&Cmd) -> bool + Send + Sync + 'static,
        status: i32,
        stderr: impl Into<String>,
    ) -> RecordingRunner {
        self.reply_when(pred, CmdOutput::failed(status, stderr))
    }

    /// Calls of `program` fail as if it were not installed.
    pub fn missing_program(self, program: &str) -> RecordingRunner {
        let program = program.to_string();
        lock(&self.rules).push((
            Box::new(move |c: &Cmd| c.program == program),
            Reply::NotFound,
        ));
        self
    }

    /// Every command run so far, in order.
    pub fn calls(&self) -> Vec<Cmd> {
        lock(&self.calls).clone()
    }

    /// Every command run so far, as [`Cmd::display`] lines.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.calls).iter().map(Cmd::display).collect()
    }
}

impl Runner for RecordingRunner {
    fn run(&self, cmd: &Cmd) -> Result<CmdOutput, RunError> {
        let n = {
            let mut calls = lock(&self.calls);
            calls.push(cmd.clone());
            calls.len()
        };
        if let Some(out) = lock(&self.nth).get(&n) {
            return Ok(out.clone());
        }
        for (pred, reply) in lock(&self.rules).iter() {
            if pred(cmd) {
                return match reply {
                    Reply::Output(out) => Ok(out.clone()),
                    Reply::NotFound => Err(RunError::NotFound {
                        program: cmd.program.clone(),
                        replacement: None,
                    }),
                };
            }
        }
        Ok(CmdOutput::default())
    }
}

/// Locks a mutex; a panic in another test thread holding it does not poison our records.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing program is named with the package that has it where the user is: OpenWrt's
    /// tc-tiny there (an image may ship without tc), Debian's iproute2 elsewhere.
    #[test]
    fn a_missing_program_names_the_package_of_the_system_it_runs_on() {
        assert_eq!(
            hint_for("tc", false),
            "; it is in the package iproute2 (apt-get install iproute2)"
        );
        assert_eq!(
            hint_for("/usr/sbin/tc", true),
            "; it is in the package tc-tiny (opkg install tc-tiny; apk add tc-tiny on OpenWrt 25)"
        );
        assert!(hint_for("nft", true).contains("opkg install nftables"));
        assert_eq!(hint_for("linux.uml", true), "");
        assert_eq!(hint_for("frobnicate", false), "");
    }

    #[test]
    fn display_quotes_only_what_the_shell_would_misread() {
        let cmd = Cmd::tc([
            "qdisc",
            "add",
            "dev",
            "eth0.2",
            "root",
            "cake",
            "bandwidth",
            "19950kbit",
        ]);
        assert_eq!(
            cmd.display(),
            "tc qdisc add dev eth0.2 root cake bandwidth 19950kbit"
        );
        let cmd = Cmd::new("echo").args(["a b", "", "it's", "$HOME", "x;y", "ffff:"]);
        assert_eq!(
            cmd.display(),
            r#"echo 'a b' '' 'it'\''s' '$HOME' 'x;y' ffff:"#
        );
    }

    #[test]
    fn display_shows_stdin_as_a_here_document_with_a_delimiter_not_in_the_text() {
        let cmd = Cmd::tc(["-batch", "-"]).stdin("qdisc del dev lo root\nEOF\n");
        assert_eq!(
            cmd.display(),
            "tc -batch - <<'EOF1'\nqdisc del dev lo root\nEOF\nEOF1"
        );
        let cmd = Cmd::tc(["-batch", "-"]).stdin("qdisc show");
        assert_eq!(cmd.display(), "tc -batch - <<'EOF'\nqdisc show\nEOF");
    }

    #[test]
    fn display_is_what_sh_runs() {
        let words = [
            "a b",
            "it's",
            "$HOME",
            "*",
            "`x`",
            "\\",
            "\"q\"",
            "tab\there",
            "new\nline",
        ];
        let cmd = Cmd::new("printf")
            .arg("<%s>")
            .args(words)
            .stdin("ignored\n");
        let out = SystemRunner::plain()
            .run(&Cmd::new("sh").args(["-c", &cmd.display()]))
            .unwrap();
        let expected: String = words.iter().map(|w| format!("<{w}>")).collect();
        assert_eq!(out.stdout, expected);
        let cmd = Cmd::new("cat").stdin("line $HOME `x`\nEOF\n");
        let out = SystemRunner::plain()
            .run(&Cmd::new("sh").args(["-c", &cmd.display()]))
            .unwrap();
        assert_eq!(out.stdout, "line $HOME `x`\nEOF\n");
    }

    #[test]
    fn system_runner_reports_status_stdout_stderr_and_feeds_stdin() {
        let r = SystemRunner::plain();
        let out = r
            .run(
                &Cmd::new("sh")
                    .args(["-c", "cat; echo err >&2; exit 3"])
                    .stdin("hello"),
            )
            .unwrap();
        assert_eq!(
            out,
            CmdOutput {
                status: 3,
                stdout: "hello".into(),
                stderr: "err\n".into()
            }
        );
        assert!(!out.success());
        assert!(r.run(&Cmd::new("true")).unwrap().success());
    }

    #[test]
    fn system_runner_gives_children_an_empty_stdin() {
        let out = SystemRunner::plain().run(&Cmd::new("cat")).unwrap();
        assert_eq!(out, CmdOutput::default());
    }

    #[test]
    fn system_runner_survives_a_program_that_ignores_a_large_stdin() {
        let big = "x".repeat(1 << 20);
        let out = SystemRunner::plain()
            .run(&Cmd::new("sh").args(["-c", "exit 4"]).stdin(big))
            .unwrap();
        assert_eq!(out.status, 4);
    }

    #[test]
    fn a_signal_shows_as_128_plus_its_number() {
        let out = SystemRunner::plain()
            .run(&Cmd::new("sh").args(["-c", "kill -TERM $$"]))
            .unwrap();
        assert_eq!(out.status, 128 + 15);
    }

    /// Issue 36, item 12: a `tc` that hangs held the transaction lock for ever.
    #[test]
    fn a_child_that_hangs_is_killed_at_its_deadline_with_its_group_and_named() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"))
            .join(format!("runner-hang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("still-alive");
        let hang = dir.join("tc-hangs");
        // A wrapper whose own child (the sleep) must die with it: after the deadline nothing
        // may touch the marker.
        std::fs::write(
            &hang,
            format!(
                "#!/bin/sh\necho started\nsleep 2 && touch {}\nsleep 1000\n",
                marker.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut r = SystemRunner::plain();
        r.overrides
            .insert("tc".into(), (hang.clone(), "UNBLOAT_TC".into()));
        let t0 = std::time::Instant::now();
        let cmd = Cmd::tc(["-batch", "-"])
            .stdin("qdisc show\n")
            .timeout(Duration::from_millis(500));
        let err = r.run(&cmd).unwrap_err();
        let took = t0.elapsed();
        assert!(matches!(err, RunError::TimedOut { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "`tc -batch -` did not finish within 0.5 s and was killed"
        );
        assert!(took < Duration::from_secs(2), "took {took:?}");
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "the hung program's child outlived the deadline"
        );
        // A quick one is untouched by a deadline, and the default applies without one.
        assert_eq!(
            SystemRunner::plain()
                .run(&Cmd::new("echo").arg("x").timeout(Duration::from_secs(5)))
                .unwrap()
                .stdout,
            "x\n"
        );
        assert_eq!(Cmd::new("true").timeout, None);
        // The default is for what configures the kernel, not for a measurement run through
        // `ip netns exec` (the lab's 45 s test was killed at 30 s).
        let d = Duration::from_secs(30);
        assert_eq!(Cmd::tc(["qdisc", "show"]).deadline(d), Some(d));
        assert_eq!(Cmd::new("/usr/sbin/nft").arg("list").deadline(d), Some(d));
        let exec = |prog: &str| {
            Cmd::new("ip").args(["netns", "exec", "lan", prog, "test", "--duration", "45s"])
        };
        assert_eq!(exec("/usr/bin/unbloat").deadline(d), None);
        assert_eq!(exec("tc").deadline(d), Some(d));
        assert_eq!(Cmd::new("iperf3").arg("-c").deadline(d), None);
        let own = Duration::from_secs(135);
        assert_eq!(exec("sh").timeout(own).deadline(d), Some(own));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_program_is_named_with_its_package() {
        let mut r = SystemRunner::plain();
        r.overrides.insert(
            "tc".into(),
            ("/nonexistent/unbloat-tc".into(), "UNBLOAT_TC".into()),
        );
        let err = r.run(&Cmd::tc(["-V"])).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, RunError::NotFound { .. }), "{err:?}");
        assert!(msg.contains("/nonexistent/unbloat-tc"), "{msg}");
        assert!(msg.contains("UNBLOAT_TC"), "{msg}");
        assert!(msg.contains("iproute2"), "{msg}");
        let err = SystemRunner::plain()
            .run(&Cmd::new("unbloat-no-such-program"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot run `unbloat-no-such-program`: not found"
        );
    }

    #[test]
    fn an_override_replaces_only_its_program() {
        let mut r = SystemRunner::plain();
        r.overrides
            .insert("tc".into(), ("echo".into(), "UNBLOAT_TC".into()));
        assert_eq!(
            r.run(&Cmd::tc(["qdisc", "show"])).unwrap().stdout,
            "qdisc show\n"
        );
        assert_eq!(r.run(&Cmd::new("echo").arg("x")).unwrap().stdout, "x\n");
    }

    #[test]
    fn recording_runner_records_and_answers_by_number_then_rule_then_success() {
        let r = RecordingRunner::new()
            .fail_nth(3, 2, "Error: Specified qdisc kind is unknown.")
            .stdout_when(
                |c| c.args.first().map(String::as_str) == Some("-V"),
                "tc utility, iproute2-6.1.0",
            )
            .fail_when(|c| c.program == "ip", 1, "Cannot find device")
            .missing_program("modprobe");
        let v = r.run(&Cmd::tc(["-V"])).unwrap();
        assert_eq!(v.stdout, "tc utility, iproute2-6.1.0");
        let ip = r.run(&Cmd::ip(["link", "show", "eth9"])).unwrap();
        assert_eq!((ip.status, ip.stderr.as_str()), (1, "Cannot find device"));
        // The third call fails by number, although a rule would have let it succeed.
        let third = r.run(&Cmd::tc(["-V"])).unwrap();
        assert_eq!(third.status, 2);
        assert!(r.run(&Cmd::tc(["qdisc", "show"])).unwrap().success());
        assert!(matches!(
            r.run(&Cmd::new("modprobe").arg("sch_cake")),
            Err(RunError::NotFound { .. })
        ));
        assert_eq!(
            r.lines(),
            [
                "tc -V",
                "ip link show eth9",
                "tc -V",
                "tc qdisc show",
                "modprobe sch_cake"
            ]
        );
        assert_eq!(r.calls()[1], Cmd::ip(["link", "show", "eth9"]));
    }
}
