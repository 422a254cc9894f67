//! Waiting for the line to drain before each loaded step (issue 55).
//!
//! A step's load ends, and whatever its flows had in flight is still in the queues on the path:
//! on a modem with a deep FIFO, seconds of it. A step that starts before that queue has left
//! judges the previous step's leftovers, not its own rate. On the lab's adsl-remote (1 Mbit/s
//! down, 128 kbit/s up, a 128 KiB modem FIFO) the upload's leg read +2.7 s in every both-ways
//! check after 1 s of idle, and the search kept the download at 72 to 86 % of the line.
//!
//! So before each step (and each both-ways check) the round trip is compared with the idle
//! baseline tune measured first, and while it stands above it the line is pinged idle until it
//! comes back, up to a cap. The pieces:
//! - [`judge`]: pure, from a window of round trips and the baseline: drained, or not yet.
//! - [`cap_for`] and [`expected`]: pure, how long a wait may take and what it is likely to
//!   take, from what the window showed.
//! - [`wait`]: the loop, with the pinging (the effect) passed in as a closure.
//! - [`Drainer`]: the run's state: the baseline, the previous test's idle tail (the first
//!   window, free: a line that drained during the tail costs no wait at all) and the waits made.
//!
//! What callers can rely on: [`wait`] never takes much longer than its cap (one window past
//! it at most), and a window whose probes all went unanswered counts as not drained, never as
//! an error.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_report::model::Results;

/// The last round trips a verdict reads: 5 probes, 250 ms at tune's 50 ms spacing. Enough that
/// one late probe (jitter, a scheduling hiccup in a guest) does not decide, few enough that a
/// queue still draining shows (its round trips fall probe by probe).
pub const WINDOW: usize = 5;
/// Answers a window may miss and still be drained: one (a loss on an idle line happens); two
/// lost of five is a queue holding probes past the measuring engine's 1 s grace.
const LOST_ALLOWED: usize = 1;
/// The residue a step may start on, as a share of the bound it is judged by: under a shaper a
/// few percent below the line the modem's residue drains only at that margin (5 % of 3 s of
/// start-up is 150 ms), so what is left when the load starts stands in the steady state. A
/// quarter of the bound keeps that error small against the verdict.
pub const BOUND_SHARE: f64 = 0.25;
/// The least tolerance, ms: the jitter of an idle round trip in the lab's User-Mode Linux
/// guests is a millisecond or two; tighter would make a fast, drained line wait for noise.
pub const TOLERANCE_FLOOR_MS: f64 = 2.0;
/// The longest one wait may take: more than twice the 2.7 s the lab's adsl-remote left after
/// each step. A line that holds more (dsl-2002: a 1000-packet FIFO at 800 kbit/s, 17 s) cannot
/// be waited out at every step, whose budget this time is taken from; its search reports the
/// miss as before.
pub const MAX_WAIT: Duration = Duration::from_secs(6);
/// One ping window's probes ([`Drainer`]'s caller runs it): 0.5 s idle and 0.5 s more.
pub const PINGING: Duration = Duration::from_secs(1);
/// What a window costs: its second of probes and the measuring engine's 1 s wait for late
/// replies (its grace); adsl-remote's windows took 2.1 to 2.2 s.
pub const WINDOW_COST: Duration = Duration::from_secs(2);
/// What a step is expected to wait when the last tail's probes went unanswered: more than the
/// measuring engine's 1 s grace was queued; adsl-remote left 2.7 s.
const UNANSWERED_GUESS: Duration = Duration::from_secs(3);

/// Whether the line has drained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Drained,
    /// The round trip stands `excess_ms` above the baseline (the window's median); `None` when
    /// too few probes answered to say (a queue holding them past the grace).
    Queued {
        excess_ms: Option<f64>,
    },
}

