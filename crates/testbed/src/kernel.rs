//! A Linux kernel that has the qdiscs a piece of work needs: the host's own when it has them,
//! otherwise User-Mode Linux (UML), a whole Linux kernel run as an ordinary program that boots the
//! host's own file system (see `docs/kernel.md`).
//!
//! What callers can rely on:
//! - [`Kernel::detect`] picks the host when a throw-away network namespace on it accepts every
//!   required qdisc kind (see [`unbloat_system::probe`]), else a UML kernel that is installed, trusted and
//!   passed a trial boot ([`choice`]: the lab's own build, then Debian's), else an error that names
//!   what is missing, why each UML cannot stand in, what to run, and whether we lacked root. `UNBLOAT_KERNEL=host|uml` forces the choice. Inside a guest (`UNBLOAT_IN_GUEST=1`, which
//!   every UML guest has set) it is always the host: that kernel is the one that has everything.
//! - [`Kernel::run`] runs an argument vector (no shell) to completion, in the host kernel or in a
//!   fresh UML guest, and returns its exit status, stdout and stderr. The guest sees the host's
//!   files, runs in the caller's current directory as root, with stdin from `/dev/null`, every
//!   net/sched module plus ipv6, veth, ifb, dummy, 8021q and tcp_bbr loaded, loopback up, and unprivileged ICMP
//!   sockets allowed. The kernel's own boot messages never reach the caller's terminal; they are
//!   quoted (last lines) in the error when the guest crashes or times out.
//! - A timeout kills the whole process group (UML starts helpers) and is an error, never a result.
//! - SIGINT, SIGTERM or SIGHUP while a run is under way (Ctrl-C, `kill`, a closed terminal) ends
//!   it the same way: the whole group (the guest) is killed, its run directory
//!   (`$TMPDIR/unbloat-uml-*`) removed, and [`KernelError::Interrupted`] returned; the process
//!   should then exit with 128 + the signal ([`interrupted_by`] says which). Without this the
//!   default action killed us between two lines and left the run directory behind.
//! - With `stream`, the command's stdout and stderr are copied to ours (`print!`/`eprint!`, so the
//!   test harness captures them like any test output) while it runs; the result still holds all
//!   of it.
//! - [`run_test_in_real_kernel`] and [`real_kernel_test!`](crate::real_kernel_test) make a `#[test]`
//!   run in such a kernel (`kernel/reexec.rs` says how). A command re-runs itself there with
//!   [`own_argv`]: its own arguments forwarded unchanged, and a marker. Tests from several
//!   processes share the machine through [`slot`]: side by side, or `alone` where timing decides
//!   the result. Every guest holds a shared slot while it runs (or its test's), however it was
//!   booted.

pub mod choice;
pub mod diagnose;
mod reexec;
mod rerun;
mod signals;
pub mod slot;
mod uml;

pub use reexec::{libtest_name, run_test_in_real_kernel, run_test_in_uml};
pub use rerun::own_argv;
pub use signals::interrupted_by;
pub use uml::{Uml, MODULES_ENV};

use signals::SignalGuard;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use unbloat_system::probe::{self, ProbeError};
use unbloat_system::runner::is_root;
use unbloat_system::runner::{Cmd, RunError, SystemRunner};

/// Forces [`Kernel::detect`]'s choice: `host` or `uml`.
pub const KERNEL_ENV: &str = "UNBLOAT_KERNEL";
/// Set to `1` in every UML guest's environment.
pub const IN_GUEST_ENV: &str = "UNBLOAT_IN_GUEST";

/// Where work runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// The kernel this process runs on.
    Host,
    /// A User-Mode Linux guest booted for each [`Kernel::run`].
    Uml(Uml),
}

