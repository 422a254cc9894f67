//! The loop: probes out, answers in, a tick every [`Config::tick`] with the bytes the interface
//! carried, and the new rates to whoever shapes ([`Link`]), until asked to stop.
//!
//! One thread, one raw socket per family, and the rates set through the caller's `Link`, which
//! for `unbloat autorate` is `set-rate`'s in-place transaction over rtnetlink: no process is
//! started while it runs (cake-autorate starts `tc` for every change, and a pinger per reflector).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use unbloat_units::Rate;

use crate::controller::{Config, Controller, Tick};
use crate::pinger::Pinger;

/// What the loop needs from the shaped interface.
pub trait Link {
    /// The bytes carried so far, download and upload (after the shapers: what the link got).
    fn carried(&mut self) -> Result<(u64, u64), String>;
    /// Shapes at these rates from now on.
    fn set_rates(&mut self, down: Rate, up: Rate) -> Result<(), String>;
}

/// How a run went.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub seconds: f64,
    pub probes: u64,
    pub answers: u64,
    pub rate_changes: u64,
    pub replaced: u64,
    /// Ticks at which the rates fell back to base for want of answers.
    pub stalled_ticks: u64,
    /// Turns of the loop: each is a wait that ended (an answer, a stranger's ICMP, a probe or
    /// a tick due), what the controller's CPU time goes with.
    pub wakeups: u64,
    /// Replies with the probes' identifier that answered none of them (forged, duplicated or
    /// later than 10 s): dropped, never a sample.
    pub unmatched: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read the interface's counters: {0}")]
    Counters(String),
    #[error("cannot set the rates: {0}")]
    SetRates(String),
    #[error("the probes' socket failed: {0}")]
    Socket(std::io::Error),
}

/// Runs until `stop` is set (or `until` has passed). `on_tick` sees every tick, for the log.
pub fn run(
    cfg: Config,
    link: &mut dyn Link,
    pinger: &Pinger,
    stop: &AtomicBool,
    until: Option<Duration>,
    on_tick: &mut dyn FnMut(&Tick),
) -> Result<Summary, RunError> {
    let epoch = Instant::now();
    let now = || epoch.elapsed();
    let tick_every = cfg.tick;
    let mut c = Controller::new(cfg, now());
    let mut summary = Summary::default();
    let mut applied = c.rates();
    let mut last_bytes = link.carried().map_err(RunError::Counters)?;
    let mut last_tick = now();
    // The clock is read once per turn of the loop and once per answer: in User-Mode Linux
    // (and on small routers without a vDSO) every read is a system call.
    let mut t = now();
    while !stop.load(Ordering::SeqCst) && until.is_none_or(|u| t < u) {
        for (addr, method) in c.due(t) {
            // A reflector that cannot be sent to (no route, for one) is a miss like any other.
            if let Ok(seq) = pinger.send(addr, method) {
                c.sent(u32::from(seq), addr, t);
                summary.probes += 1;
            }
        }
        let wait = c.next_wake(last_tick).saturating_sub(t);
        let answer = pinger.recv(wait).map_err(RunError::Socket)?;
        summary.wakeups += 1;
        t = now();
        let mut now_please = false;
        if let Some(a) = answer {
            now_please = c.answered(u32::from(a.seq), a.from, a.delay, t);
            summary.answers += 1;
        }
        // The achieved rate needs some time to count over: a tick at once, but not within
        // 50 ms of the last.
        let early = now_please && t >= last_tick + tick_every / 4;
        if t < last_tick + tick_every && !early {
            continue;
        }
        let bytes = link.carried().map_err(RunError::Counters)?;
        let secs = t.saturating_sub(last_tick).as_secs_f64().max(1e-3);
        // A counter that went backwards is a re-created device: nothing carried this tick.
        let rate = |new: u64, old: u64| {
            Rate::from_bits_per_sec((new.saturating_sub(old) as f64 * 8.0 / secs) as u64)
        };
        let achieved = (rate(bytes.0, last_bytes.0), rate(bytes.1, last_bytes.1));
        last_bytes = bytes;
        last_tick = t;
        let tick = c.tick(t, Duration::ZERO, achieved);
        summary.replaced += tick.replaced.len() as u64;
        summary.stalled_ticks += u64::from(tick.stalled());
        let rates = c.rates();
        if rates != applied {
            link.set_rates(rates.0, rates.1)
                .map_err(RunError::SetRates)?;
            applied = rates;
            summary.rate_changes += 1;
        }
        on_tick(&tick);
    }
    summary.seconds = now().as_secs_f64();
    summary.unmatched = pinger.unmatched();
    Ok(summary)
}
