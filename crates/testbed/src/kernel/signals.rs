//! Stop signals during a kernel run: SIGINT (Ctrl-C), SIGTERM (`kill`, a service manager) and
//! SIGHUP (a closed terminal) would kill this process between two lines and leave the run
//! directory (`$TMPDIR/unbloat-uml-*`) behind; the guest itself already dies with us
//! (PR_SET_PDEATHSIG, see `runner::spawn`), its files did not.
//!
//! While a [`SignalGuard`] lives, those signals only set a flag (an atomic store, which is
//! async-signal-safe); the supervising loop looks at it every 50 ms, kills the guest's process
//! group and returns [`KernelError::Interrupted`](super::KernelError::Interrupted), and the run
//! directory is removed as the stack unwinds. The caller then exits with 128 + the signal
//! ([`interrupted_by`]). The previous dispositions come back when the last guard goes.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use super::KernelError;

/// The signals that end a run early instead of killing this process outright.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The stop signal caught during a run, 0 while none was. Sticky: the user asked to stop.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// How many runs are under way (threads may run several), and the dispositions the first one
/// replaced, restored when the last one ends.
static GUARDS: Mutex<(usize, Vec<(libc::c_int, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

/// The signal handler: one atomic store, which is async-signal-safe; the supervising loop does
/// the rest (it looks at [`CAUGHT`] every 50 ms).
extern "C" fn note_signal(signal: libc::c_int) {
    CAUGHT.store(signal, Ordering::SeqCst);
}

/// The stop signal (SIGINT, SIGTERM or SIGHUP) that interrupted a kernel run in this process,
/// if one did: the caller should exit with 128 + it, as a shell reports a process the signal
/// killed.
pub fn interrupted_by() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

pub(super) fn name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

/// While alive, [`STOP_SIGNALS`] set [`CAUGHT`] instead of ending the process.
pub(super) struct SignalGuard;

impl SignalGuard {
    pub(super) fn install() -> Result<SignalGuard, KernelError> {
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        if guards.0 == 0 {
            let mut previous = Vec::new();
            for signal in STOP_SIGNALS {
                // SAFETY: sigaction with a zeroed (valid: empty mask, no flags) struct whose
                // handler is an extern "C" fn that only stores to an atomic; `old` is written
                // by the kernel.
                let old = unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as usize;
                    action.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut action.sa_mask);
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(signal, &action, &mut old) != 0 {
                        let source = io::Error::last_os_error();
                        restore(&previous);
                        return Err(KernelError::Io {
                            what: format!("cannot catch {}", name(signal)),
                            source,
                        });
                    }
                    old
                };
                previous.push((signal, old));
            }
            guards.1 = previous;
        }
        guards.0 += 1;
        Ok(SignalGuard)
    }
}

