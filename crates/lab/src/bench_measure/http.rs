//! What the HTTP load costs this machine: CPU seconds per gigabit moved, for `unbloat-lab bench`
//! to set beside iperf3's at the same rate.
//!
//! What callers can rely on: [`load_cpu_cost`] runs the HTTP load alone (no probes' load on the
//! CPU beyond the preflight) in one direction for `duration`, and reports the process's CPU time
//! (`getrusage(RUSAGE_SELF)`, all threads) over exactly that window; run it in a process that
//! does nothing else meanwhile. The rate is whatever the path allows: shape the link (or the
//! server) to the rate you want compared.

use std::time::{Duration, Instant};

use unbloat_report::Direction;

use unbloat_measure::http::open;
use unbloat_measure::http::{HttpOptions, HttpTarget};
use unbloat_measure::profile::StreamPlan;
use unbloat_measure::MeasureError;

/// CPU cost of one HTTP load run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadCpuCost {
    /// Goodput bytes over the window (TCP_INFO, as the load counts them).
    pub bytes: u64,
    pub seconds: f64,
    pub user_s: f64,
    pub system_s: f64,
    /// The most connections the ramp opened.
    pub connections: usize,
}

impl LoadCpuCost {
    /// Goodput, bit/s.
    pub fn bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds.max(1e-9)
    }

    /// CPU seconds (user + system) per gigabit of goodput.
    pub fn cpu_s_per_gbit(&self) -> f64 {
        (self.user_s + self.system_s) / (self.bytes as f64 * 8.0 / 1e9).max(1e-12)
    }
}

/// Runs the load in `direction` for `duration` and measures its CPU cost (see the module doc).
pub fn load_cpu_cost(
    target: &HttpTarget,
    direction: Direction,
    duration: Duration,
    opts: &HttpOptions,
) -> Result<LoadCpuCost, MeasureError> {
    let plan = StreamPlan {
        name: "bench".into(),
        direction,
        dscp: 0,
    };
    let (mut load, probes) = open(target, &[plan], opts, Instant::now())?;
    // Probes are not part of the load's cost: stop them first.
    let _ = probes.finish(Duration::ZERO, 0);
    let (u0, s0) = cpu_times();
    let started = Instant::now();
    load.start()?;
    std::thread::sleep(duration);
    let bytes: u64 = load.bytes().iter().sum();
    let seconds = started.elapsed().as_secs_f64();
    let (u1, s1) = cpu_times();
    let connections = load.streams().len();
    let failed = load.error();
    load.stop();
    if let Some(why) = failed {
        return Err(MeasureError::far_end(target.small.authority(), why));
    }
    Ok(LoadCpuCost {
        bytes,
        seconds,
        user_s: u1 - u0,
        system_s: s1 - s0,
        connections,
    })
}

/// User and system CPU seconds of this process so far.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage writes one rusage struct, which is plain old data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}
