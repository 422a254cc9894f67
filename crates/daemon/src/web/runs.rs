//! `unbloat test` and `unbloat tune` started from the page: a child process of this very
//! binary, one at a time, its output kept as progress and its files served afterwards.
//!
//! The page says what to run in typed fields ([`RunRequest`]), never a command line: each value
//! is checked here (refused if it could be read as a flag, durations and the interface read as
//! their types) and the arguments are written from them by [`unbloat_shaper::invocation`], each
//! value one argument (no shell). Each run writes into `runs/ID/` in the run directory
//! (`--out`), which the page links to when the run ends. A tune run without `--apply` puts the old shaping back
//! at its end; stopping a run sends it SIGINT, which both commands answer by putting back what
//! was there before.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use unbloat_shaper::invocation::{FarEnd, Invocation, Test, Tune};
use unbloat_system::state::now_unix;
use unbloat_units::duration::parse_test_duration;
use unbloat_units::{IfName, Time};

use super::files;

/// Lines of output kept per run (the newest): a tune run prints a few hundred.
const MAX_LINES: usize = 400;
/// Runs listed (this daemon's, newest first), and run directories kept on disk (the run
/// directory is usually a tmpfs: memory).
const KEEP_RUNS: usize = 20;
/// The longest value the page may send for one field.
const MAX_VALUE: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Test,
    Tune,
}

/// What the page's run form sends.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub kind: RunKind,
    /// The far end, as `unbloat test` takes it.
    pub server: String,
    /// tune: the interface.
    pub iface: Option<String>,
    /// test: `--profile`.
    pub profile: Option<String>,
    /// test: `--duration`.
    pub duration: Option<String>,
    /// tune: `--max-time`.
    pub max_time: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Running,
    Done,
    Failed,
}

/// One run as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: String,
    pub kind: RunKind,
    /// The command line, for people (`unbloat test HOST --out ...`).
    pub command: String,
    pub state: RunState,
    pub exit_code: Option<i32>,
    pub started_unix: u64,
    /// The newest lines of its stdout and stderr, in the order they came.
    pub lines: VecDeque<String>,
    /// Files in its directory, served under `/runs/ID/`.
    pub files: Vec<String>,
}

/// Why a run was not started: the HTTP status and the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct NotStarted(pub u16, pub String);

/// The runs of this daemon.
pub struct Runs {
    exe: PathBuf,
    dir: PathBuf,
    list: Arc<Mutex<VecDeque<RunView>>>,
    /// The run under way, until it is reaped. Only reaped under this lock, so a signal sent
    /// under it reaches our child and never a process that got its pid afterwards.
    child: Arc<Mutex<Option<Child>>>,
}