fn restore(previous: &[(libc::c_int, libc::sigaction)]) {
    for (signal, old) in previous {
        // SAFETY: puts back a disposition sigaction itself returned.
        unsafe {
            libc::sigaction(*signal, old, std::ptr::null_mut());
        }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        guards.0 -= 1;
        if guards.0 == 0 {
            restore(&std::mem::take(&mut guards.1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{libtest_name, read_lossy, GuestOptions, Kernel, RunDir, Uml};
    use super::*;
    use std::fs::File;
    use std::time::{Duration, Instant};

    /// Bug: SIGINT or SIGTERM during a User-Mode Linux run killed the process between two lines
    /// and left its `/tmp/unbloat-uml-*` behind. Now the guest is ended, the run directory
    /// removed, and the process exits with 128 + the signal. The child is this test binary,
    /// filtered to this test, booting a guest that runs `sleep 60`; it is signalled once the
    /// guest runs the command (its `stdout` file exists).
    #[test]
    fn a_stop_signal_ends_the_guest_and_removes_its_run_directory() {
        const CHILD: &str = "UNBLOAT_TEST_SIGNAL_CHILD";
        let test = "a_stop_signal_ends_the_guest_and_removes_its_run_directory";
        if std::env::var_os(CHILD).is_some() {
            let opts = GuestOptions {
                mem_mb: 256,
                timeout: Duration::from_secs(90),
                ..GuestOptions::default()
            };
            let uml = Uml::find().expect("User-Mode Linux");
            let result = Kernel::Uml(uml).run(&["sleep".into(), "60".into()], &opts);
            // As the command line does: 128 + the signal.
            match (&result, interrupted_by()) {
                (Err(KernelError::Interrupted { signal }), Some(caught)) if *signal == caught => {
                    std::process::exit(128 + signal)
                }
                _ => {
                    eprintln!("child: not interrupted: {result:?}");
                    std::process::exit(1)
                }
            }
        }
        if let Err(e) = Uml::find() {
            panic!("this test needs User-Mode Linux: {e}");
        }
        let exe = std::env::current_exe().unwrap();
        let base = std::path::absolute(std::env::temp_dir()).unwrap();
        let logs = RunDir::create("test").unwrap();
        let filter = libtest_name(module_path!()).to_string() + "::" + test;
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let log = logs.path().join(format!("child-{signal}.log"));
            let mut child = std::process::Command::new(&exe)
                .args([
                    filter.as_str(),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .stdout(std::process::Stdio::null())
                .stderr(File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let prefix = format!("unbloat-uml-{}-", child.id());
            let started = Instant::now();
            // The guest's run directory appears once it has its slot, which waits while another
            // lane's `alone` test runs (tune's take minutes): the boot's own minute counts from
            // there.
            let mut has_slot: Option<Instant> = None;
            let run_dir = loop {
                let ours = std::fs::read_dir(&base).unwrap().find_map(|e| {
                    let path = e.ok()?.path();
                    path.file_name()?
                        .to_str()?
                        .starts_with(&prefix)
                        .then_some(path)
                });
                if ours.is_some() && has_slot.is_none() {
                    has_slot = Some(Instant::now());
                }
                if let Some(dir) = ours.filter(|d| d.join("stdout").exists()) {
                    break dir;
                }
                let waited_too_long = match has_slot {
                    Some(t) => t.elapsed() > Duration::from_secs(60),
                    None => started.elapsed() > Duration::from_secs(20 * 60),
                };
                if waited_too_long || child.try_wait().unwrap().is_some() {
                    let _ = child.kill();
                    panic!(
                        "the guest never ran its command: {}",
                        read_lossy(&log).unwrap()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let booted = started.elapsed();
            // SAFETY: kill has no memory preconditions; the child is ours and not yet waited for.
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
            let signalled = Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if signalled.elapsed() > Duration::from_secs(20) {
                    let _ = child.kill();
                    panic!("the child did not end within 20 s of {}", name(signal));
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let log_text = read_lossy(&log).unwrap();
            assert_eq!(status.code(), Some(128 + signal), "{status:?}: {log_text}");
            assert!(!run_dir.exists(), "{} was left behind", run_dir.display());
            // No process (linux.uml or a helper) still names the run directory.
            let needle = run_dir.display().to_string();
            let survivors = |needle: &str| -> Vec<String> {
                std::fs::read_dir("/proc")
                    .unwrap()
                    .filter_map(|e| {
                        let path = e.ok()?.path();
                        let cmdline = std::fs::read(path.join("cmdline")).ok()?;
                        String::from_utf8_lossy(&cmdline)
                            .contains(needle)
                            .then(|| path.display().to_string())
                    })
                    .collect()
            };
            let mut left = survivors(&needle);
            for _ in 0..40 {
                if left.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
                left = survivors(&needle);
            }
            assert!(left.is_empty(), "still running from {needle}: {left:?}");
            eprintln!(
                "{}: guest running after {booted:?}, all gone {:?} after the signal",
                name(signal),
                signalled.elapsed()
            );
        }
    }
}