/// How to run a command in a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestOptions {
    /// Extra environment variables for the command (names: letters, digits, `_`).
    pub env: Vec<(String, String)>,
    /// The UML guest's memory in MiB (ignored on the host).
    pub mem_mb: u32,
    /// How long the command (and, in UML, the boot) may take before it is killed.
    pub timeout: Duration,
    /// Copy the command's output to ours while it runs.
    pub stream: bool,
}

impl Default for GuestOptions {
    fn default() -> GuestOptions {
        GuestOptions {
            env: Vec::new(),
            mem_mb: 1024,
            timeout: Duration::from_secs(600),
            stream: false,
        }
    }
}

/// What a command run by [`Kernel::run`] left behind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuestOutput {
    /// Exit status (128 + signal when a signal ended it).
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Why no kernel could run the work, or the run failed outside the command itself.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(
        "no kernel here has {}: {host}; and User-Mode Linux cannot stand in: {uml}",
        .required.join(", ")
    )]
    NoKernel {
        required: Vec<String>,
        /// What the host lacks, in words.
        host: String,
        /// Why UML is not usable, with what to install.
        uml: String,
        /// Whether we ran as root (the host kernel can only be probed as root).
        root: bool,
    },
    #[error("{KERNEL_ENV}={value} is not understood: use `host` or `uml`")]
    BadOverride { value: String },
    #[error("{KERNEL_ENV}=uml, but User-Mode Linux cannot run: {0}")]
    UmlUnavailable(String),
    #[error("probing the host kernel failed")]
    Probe(#[from] ProbeError),
    #[error("nothing to run: the argument list is empty")]
    EmptyCommand,
    #[error("environment variable name {0:?} is not a valid name (letters, digits, _)")]
    BadEnvName(String),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` did not finish within {} s and was killed{}", .after.as_secs_f64(), tail_note(.log_tail))]
    Timeout {
        command: String,
        after: Duration,
        log_tail: String,
    },
    #[error("the User-Mode Linux guest ended without reporting the exit status of `{command}` (it crashed or never started){}", tail_note(.log_tail))]
    GuestCrashed { command: String, log_tail: String },
    #[error("interrupted by {}: the run was stopped and its temporary files removed", signals::name(*.signal))]
    Interrupted { signal: i32 },
}

impl KernelError {
    /// True when no kernel here can do the work (exit status 2 in the CLI: what the machine
    /// lacks, not a failure of the work).
    pub fn no_kernel(&self) -> bool {
        matches!(
            self,
            KernelError::NoKernel { .. }
                | KernelError::UmlUnavailable(_)
                | KernelError::BadOverride { .. }
        )
    }
}

fn tail_note(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; the last lines it logged:\n{tail}")
    }
}

impl Kernel {
    /// Picks a kernel that has every qdisc kind in `required` (and `ifb`, `mirred`, `u32` when
    /// listed). See the module doc for the rules.
    pub fn detect(required: &[&str]) -> Result<Kernel, KernelError> {
        Kernel::detect_forced(&std::env::var(KERNEL_ENV).unwrap_or_default(), required)
    }

    /// [`Kernel::detect`] with `forced` in place of `$UNBLOAT_KERNEL` ("" = not forced).
    pub(crate) fn detect_forced(forced: &str, required: &[&str]) -> Result<Kernel, KernelError> {
        match forced {
            "host" => return Ok(Kernel::Host),
            "uml" => {
                return choice::choose()?
                    .map(Kernel::Uml)
                    .map_err(KernelError::UmlUnavailable)
            }
            "" => {}
            other => {
                return Err(KernelError::BadOverride {
                    value: other.to_string(),
                })
            }
        }
        if in_guest() {
            return Ok(Kernel::Host);
        }
        let root = is_root();
        let host = if root {
            // Plain tc/ip: a fault-injecting UNBLOAT_TC wrapper is meant for the work, not for this choice.
            let caps = probe::probe(&SystemRunner::plain(), &probe::qdisc_kinds(required))?;
            let missing = caps.missing(required);
            if missing.is_empty() {
                return Ok(Kernel::Host);
            }
            missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            "the host kernel could not be probed: that needs root".to_string()
        };
        match choice::choose()? {
            Ok(uml) => Ok(Kernel::Uml(uml)),
            Err(uml) => Err(KernelError::NoKernel {
                required: required.iter().map(ToString::to_string).collect(),
                host,
                uml,
                root,
            }),
        }
    }

    /// Runs `argv` to completion in this kernel. A non-zero exit is `Ok` with that status.
    pub fn run(&self, argv: &[String], opts: &GuestOptions) -> Result<GuestOutput, KernelError> {
        if argv.is_empty() {
            return Err(KernelError::EmptyCommand);
        }
        if let Some((name, _)) = opts.env.iter().find(|(name, _)| !valid_env_name(name)) {
            return Err(KernelError::BadEnvName(name.clone()));
        }
        // Caught from before the run directory exists until after it is removed (locals drop
        // in reverse order, the guard last).
        let _signals = SignalGuard::install()?;
        match self {
            Kernel::Host => run_on_host(argv, opts),
            Kernel::Uml(uml) => uml.run(argv, opts),
        }
    }

    /// `host`, or `User-Mode Linux <version>`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Kernel::Host => "host".to_string(),
            Kernel::Uml(uml) => uml.describe(),
        }
    }
}

/// What [`Kernel::describe`] says of the kernel this process runs on: "host", or inside a UML
/// guest started by this module `User-Mode Linux RELEASE` (reports written in the guest must
/// say where they were measured).
pub fn describe_current() -> String {
    if !in_guest() {
        return Kernel::Host.describe();
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("User-Mode Linux {}", release.trim())
}

/// The kernel this process runs on, by name and release, for a benchmark's table: `Linux
/// 6.1.0-28-amd64` on the host, `User-Mode Linux 6.1.192` in a guest this module started.
pub fn name_current() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let uml = if in_guest() { "User-Mode " } else { "" };
    format!("{uml}Linux {}", release.trim())
}