impl Runs {
    /// Runs of `exe` (this binary) writing under `dir` (`runs/` in the run directory).
    pub fn new(exe: PathBuf, dir: PathBuf) -> Runs {
        Runs {
            exe,
            dir,
            list: Arc::default(),
            child: Arc::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn list(&self) -> Vec<RunView> {
        self.lock().iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<RunView>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts `req`, unless a run is under way (409) or a value is refused (400).
    pub fn start(&self, req: &RunRequest) -> Result<RunView, NotStarted> {
        let mut list = self.lock();
        if let Some(r) = list.iter().find(|r| r.state == RunState::Running) {
            return Err(NotStarted(
                409,
                format!("run {} is still under way; one run at a time", r.id),
            ));
        }
        let started_unix = now_unix();
        let kind = match req.kind {
            RunKind::Test => "test",
            RunKind::Tune => "tune",
        };
        let mut id = format!("{started_unix}-{kind}");
        let mut n = 1;
        while self.dir.join(&id).exists() {
            n += 1;
            id = format!("{started_unix}-{kind}-{n}");
        }
        let out = self.dir.join(&id);
        let args = arguments(req, &out).map_err(|e| NotStarted(400, e))?;
        std::fs::create_dir_all(&out)
            .map_err(|e| NotStarted(500, format!("cannot create {}: {e}", out.display())))?;
        let mut command = Command::new(&self.exe);
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The daemon blocks SIGHUP, SIGINT and SIGTERM in every thread (it waits for them with
        // sigwait), and a child inherits the mask through exec, as it inherits an ignored
        // SIGINT (a daemon started in the background of a script has one): the child starts
        // with these signals unblocked and at their defaults, so the run can be stopped and
        // tune's Ctrl-C handling (it puts the old shaping back) works as in a shell.
        // SAFETY: between fork and exec only async-signal-safe calls (sigemptyset, sigprocmask,
        // signal).
        unsafe {
            command.pre_exec(|| {
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| NotStarted(500, format!("cannot start {}: {e}", self.exe.display())))?;
        let view = RunView {
            id: id.clone(),
            kind: req.kind,
            command: format!("unbloat {}", args.join(" ")),
            state: RunState::Running,
            exit_code: None,
            started_unix,
            lines: VecDeque::new(),
            files: vec![],
        };
        list.push_front(view.clone());
        list.truncate(KEEP_RUNS);
        drop(list);
        prune(&self.dir, KEEP_RUNS);
        let readers: Vec<_> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        .map(|pipe| {
            let (list, id) = (self.list.clone(), id.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let line = last_state(&line);
                    with_run(&list, &id, |r| {
                        if r.lines.len() == MAX_LINES {
                            r.lines.pop_front();
                        }
                        r.lines.push_back(line);
                    });
                }
            })
        })
        .collect();
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        let (list, current) = (self.list.clone(), self.child.clone());
        std::thread::spawn(move || {
            let status = loop {
                let mut c = current.lock().unwrap_or_else(|e| e.into_inner());
                let Some(child) = c.as_mut() else {
                    break Err(std::io::Error::other("no child"));
                };
                match child.try_wait() {
                    Ok(None) => {}
                    done => {
                        *c = None;
                        break done.map(|s| s.unwrap_or_default());
                    }
                }
                drop(c);
                std::thread::sleep(std::time::Duration::from_millis(100));
            };
            // Every line is in before the run is said to be over.
            for r in readers {
                let _ = r.join();
            }
            let files = files::outputs(&out);
            with_run(&list, &id, |r| {
                r.exit_code = status.as_ref().ok().and_then(|s| s.code());
                r.state = match status {
                    Ok(s) if s.success() => RunState::Done,
                    _ => RunState::Failed,
                };
                r.files = files;
            });
        });
        Ok(view)
    }

    /// Asks the run under way to stop (SIGINT: both commands put back what they changed).
    pub fn stop(&self) -> Result<(), NotStarted> {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let c = child
            .as_ref()
            .ok_or_else(|| NotStarted(409, "no run is under way".into()))?;
        // SAFETY: a signal to our own child, not reaped yet: it is reaped under this lock.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
        Ok(())
    }
}

/// What a terminal would show of `line`: a progress line redrawn with `\r` (and erased with
/// `ESC [K`) keeps its last state.
fn last_state(line: &str) -> String {
    let last = line.rsplit('\r').find(|s| !s.is_empty()).unwrap_or("");
    last.replace("\x1b[K", "")
}

fn with_run(list: &Mutex<VecDeque<RunView>>, id: &str, f: impl FnOnce(&mut RunView)) {
    let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = list.iter_mut().find(|r| r.id == id) {
        f(r);
    }
}

/// The child's arguments for `req`, writing into `out`.
fn arguments(req: &RunRequest, out: &Path) -> Result<Vec<String>, String> {
    let value = |name: &str, v: &str| -> Result<String, String> {
        let v = v.trim();
        if v.is_empty() || v.len() > MAX_VALUE {
            return Err(format!(
                "{name}: give a value of 1 to {MAX_VALUE} characters"
            ));
        }
        // A value that starts with `-` would be read as a flag; spaces or control characters
        // belong in no host, interface, profile or time.
        if v.starts_with('-') || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{name}: {:?} is not a value (no leading -, no spaces)",
                unbloat_shaper::clip::clip(v)
            ));
        }
        Ok(v.to_string())
    };
    // A duration as the commands read it (a bare number is seconds); each checks its own range.
    let time = |name: &str, v: &str| -> Result<Time, String> {
        let v = value(name, v)?;
        parse_test_duration(&v, Time::from_micros(0)..=Time::from_secs(86_400))
            .map_err(|e| format!("{name}: {e}"))
    };
    let far_end = FarEnd {
        server: Some(value("server", &req.server)?),
        ..FarEnd::default()
    };
    let out = Some(out.to_path_buf());
    let run: Invocation = match req.kind {
        RunKind::Test => Test {
            far_end,
            profile: req
                .profile
                .as_deref()
                .map(|p| value("profile", p))
                .transpose()?,
            duration: req
                .duration
                .as_deref()
                .map(|d| time("duration", d))
                .transpose()?,
            out,
            ..Test::default()
        }
        .into(),
        RunKind::Tune => {
            let iface = req.iface.as_deref().ok_or("tune: which interface?")?;
            let iface: IfName = value("iface", iface)?
                .parse()
                .map_err(|e| format!("iface: {e}"))?;
            let max_time = match req.max_time.as_deref() {
                // tune's own default, said by leaving the flag out.
                Some(m) if m.trim() == "auto" => None,
                Some(m) => Some(time("max-time", m)?),
                None => None,
            };
            Tune {
                iface,
                far_end,
                max_time,
                bound: None,
                no_sweep: false,
                apply: false,
                out,
                json: false,
            }
            .into()
        }
    };
    run.argv().map_err(|e| e.to_string())
}

/// Removes the oldest run directories beyond `keep`.
fn prune(dir: &Path, keep: usize) {
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort();
    let excess = dirs.len().saturating_sub(keep);
    for (_, d) in dirs.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A stand-in for unbloat: prints its arguments, writes a report into --out, and waits a
    /// moment when asked to (`slow` as the server). Perl, not sh: dash clears the signal mask it
    /// inherits, which would hide a child started with SIGINT blocked.
    const FAKE: &str = r#"#!/usr/bin/perl
$| = 1;
print "args: @ARGV\n";
print STDERR "progress\n";
my ($out) = map { $ARGV[$_ + 1] } grep { $ARGV[$_] eq "--out" } 0 .. $#ARGV;
sleep 1 if grep { $_ eq "slow" } @ARGV;
open(my $f, ">", "$out/index.html") or die; print $f "<h1>report</h1>\n"; close $f;
open($f, ">", "$out/plot.svg") or die; print $f "<svg/>\n"; close $f;
"#;

    fn runs() -> (Runs, crate::web::scratch::Scratch) {
        let scratch = crate::web::scratch::Scratch::new("runs");
        let dir = scratch.path();
        let exe = dir.join("fake-unbloat");
        std::fs::write(&exe, FAKE).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        (Runs::new(exe, dir.join("runs")), scratch)
    }

    fn req(server: &str) -> RunRequest {
        RunRequest {
            kind: RunKind::Test,
            server: server.into(),
            iface: None,
            profile: Some("rrul".into()),
            duration: None,
            max_time: None,
        }
    }

    fn wait_done(runs: &Runs) -> RunView {
        let t0 = Instant::now();
        loop {
            let r = runs.list()[0].clone();
            if r.state != RunState::Running || t0.elapsed() > Duration::from_secs(10) {
                return r;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_run_streams_its_lines_lists_its_files_and_runs_alone() {
        let (runs, _scratch) = runs();
        let first = runs.start(&req("slow")).unwrap();
        assert_eq!(first.state, RunState::Running);
        let again = runs.start(&req("far.example"));
        assert_eq!(again.unwrap_err().0, 409);
        let done = wait_done(&runs);
        assert_eq!((done.state, done.exit_code), (RunState::Done, Some(0)));
        let out = runs.dir().join(&done.id);
        assert_eq!(
            done.lines.iter().find(|l| l.starts_with("args:")).unwrap(),
            &format!("args: test slow --profile rrul --out {}", out.display())
        );
        assert!(done.lines.contains(&"progress".to_string()), "stderr too");
        assert_eq!(done.files, ["index.html", "plot.svg"]);
        assert!(
            runs.start(&req("far.example")).is_ok(),
            "the next may start"
        );
        wait_done(&runs);
        assert_eq!(runs.stop().unwrap_err().0, 409, "nothing to stop");
        // Started with SIGINT blocked, as the daemon's threads have it: still stoppable.
        // SAFETY: this test thread's own mask, put back below.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            runs.start(&req("slow")).unwrap();
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
        runs.stop().unwrap();
        let stopped = wait_done(&runs);
        assert_eq!((stopped.state, stopped.exit_code), (RunState::Failed, None));
        assert_eq!(runs.list().len(), 3);
    }

    #[test]
    fn a_redrawn_progress_line_keeps_its_last_state() {
        assert_eq!(last_state("\r\x1b[K 1 s\r\x1b[K 2 s"), " 2 s");
        assert_eq!(last_state("\r\x1b[K 3 s\r"), " 3 s");
        assert_eq!(last_state("plain"), "plain");
    }

    #[test]
    fn values_that_could_be_flags_are_refused() {
        let out = Path::new("/run/unbloat/runs/1");
        for bad in ["--apply", "-x", "a b", "", "a\nb"] {
            assert!(arguments(&req(bad), out).is_err(), "{bad:?}");
        }
        let tune = RunRequest {
            kind: RunKind::Tune,
            iface: Some("wan0".into()),
            max_time: Some("2m".into()),
            ..req("far.example")
        };
        assert_eq!(
            arguments(&tune, out).unwrap(),
            [
                "tune",
                "wan0",
                "--server",
                "far.example",
                "--max-time",
                "2m",
                "--out",
                "/run/unbloat/runs/1"
            ]
        );
        let no_iface = RunRequest {
            iface: None,
            ..tune
        };
        assert!(arguments(&no_iface, out).is_err());
    }
}
