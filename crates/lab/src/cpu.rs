//! Is the machine, rather than the link, the limit? The share of time the CPUs were busy while
//! a test's load ran, from `/proc/stat` sampled beside the test.
//!
//! OpenWrt's SQM guide (seed 001) gives the rule of thumb: watch `top -d 1` under load; if the
//! CPU "rarely falls idle" (an observed minimum of ~10 % idle in a one-second interval already
//! "indicates CPU limitations"), shaping and measuring are CPU-bound, and goodput and latency say
//! more about the machine than about the link. The lab applies that rule: a run with any second
//! of its load phase less than [`IDLE_MIN`] idle is CPU-bound. The mean over the whole load hides
//! such seconds: a host that slowed to half speed gave runs 84 % busy on average whose shaped
//! latency was 70-100 ms, not the usual 1 ms. In User-Mode Linux `/proc/stat` is the guest's
//! single CPU, which is exactly the one that counts.
//!
//! What this cannot see: host CPU taken by other processes. The guest counts the time the host
//! does not schedule it as idle (two busy loops on a 2-core host left a shaped run 33 % busy,
//! busiest second 44 %, at 155 ms of induced latency). The unshaped calibration caught that
//! case (77 % of the link's goodput); a host that gets busy only after it is not caught.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Below this idle share in a second of the load, a run is CPU-bound (seed 001's "10 % idle").
pub const IDLE_MIN: f64 = 0.10;
const PERIOD: Duration = Duration::from_millis(200);
/// `top -d 1`'s interval, over which the seed's rule reads the idle share.
const WINDOW_S: f64 = 1.0;

/// How busy the CPU was during a window: on average, and in its busiest second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    pub mean: f64,
    pub peak: f64,
}

impl CpuUse {
    /// Seed 001's sign of a CPU limit: some second left less than [`IDLE_MIN`] idle.
    pub fn bound(&self) -> bool {
        is_bound(self.peak)
    }
}

/// Whether a busiest second this busy is seed 001's sign of a CPU limit.
pub fn is_bound(peak_busy: f64) -> bool {
    peak_busy > 1.0 - IDLE_MIN
}

/// (busy, total) jiffies of all CPUs, from the `cpu` line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal ...; guest time is already in user.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

fn read() -> Option<(u64, u64)> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Samples `/proc/stat` every 200 ms from [`Sampler::start`] until [`Sampler::finish`].
pub struct Sampler {
    started: Instant,
    samples: Arc<Mutex<Vec<(f64, u64, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub fn start() -> Sampler {
        let started = Instant::now();
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&samples), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Some((busy, total)) = read() {
                    let t = started.elapsed().as_secs_f64();
                    s.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((t, busy, total));
                }
                std::thread::sleep(PERIOD);
            }
        });
        Sampler {
            started,
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the CPU's use between `from` and `to` seconds after the start, if at
    /// least two samples fall in that window.
    pub fn finish(mut self, from: f64, to: f64) -> Option<CpuUse> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.started;
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some(CpuUse {
            mean: busy_share(&samples, from, to)?,
            peak: peak_busy_share(&samples, from, to)?,
        })
    }
}

/// The busy share between the first and last sample inside [from, to].
pub fn busy_share(samples: &[(f64, u64, u64)], from: f64, to: f64) -> Option<f64> {
    let inside: Vec<_> = samples
        .iter()
        .filter(|(t, _, _)| *t >= from && *t <= to)
        .collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let total = last.2.checked_sub(first.2)?;
    if total == 0 {
        return None;
    }
    Some(last.1.saturating_sub(first.1) as f64 / total as f64)
}

/// The busy share of the busiest interval of at least [`WINDOW_S`] between samples inside
/// [from, to]; the whole window's share when it is shorter than that.
pub fn peak_busy_share(samples: &[(f64, u64, u64)], from: f64, to: f64) -> Option<f64> {
    let inside: Vec<_> = samples
        .iter()
        .filter(|(t, _, _)| *t >= from && *t <= to)
        .collect();
    let share = |a: &(f64, u64, u64), b: &(f64, u64, u64)| {
        let total = b.2.checked_sub(a.2).filter(|&t| t > 0)?;
        Some(b.1.saturating_sub(a.1) as f64 / total as f64)
    };
    let peak = inside
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let b = inside[i..].iter().find(|b| b.0 - a.0 >= WINDOW_S - 1e-9)?;
            share(a, b)
        })
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    peak.or_else(|| share(inside.first()?, inside.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_gives_busy_and_total() {
        let text = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\n";
        assert_eq!(parse_proc_stat(text), Some((150, 1000)));
        assert_eq!(parse_proc_stat("intr 1 2 3"), None);
    }

    #[test]
    fn the_share_covers_only_the_window() {
        // Idle before 5 s, fully busy from 5 to 10 s.
        let samples = [
            (4.0, 0, 400),
            (5.0, 0, 500),
            (7.5, 250, 750),
            (10.0, 500, 1000),
            (12.0, 500, 1200),
        ];
        assert_eq!(busy_share(&samples, 5.0, 10.0), Some(1.0));
        assert_eq!(busy_share(&samples, 4.0, 12.0), Some(500.0 / 800.0));
        assert_eq!(busy_share(&samples, 20.0, 30.0), None);
    }

    #[test]
    fn one_saturated_second_makes_a_run_cpu_bound_that_the_mean_calls_fine() {
        // 200 ms samples at 100 jiffies/s: idle for 4 s, then one second fully busy, then idle.
        let mut samples = vec![];
        let (mut busy, mut total) = (0u64, 0u64);
        for i in 0..=30 {
            let t = i as f64 * 0.2;
            samples.push((t, busy, total));
            total += 20;
            if (4.0..5.0).contains(&t) {
                busy += 20;
            } else {
                busy += 4;
            }
        }
        let mean = busy_share(&samples, 0.0, 6.0).unwrap();
        let peak = peak_busy_share(&samples, 0.0, 6.0).unwrap();
        assert!(mean < 0.4, "{mean}");
        assert!((peak - 1.0).abs() < 1e-9, "{peak}");
        assert!(CpuUse { mean, peak }.bound());
        assert!(!CpuUse { mean, peak: 0.85 }.bound());
        // Shorter than a second: the whole window's share.
        assert_eq!(peak_busy_share(&samples[..3], 0.0, 0.4), Some(0.2));
        assert_eq!(peak_busy_share(&samples, 20.0, 30.0), None);
    }

    #[test]
    fn this_machine_reports_its_cpu() {
        let (busy, total) = read().expect("/proc/stat has a cpu line");
        assert!(total > 0 && busy <= total);
    }
}
