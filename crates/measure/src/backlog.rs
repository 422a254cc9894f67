//! What this machine's own egress queue holds during a test: the root qdisc's backlog of the
//! interface the test leaves by, sampled over rtnetlink (a dump is a few system calls; a `tc`
//! process ten times a second would load the machine it measures). `unbloat_report::locate`
//! counts it as this machine's share of the delay.
//!
//! What callers can rely on: nothing here fails a test. A device or a netlink socket that cannot
//! be read gives no samples and a note.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use unbloat_report::model::BacklogSample;
use unbloat_system::rtnl::Rtnl;
use unbloat_units::IfName;

/// How often the backlog is read: 10 a second gives 50 samples in a 5 s steady state.
pub const EVERY: Duration = Duration::from_millis(100);

/// How long [`Sampler::finish`] waits for the sampling thread.
pub const FINISH_WAIT: Duration = Duration::from_millis(500);

/// A running sampler; [`Sampler::finish`] stops it and returns what it read.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<BacklogSample>>>,
    thread: Option<JoinHandle<Option<String>>>,
}

impl Sampler {
    /// Starts reading `dev`'s root backlog every [`EVERY`], times relative to `epoch`; an error
    /// in words when the device or netlink cannot be read at all.
    pub fn start(dev: &str, epoch: Instant) -> Result<Sampler, String> {
        let dev: IfName = dev
            .parse()
            .map_err(|e: unbloat_units::UnitError| e.to_string())?;
        let rtnl = Rtnl::open().map_err(|e| format!("netlink: {e}"))?;
        let index = rtnl
            .link(dev.as_str())
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{dev} is not there"))?
            .index;
        // Read once before the thread starts, so that a device that cannot be read is said now.
        root_backlog(&rtnl, &dev, index)?;
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s, out) = (Arc::clone(&stop), Arc::clone(&samples));
        let thread = thread::Builder::new()
            .name("unbloat-backlog".into())
            .spawn(move || {
                let mut next = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    let t = epoch.elapsed().as_secs_f64();
                    match root_backlog(&rtnl, &dev, index) {
                        Ok(bytes) => out
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(BacklogSample { t, bytes }),
                        Err(e) => return Some(e),
                    }
                    next += EVERY;
                    thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                None
            })
            .map_err(|e| format!("starting the backlog thread: {e}"))?;
        Ok(Sampler {
            stop,
            samples,
            thread: Some(thread),
        })
    }

    /// Stops the sampling; the samples, and a note when it ended early. It waits at most
    /// [`FINISH_WAIT`] for the thread: a netlink read that does not come back (seen in User-Mode
    /// Linux under load) must not hold the test's end; the thread is left to the process's exit.
    pub fn finish(mut self) -> (Vec<BacklogSample>, Option<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let waited = Instant::now();
        let thread = self.thread.take();
        while thread.as_ref().is_some_and(|t| !t.is_finished()) && waited.elapsed() < FINISH_WAIT {
            thread::sleep(Duration::from_millis(10));
        }
        let ended = match thread {
            Some(t) if t.is_finished() => t
                .join()
                .ok()
                .flatten()
                .map(|e| format!("this machine's egress backlog: reading stopped: {e}")),
            Some(_) => Some(format!(
                "this machine's egress backlog: a netlink read did not come back within {} ms; the samples before it are kept",
                FINISH_WAIT.as_millis()
            )),
            None => None,
        };
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        (samples, ended)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The bytes the root qdisc of `dev` (at `index`) holds (its backlog counts its children's); 0 for a device
/// without a queue (`noqueue`).
fn root_backlog(rtnl: &Rtnl, dev: &IfName, index: u32) -> Result<u64, String> {
    let qdiscs = unbloat_system::tcnl::qdiscs(rtnl, dev, index).map_err(|e| e.to_string())?;
    Ok(qdiscs
        .iter()
        .filter(|q| q.root)
        .filter_map(|q| q.stats.as_ref())
        .map(|s| s.backlog)
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_sampled_and_a_missing_device_is_said() {
        let epoch = Instant::now();
        let sampler = Sampler::start("lo", epoch).expect("lo can be read");
        thread::sleep(EVERY * 3);
        let (samples, ended) = sampler.finish();
        assert!(ended.is_none(), "{ended:?}");
        assert!(samples.len() >= 2, "{samples:?}");
        assert!(samples.windows(2).all(|w| w[0].t < w[1].t));
        let err = Sampler::start("nosuchdev0", epoch).err().expect("refused");
        assert!(err.contains("nosuchdev0"), "{err}");
    }
}