/// The tolerance above the baseline: [`BOUND_SHARE`] of the bound the next step is judged by,
/// at least [`TOLERANCE_FLOOR_MS`]. Each step's own: a shaper at a slow upload's rate adds its
/// serialization to the idle round trip the unshaped baseline did not have (a probe's two
/// cells at 117 kbit/s are 7 ms, and the lab's adsl-remote read +13 ms idle between upload
/// steps), which the upload's bound (10 ms and two full packets, 200 ms there) allows for and
/// the download's (34 ms) would not.
pub fn tolerance_ms(bound_ms: f64) -> f64 {
    (BOUND_SHARE * bound_ms).max(TOLERANCE_FLOOR_MS)
}

/// Judges the last [`WINDOW`] round trips of `rtts` (in send order, `None` lost) against the
/// idle `baseline_ms`: drained when at most [`LOST_ALLOWED`] are lost and their median is
/// within `tolerance_ms` of it. The median, not the last probe: one spike must not keep a
/// drained line waiting, nor one lucky probe end a wait on a queue.
pub fn judge(rtts: &[Option<f64>], baseline_ms: f64, tolerance_ms: f64) -> Verdict {
    let last = &rtts[rtts.len().saturating_sub(WINDOW)..];
    let mut answered: Vec<f64> = last.iter().flatten().copied().collect();
    if answered.is_empty() {
        return Verdict::Queued { excess_ms: None };
    }
    answered.sort_by(f64::total_cmp);
    let n = answered.len();
    let median = if n % 2 == 1 {
        answered[n / 2]
    } else {
        (answered[n / 2 - 1] + answered[n / 2]) / 2.0
    };
    let excess = (median - baseline_ms).max(0.0);
    let lost = last.len() - n;
    if last.len() == WINDOW && lost <= LOST_ALLOWED && excess <= tolerance_ms {
        Verdict::Drained
    } else {
        Verdict::Queued {
            excess_ms: Some(excess),
        }
    }
}

/// How long a wait that starts on `first` may take. An idle FIFO empties at the line's rate, so
/// a round trip `e` ms above the baseline is about `e` ms of queue: allow twice that (the other
/// direction's queue, which the round trip may only partly show, and TCP's last
/// retransmissions), plus a window to see it, within [`MAX_WAIT`]. Unanswered: [`MAX_WAIT`].
pub fn cap_for(first: Verdict) -> Duration {
    match first {
        Verdict::Drained => Duration::ZERO,
        Verdict::Queued { excess_ms: None } => MAX_WAIT,
        Verdict::Queued { excess_ms: Some(e) } => {
            (Duration::from_secs_f64(2.0 * e / 1000.0) + WINDOW_COST).min(MAX_WAIT)
        }
    }
}

/// What a wait that starts on `first` is likely to take: the queue's own time and the window
/// that sees it gone; for the time budget, which sets it aside for every step.
pub fn expected(first: Verdict) -> Duration {
    match first {
        Verdict::Drained => Duration::ZERO,
        Verdict::Queued { excess_ms: None } => UNANSWERED_GUESS,
        Verdict::Queued { excess_ms: Some(e) } => {
            (Duration::from_secs_f64(e / 1000.0) + WINDOW_COST).min(MAX_WAIT)
        }
    }
}

/// One wait, for `tune.json` and the progress line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// What came next: `download 950kbit`, `both ways 950kbit/121kbit`.
    pub before: String,
    /// The wall-clock time spent waiting (pinging idle), ms; 0 when the previous test's tail
    /// showed the line drained.
    pub waited_ms: u64,
    /// Whether the round trip came back near the baseline (else the cap ended the wait).
    pub drained: bool,
    /// The round trip above the baseline when the wait began, ms (`None`: unanswered, or no
    /// tail to read, see `tail_seen`).
    pub excess_before_ms: Option<f64>,
    /// Whether the previous test's idle tail was there to judge (not after the framing sweep).
    #[serde(default)]
    pub tail_seen: bool,
    /// ... and when it ended.
    pub excess_after_ms: Option<f64>,
    /// Ping windows run.
    pub windows: usize,
}