/// True in a UML guest started by this module.
pub fn in_guest() -> bool {
    std::env::var(IN_GUEST_ENV).is_ok_and(|v| v == "1")
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn run_on_host(argv: &[String], opts: &GuestOptions) -> Result<GuestOutput, KernelError> {
    let dir = RunDir::create("host")?;
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let out = create_file(&out_path)?;
    let err = create_file(&err_path)?;
    let cmd = Cmd::new(&argv[0]).args(&argv[1..]);
    let child = SystemRunner::from_env().spawn(&cmd, &opts.env, out.into(), err.into(), true)?;
    let command = cmd.display();
    match supervise(child, &out_path, &err_path, opts)? {
        Ended::Exited(status) => Ok(GuestOutput {
            status,
            stdout: read_lossy(&out_path)?,
            stderr: read_lossy(&err_path)?,
        }),
        Ended::TimedOut => Err(KernelError::Timeout {
            command,
            after: opts.timeout,
            log_tail: tail_lines(&read_lossy(&err_path)?, 20),
        }),
    }
}

/// A private directory for one run, removed when dropped.
pub(crate) struct RunDir(PathBuf);

impl RunDir {
    /// Makes a new directory, readable only by us, under the system's temporary directory.
    pub(crate) fn create(tag: &str) -> Result<RunDir, KernelError> {
        // The guest reaches this path through hostfs rooted at `/`, so it must be absolute.
        let base = std::path::absolute(std::env::temp_dir()).map_err(|source| KernelError::Io {
            what: "cannot find the temporary directory".into(),
            source,
        })?;
        // New, 0700, a random name (as mkdtemp): ours alone. The pid stays in the name, so a
        // test can find the directory of a child it started.
        let prefix = format!("unbloat-{tag}-{}", std::process::id());
        unbloat_safefs::private_dir(&base, &prefix)
            .map(RunDir)
            .map_err(|source| KernelError::Io {
                what: format!("cannot create a run directory under {}", base.display()),
                source,
            })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory in /tmp is untidy, not wrong.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn create_file(path: &Path) -> Result<File, KernelError> {
    File::create(path).map_err(|source| KernelError::Io {
        what: format!("cannot create {}", path.display()),
        source,
    })
}

/// The file's text, or "" when it does not exist (the guest never wrote it).
pub(crate) fn read_lossy(path: &Path) -> Result<String, KernelError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(KernelError::Io {
            what: format!("cannot read {}", path.display()),
            source,
        }),
    }
}

/// The last `n` lines of `text`.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub(crate) enum Ended {
    Exited(i32),
    TimedOut,
}

