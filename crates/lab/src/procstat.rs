//! A running process's resident memory, threads and open files, read from /proc (proc(5):
//! `/proc/PID/status`'s VmRSS, VmHWM and Threads, and the entries of `/proc/PID/fd`), and a
//! sampler that watches one process on a thread of its own: the hostile and soak benchmarks'
//! view of the server they attack.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Reading {
    /// Resident memory (VmRSS), KiB.
    pub rss_kib: u64,
    /// The most resident memory the process has had (VmHWM), KiB: the kernel's own peak, so a
    /// spike between two samples is not missed.
    pub hwm_kib: u64,
    pub threads: u64,
    /// Open file descriptors (sockets among them).
    pub fds: u64,
}

/// Reads `pid` now; `None` once it has gone.
pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Reading {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        threads: field("Threads:"),
        fds,
    })
}

/// What a [`Sampler`] saw: the first and last readings and the most of each.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Watched {
    pub first: Reading,
    pub last: Reading,
    pub peak: Reading,
    pub samples: u64,
}

impl Watched {
    fn add(&mut self, r: Reading) {
        if self.samples == 0 {
            self.first = r;
        }
        self.last = r;
        self.samples += 1;
        let p = &mut self.peak;
        p.rss_kib = p.rss_kib.max(r.rss_kib);
        p.hwm_kib = p.hwm_kib.max(r.hwm_kib);
        p.threads = p.threads.max(r.threads);
        p.fds = p.fds.max(r.fds);
    }
}

/// Reads a process every `every` on a thread until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Watched>,
}

impl Sampler {
    pub fn start(pid: u32, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut w = Watched::default();
            while !flag.load(Ordering::Relaxed) {
                match read(pid) {
                    Some(r) => w.add(r),
                    None => break,
                }
                std::thread::sleep(every);
            }
            if let Some(r) = read(pid) {
                w.add(r);
            }
            w
        });
        Sampler { stop, handle }
    }

    /// Stops sampling (one last reading first) and returns what it saw.
    pub fn finish(self) -> Watched {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_threads_and_files() {
        let r = read(std::process::id()).expect("our own /proc entry");
        assert!(r.rss_kib > 0 && r.hwm_kib >= r.rss_kib, "{r:?}");
        assert!(r.threads >= 1 && r.fds >= 3, "{r:?}");
        let s = Sampler::start(std::process::id(), Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(30));
        let w = s.finish();
        assert!(w.samples >= 2 && w.peak.threads >= 2, "{w:?}");
    }
}