impl Wait {
    /// For the progress line: empty when there was nothing to wait for.
    pub fn phrase(&self) -> String {
        let ms = |e: Option<f64>| e.map_or("unanswered".into(), |e| format!("+{e:.0} ms"));
        if self.windows == 0 {
            String::new()
        } else if self.drained && !self.tail_seen {
            format!(
                " (after {:.1} s pinging the idle line: at its idle round trip)",
                self.waited_ms as f64 / 1000.0
            )
        } else if self.drained {
            format!(
                " (after {:.1} s for the queue to drain: {} above the idle round trip)",
                self.waited_ms as f64 / 1000.0,
                ms(self.excess_before_ms)
            )
        } else {
            format!(
                " (the queue did not drain in {:.1} s: {}, then {})",
                self.waited_ms as f64 / 1000.0,
                ms(self.excess_before_ms),
                ms(self.excess_after_ms)
            )
        }
    }
}

/// Waits from `first` (the verdict on what was already seen) until `window` (which pings the
/// idle line and returns its round trips) reads drained, or `cap` has passed.
pub fn wait<E>(
    first: Verdict,
    cap: Duration,
    baseline_ms: f64,
    tolerance_ms: f64,
    mut window: impl FnMut() -> Result<Vec<Option<f64>>, E>,
) -> Result<(Verdict, usize), E> {
    let started = Instant::now();
    let mut verdict = first;
    let mut windows = 0;
    while verdict != Verdict::Drained && started.elapsed() < cap {
        verdict = judge(&window()?, baseline_ms, tolerance_ms);
        windows += 1;
    }
    Ok((verdict, windows))
}

/// The round trips of `results`' primary probe sent in its idle tail, in send order.
pub fn tail(results: &Results) -> Vec<Option<f64>> {
    let end = results.phases.load_end();
    rtts(results, end)
}

/// The round trips of `results`' primary probe sent from `from_s` on.
pub fn rtts(results: &Results, from_s: f64) -> Vec<Option<f64>> {
    results.primary_probe().map_or(vec![], |p| {
        p.samples
            .iter()
            .filter(|s| s.t >= from_s)
            .map(|s| s.rtt_ms)
            .collect()
    })
}

/// The run's drain waits: the baseline they wait for and the tail of the last test.
#[derive(Debug)]
pub struct Drainer {
    baseline_ms: f64,
    /// The previous test's idle tail; `None` when none is known (the step after the sweep).
    last_tail: Option<Vec<Option<f64>>>,
    pub waits: Vec<Wait>,
    pub total: Duration,
}

impl Drainer {
    pub fn new(baseline_ms: f64) -> Drainer {
        Drainer {
            baseline_ms,
            last_tail: None,
            waits: vec![],
            total: Duration::ZERO,
        }
    }

    /// What the last test's tail says; with no tail, not drained and unanswered (a window is
    /// run to see).
    pub fn first(&self, tolerance_ms: f64) -> Verdict {
        judge(
            self.last_tail.as_deref().unwrap_or_default(),
            self.baseline_ms,
            tolerance_ms,
        )
    }

    /// The mean of the waits so far (zero before any): what the next steps may expect.
    pub fn mean_wait(&self) -> Duration {
        match self.waits.len() {
            0 => Duration::ZERO,
            n => self.total / n as u32,
        }
    }

    /// Records the test that just ran: its tail is the next wait's first window.
    pub fn after(&mut self, results: &Results) {
        self.last_tail = Some(tail(results));
    }