/// Waits for `child` (the leader of its own process group) within `opts.timeout`, copying what is
/// appended to the files at `out` and `err` to our stdout and stderr when `opts.stream` is set.
/// On timeout the whole group is killed. After a normal exit, stragglers in the group are killed
/// too, so nothing outlives the run.
pub(crate) fn supervise(
    mut child: Child,
    out: &Path,
    err: &Path,
    opts: &GuestOptions,
) -> Result<Ended, KernelError> {
    let started = Instant::now();
    let mut tails = [Tail::new(out, false), Tail::new(err, true)];
    let io_error = |source| KernelError::Io {
        what: "cannot wait for the kernel run".into(),
        source,
    };
    let ended = loop {
        if let Some(signal) = interrupted_by() {
            kill_group(&child);
            child.wait().map_err(io_error)?;
            return Err(KernelError::Interrupted { signal });
        }
        if let Some(status) = child.try_wait().map_err(io_error)? {
            break Ended::Exited(unbloat_system::runner::exit_code(status));
        }
        if started.elapsed() >= opts.timeout {
            kill_group(&child);
            child.wait().map_err(io_error)?;
            break Ended::TimedOut;
        }
        if opts.stream {
            tails.iter_mut().for_each(Tail::forward);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    kill_group(&child);
    if opts.stream {
        tails.iter_mut().for_each(Tail::forward);
        tails.iter_mut().for_each(Tail::flush_rest);
    }
    Ok(ended)
}

fn kill_group(child: &Child) {
    if let Ok(pgid) = i32::try_from(child.id()) {
        // SAFETY: kill has no memory preconditions; the group is the one the child leads (its id
        // cannot be reused while any member lives). ESRCH (nobody left) is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Follows a growing file and copies new text to our stdout or stderr.
struct Tail {
    path: PathBuf,
    to_stderr: bool,
    offset: u64,
    /// Bytes of a UTF-8 character cut by the end of the last read.
    pending: Vec<u8>,
}

impl Tail {
    fn new(path: &Path, to_stderr: bool) -> Tail {
        Tail {
            path: path.to_path_buf(),
            to_stderr,
            offset: 0,
            pending: Vec::new(),
        }
    }

    /// Copies what was appended since the last call. Streaming is best effort: a read error here
    /// shows up again when the whole file is read for the result.
    fn forward(&mut self) {
        let Ok(mut file) = File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut bytes = std::mem::take(&mut self.pending);
        let before = bytes.len();
        if file.read_to_end(&mut bytes).is_err() {
            self.pending = bytes;
            return;
        }
        self.offset += (bytes.len() - before) as u64;
        let complete = match std::str::from_utf8(&bytes) {
            Ok(_) => bytes.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => bytes.len(),
        };
        self.pending = bytes.split_off(complete);
        self.emit(&bytes);
    }

    fn flush_rest(&mut self) {
        let rest = std::mem::take(&mut self.pending);
        self.emit(&rest);
    }

    fn emit(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(bytes);
        // print!/eprint! rather than writing to the file descriptors: libtest captures these, so a
        // passing test stays quiet and a failing one shows the guest's output.
        if self.to_stderr {
            eprint!("{text}");
            let _ = io::stderr().flush();
        } else {
            print!("{text}");
            let _ = io::stdout().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_run_returns_status_stdout_stderr_and_env() {
        let argv: Vec<String> = [
            "sh",
            "-c",
            "echo out $GREETING; echo err >&2; read x || echo no-stdin; exit 7",
        ]
        .map(String::from)
        .into();
        let opts = GuestOptions {
            env: vec![("GREETING".into(), "hi there".into())],
            ..GuestOptions::default()
        };
        let out = Kernel::Host.run(&argv, &opts).unwrap();
        assert_eq!(
            out,
            GuestOutput {
                status: 7,
                stdout: "out hi there\nno-stdin\n".into(),
                stderr: "err\n".into()
            }
        );
    }

    #[test]
    fn host_run_kills_the_whole_group_on_timeout() {
        let dir = RunDir::create("test").unwrap();
        let marker = dir.path().join("survivor");
        // A grandchild that would write the marker after 2 s, unless killed with its group.
        let script = format!("(sleep 2; touch {}) & sleep 60", marker.display());
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let opts = GuestOptions {
            timeout: Duration::from_millis(300),
            ..GuestOptions::default()
        };
        let started = Instant::now();
        let err = Kernel::Host.run(&argv, &opts).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(err, KernelError::Timeout { .. }), "{err:?}");
        assert!(
            err.to_string().contains("did not finish within 0.3 s"),
            "{err}"
        );
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "a process of the timed-out group survived"
        );
    }

    #[test]
    fn bad_input_is_refused_before_anything_runs() {
        assert!(matches!(
            Kernel::Host.run(&[], &GuestOptions::default()),
            Err(KernelError::EmptyCommand)
        ));
        let opts = GuestOptions {
            env: vec![("A=B".into(), "x".into())],
            ..GuestOptions::default()
        };
        let err = Kernel::Host.run(&["true".to_string()], &opts).unwrap_err();
        assert!(matches!(err, KernelError::BadEnvName(_)), "{err:?}");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let err = Kernel::Host
            .run(
                &["unbloat-no-such-program".to_string()],
                &GuestOptions::default(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("unbloat-no-such-program"), "{err}");
    }

    #[test]
    fn the_forced_choice_is_obeyed_or_refused() {
        assert_eq!(
            Kernel::detect_forced("host", &["cake"]).unwrap(),
            Kernel::Host
        );
        let err = Kernel::detect_forced("qemu", &["cake"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "UNBLOAT_KERNEL=qemu is not understood: use `host` or `uml`"
        );
        match Kernel::detect_forced("uml", &["cake"]) {
            Ok(Kernel::Uml(uml)) => assert!(uml.describe().contains(&uml.version)),
            Ok(Kernel::Host) => panic!("uml was forced"),
            Err(e) => assert!(e.to_string().contains("make uml"), "{e}"),
        }
    }

    #[test]
    fn no_kernel_says_what_is_missing_what_to_install_and_about_root() {
        let err = KernelError::NoKernel {
            required: vec!["cake".into(), "htb".into()],
            host: "the host kernel could not be probed: that needs root".into(),
            uml: "linux.uml is not installed; install it with `apt-get install user-mode-linux`"
                .into(),
            root: false,
        };
        assert_eq!(
            err.to_string(),
            "no kernel here has cake, htb: the host kernel could not be probed: that needs root; and \
             User-Mode Linux cannot stand in: linux.uml is not installed; install it with \
             `apt-get install user-mode-linux`"
        );
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a", 5), "a");
        assert_eq!(tail_lines("", 5), "");
    }

    #[test]
    fn run_dirs_are_private_distinct_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let a = RunDir::create("test").unwrap();
        let b = RunDir::create("test").unwrap();
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_absolute());
        assert_eq!(
            std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let path = a.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        drop(a);
        assert!(!path.exists());
    }
}
