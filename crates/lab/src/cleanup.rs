//! Removing what a lab run created, whatever ends the run: success, an error, a panic, or a
//! SIGINT/SIGTERM.
//!
//! Drop guards ([`crate::topology::LiveTopology`]) cover the first three. A signal does not run
//! destructors, so every live topology also records its namespaces and processes here, in a
//! process-wide registry; the first registration installs handlers for SIGINT and SIGTERM. The
//! handler itself only writes the signal number to a pipe (the one thing that is safe in a
//! signal handler); a watcher thread reads it, removes everything registered, and exits with
//! 128 + the signal number, as a shell reports a process a signal ended.
//!
//! Why global state: a signal is process-wide, and the handler cannot be handed a reference to
//! the topologies. The registry holds names and pids only, never the topologies themselves.
//!
//! The registry stays locked from the start of a signal's cleanup to the exit, so a topology being
//! built cannot add a namespace behind its back; an `ip netns add` already started when the signal
//! came is caught by a second pass 200 ms later.

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use unbloat_system::runner::{Cmd, Runner, SystemRunner};

#[derive(Default)]
struct Entry {
    namespaces: Vec<String>,
    pids: Vec<u32>,
}

static REGISTRY: Mutex<BTreeMap<u64, Entry>> = Mutex::new(BTreeMap::new());
static NEXT_ID: Mutex<u64> = Mutex::new(0);
static INSTALL: Once = Once::new();
/// The write end of the signal pipe, set once by [`install_handlers`].
static PIPE_WRITE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

fn registry() -> MutexGuard<'static, BTreeMap<u64, Entry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// One live topology's record in the registry; removed from it when dropped.
pub struct Registration(u64);

/// Adds a record to the registry, installing the signal handlers on first use.
pub fn register() -> Registration {
    INSTALL.call_once(install_handlers);
    let id = {
        let mut next = NEXT_ID.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        *next
    };
    registry().insert(id, Entry::default());
    Registration(id)
}

impl Registration {
    pub fn add_namespace(&self, ns: &str) {
        if let Some(e) = registry().get_mut(&self.0) {
            e.namespaces.push(ns.to_string());
        }
    }
    pub fn add_pid(&self, pid: u32) {
        if let Some(e) = registry().get_mut(&self.0) {
            e.pids.push(pid);
        }
    }
    pub fn remove_pid(&self, pid: u32) {
        if let Some(e) = registry().get_mut(&self.0) {
            e.pids.retain(|p| *p != pid);
        }
    }
    /// Forgets everything (after a normal cleanup did the work).
    pub fn clear(&self) {
        if let Some(e) = registry().get_mut(&self.0) {
            *e = Entry::default();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry().remove(&self.0);
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_WRITE.load(std::sync::atomic::Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a live local byte.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

fn install_handlers() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        // Without a pipe there is no safe handler; drop guards still clean up on errors.
        return;
    }
    PIPE_WRITE.store(fds[1], std::sync::atomic::Ordering::Relaxed);
    let read_fd = fds[0];
    let spawned = std::thread::Builder::new()
        .name("unbloat-lab-signals".into())
        .spawn(move || loop {
            let mut byte = 0u8;
            // SAFETY: reads one byte into a local buffer from the pipe we created.
            let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                clean_everything_and_exit(i32::from(byte));
            }
            if n == 0 {
                return;
            }
        });
    if spawned.is_err() {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only calls write(2); sigaction is zeroed then filled.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

fn clean_everything_and_exit(sig: i32) -> ! {
    eprintln!("unbloat lab: signal {sig}: removing the lab network");
    let runner = SystemRunner::from_env();
    let reg = registry();
    for pass in 0..2 {
        if pass == 1 {
            std::thread::sleep(Duration::from_millis(200));
        }
        for entry in reg.values() {
            for pid in &entry.pids {
                kill_pid(*pid, libc::SIGKILL);
            }
            remove_namespaces(&runner, &entry.namespaces);
        }
    }
    std::process::exit(128 + sig);
}

fn kill_pid(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill has no memory preconditions; the pid is one we started or one that
            // lives in a namespace we created.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

/// Stops a child we started: SIGTERM, up to 2 s to exit, then SIGKILL. Returns its exit status
/// (128 + signal when a signal ended it), or None if it could not be reaped.
pub fn stop_child(child: &mut Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    let code = |s: std::process::ExitStatus| s.code().or(s.signal().map(|n| 128 + n));
    if let Ok(Some(status)) = child.try_wait() {
        return code(status);
    }
    kill_pid(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(status)) => return code(status),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    child.wait().ok().and_then(code)
}

/// Kills every process left in each namespace, deletes the namespaces, and returns what could
/// not be removed (empty when all is gone).
pub fn remove_namespaces(runner: &dyn Runner, names: &[String]) -> Vec<String> {
    let mut left = Vec::new();
    for ns in names {
        // Processes in our namespace are ours (we made it minutes ago); `ip netns pids` lists them.
        if let Ok(out) = runner.run(&Cmd::ip(["netns", "pids", ns])) {
            for pid in out
                .stdout
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
            {
                kill_pid(pid, libc::SIGKILL);
            }
        }
        match runner.run(&Cmd::ip(["netns", "del", ns])) {
            Ok(out) if out.success() => {}
            // Never created (a build that failed early): nothing to remove.
            Ok(out) if !netns_exists(runner, ns) => drop(out),
            Ok(out) => left.push(format!("namespace {ns}: {}", out.stderr.trim())),
            Err(e) => left.push(format!("namespace {ns}: {e}")),
        }
    }
    left
}

/// Whether `ip netns list` shows `ns`.
pub fn netns_exists(runner: &dyn Runner, ns: &str) -> bool {
    list_netns(runner).iter().any(|n| n == ns)
}

/// The names `ip netns list` shows (the first word of each line).
pub fn list_netns(runner: &dyn Runner) -> Vec<String> {
    runner
        .run(&Cmd::ip(["netns", "list"]))
        .map(|o| {
            o.stdout
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}