    /// Waits before `before` (a step judged by a bound of which `tolerance_ms` is the share,
    /// [`tolerance_ms`]), pinging with `window`; records and returns the wait.
    pub fn before<E>(
        &mut self,
        before: String,
        tolerance_ms: f64,
        window: impl FnMut() -> Result<Vec<Option<f64>>, E>,
    ) -> Result<Wait, E> {
        let first = self.first(tolerance_ms);
        let started = Instant::now();
        let (end, windows) = wait(
            first,
            cap_for(first),
            self.baseline_ms,
            tolerance_ms,
            window,
        )?;
        let waited = started.elapsed();
        let tail_seen = self.last_tail.take().is_some();
        self.total += waited;
        let excess = |v: Verdict| match v {
            Verdict::Drained => Some(0.0),
            Verdict::Queued { excess_ms } => excess_ms,
        };
        let w = Wait {
            before,
            waited_ms: waited.as_millis() as u64,
            drained: end == Verdict::Drained,
            excess_before_ms: excess(first),
            tail_seen,
            excess_after_ms: excess(end),
            windows,
        };
        self.waits.push(w.clone());
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: f64 = 60.0;
    const TOL: f64 = 8.5;

    fn ms(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().map(|&x| Some(x)).collect()
    }

    #[test]
    fn a_line_at_its_baseline_is_drained() {
        assert_eq!(
            judge(&ms(&[61.0, 60.5, 62.0, 60.0, 61.0]), BASE, TOL),
            Verdict::Drained
        );
    }

    /// Issue 55: the upload's leg read +2.7 s at the start of every both-ways check.
    #[test]
    fn seconds_of_leftover_queue_are_not_drained() {
        let v = judge(&ms(&[2760.0, 2710.0, 2660.0, 2610.0, 2560.0]), BASE, TOL);
        assert_eq!(
            v,
            Verdict::Queued {
                excess_ms: Some(2600.0)
            }
        );
    }

    #[test]
    fn only_the_last_window_counts_and_one_spike_does_not_keep_it_waiting() {
        // A queue that drained early in the tail, then one late probe.
        let v = ms(&[900.0, 500.0, 100.0, 61.0, 60.0, 95.0, 61.0, 60.0]);
        assert_eq!(judge(&v, BASE, TOL), Verdict::Drained);
        // ... but one lucky probe at the end of a draining queue does not end the wait.
        let v = ms(&[400.0, 300.0, 200.0, 100.0, 61.0]);
        assert!(matches!(judge(&v, BASE, TOL), Verdict::Queued { .. }));
    }

    #[test]
    fn probes_lost_past_the_grace_are_a_queue_not_a_drained_line() {
        assert_eq!(
            judge(&[None; 5], BASE, TOL),
            Verdict::Queued { excess_ms: None }
        );
        assert_eq!(judge(&[], BASE, TOL), Verdict::Queued { excess_ms: None });
        // Two of five lost: the answered ones may be at the baseline, the others still queued.
        let v = [Some(60.0), None, Some(61.0), None, Some(60.0)];
        assert!(matches!(judge(&v, BASE, TOL), Verdict::Queued { .. }));
        // One loss on an idle line is allowed.
        let v = [Some(60.0), None, Some(61.0), Some(62.0), Some(60.0)];
        assert_eq!(judge(&v, BASE, TOL), Verdict::Drained);
    }

    #[test]
    fn too_few_probes_to_judge_are_not_drained() {
        assert!(matches!(
            judge(&ms(&[60.0, 60.0]), BASE, TOL),
            Verdict::Queued { .. }
        ));
    }

    #[test]
    fn the_tolerance_edge() {
        let at = ms(&[BASE + TOL; 5]);
        assert_eq!(judge(&at, BASE, TOL), Verdict::Drained);
        let over = ms(&[BASE + TOL + 0.1; 5]);
        assert!(matches!(judge(&over, BASE, TOL), Verdict::Queued { .. }));
        // A round trip below the baseline (a faster path now) is drained.
        assert_eq!(judge(&ms(&[50.0; 5]), BASE, TOL), Verdict::Drained);
    }

    #[test]
    fn the_tolerance_is_a_quarter_of_the_bound_with_a_floor() {
        // adsl-remote's download: 10 ms + two packets at 1 Mbit/s.
        assert!((tolerance_ms(34.2) - 8.55).abs() < 1e-9);
        assert_eq!(tolerance_ms(4.0), TOLERANCE_FLOOR_MS);
    }

    #[test]
    fn the_cap_follows_the_queue_seen_within_the_most() {
        assert_eq!(cap_for(Verdict::Drained), Duration::ZERO);
        let small = Verdict::Queued {
            excess_ms: Some(200.0),
        };
        assert_eq!(cap_for(small), Duration::from_millis(2400));
        let deep = Verdict::Queued {
            excess_ms: Some(2700.0),
        };
        assert_eq!(cap_for(deep), MAX_WAIT);
        assert_eq!(cap_for(Verdict::Queued { excess_ms: None }), MAX_WAIT);
        assert_eq!(expected(Verdict::Drained), Duration::ZERO);
        assert_eq!(expected(small), Duration::from_millis(2200));
    }

    #[test]
    fn a_drained_tail_costs_no_window() {
        let mut calls = 0;
        let r: Result<_, ()> = wait(Verdict::Drained, MAX_WAIT, BASE, TOL, || {
            calls += 1;
            Ok(vec![])
        });
        assert_eq!(r, Ok((Verdict::Drained, 0)));
        assert_eq!(calls, 0);
    }

    #[test]
    fn the_wait_pings_until_the_queue_is_gone() {
        let mut queue = 2700.0;
        let r: Result<_, ()> = wait(
            Verdict::Queued { excess_ms: None },
            MAX_WAIT,
            BASE,
            TOL,
            || {
                queue = (queue - 1000.0_f64).max(0.0);
                Ok(ms(&[BASE + queue; 5]))
            },
        );
        assert_eq!(r, Ok((Verdict::Drained, 3)));
    }

    #[test]
    fn a_line_that_never_drains_stops_at_the_cap() {
        let cap = Duration::from_millis(30);
        let started = Instant::now();
        let r: Result<_, ()> = wait(Verdict::Queued { excess_ms: None }, cap, BASE, TOL, || {
            std::thread::sleep(Duration::from_millis(5));
            Ok(ms(&[BASE + 17_000.0; 5]))
        });
        let (v, windows) = r.unwrap();
        assert!(matches!(v, Verdict::Queued { .. }));
        assert!(windows >= 2, "{windows}");
        assert!(started.elapsed() < cap + Duration::from_millis(50));
    }

    #[test]
    fn a_window_that_fails_ends_the_wait_with_its_error() {
        let r: Result<(Verdict, usize), &str> = wait(
            Verdict::Queued { excess_ms: None },
            MAX_WAIT,
            BASE,
            TOL,
            || Err("the far end went away"),
        );
        assert_eq!(r, Err("the far end went away"));
    }

    #[test]
    fn a_drainer_without_a_tail_runs_one_window_and_records_it() {
        let mut d = Drainer::new(BASE);
        let w: Result<_, ()> = d.before("download 950kbit".into(), TOL, || Ok(ms(&[60.0; 5])));
        let w = w.unwrap();
        assert!(w.drained && w.windows == 1, "{w:?}");
        assert_eq!(w.excess_before_ms, None);
        assert_eq!(w.excess_after_ms, Some(0.0));
        assert_eq!(d.waits.len(), 1);
        assert!(
            !w.tail_seen && w.phrase().contains("idle line"),
            "{}",
            w.phrase()
        );
    }

    #[test]
    fn a_tail_at_the_baseline_costs_nothing_and_a_queued_one_says_how_much() {
        let mut d = Drainer::new(BASE);
        d.last_tail = Some(ms(&[61.0; 10]));
        let w: Result<_, ()> = d.before("upload 120kbit".into(), TOL, || panic!("no window"));
        let w = w.unwrap();
        assert!(w.drained && w.tail_seen && w.windows == 0 && w.waited_ms == 0);
        assert_eq!(w.phrase(), "");
        d.last_tail = Some(ms(&[BASE + 400.0; 10]));
        let w: Result<_, ()> = d.before("both ways".into(), TOL, || Ok(ms(&[BASE; 5])));
        let w = w.unwrap();
        assert_eq!(w.excess_before_ms, Some(400.0));
        assert!(w.phrase().contains("+400 ms"), "{}", w.phrase());
        // Each tail serves one wait: the next step without a test between runs a window.
        assert_eq!(d.first(TOL), Verdict::Queued { excess_ms: None });
    }
}
