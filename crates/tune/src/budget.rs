//! tune's time: how long each phase takes, the least `--max-time` that holds them
//! ([`min_time`]), `auto`'s stretch on a slow line ([`MaxTime`]), and the [`Budget`] that splits
//! what is left into search steps, with each step's drain wait ([`crate::drain`]) set aside.

use std::time::{Duration, Instant};

/// How long each search step loads the link: the start-up (3 s, left out) and the steady state.
pub const STEP_LOAD: Duration = Duration::from_secs(8);
/// What one step costs beyond its load: connection set-up, a short idle baseline and tail.
const STEP_OVERHEAD: Duration = Duration::from_secs(2);
/// One loaded step, all told.
pub(crate) const STEP: Duration =
    Duration::from_secs(STEP_LOAD.as_secs() + STEP_OVERHEAD.as_secs());
/// How long each both-ways check loads the link. rrul starts eight flows at once, and on a slow
/// ATM link the queue their slow start leaves upstream of the ingress shaper lasts well past the
/// 3 s start-up: on adsl at 96 % of the line the p99 of the load's seconds 3 to 8 read 113 and
/// 185 ms in two 30 s runs, of seconds 8 to 15 57 and 63 ms, and of the whole steady state 91
/// and 128 ms. An 8 s check judged that residue more than the pair, and its 100 probes made the
/// p99 one of its two worst (adsl2-pppoa at 96 %: 37.7, 46.0 and 96.3 ms in three runs of the
/// same pair). 12 s (180 steady probes) weighs the pair more, for 4 s a check.
pub const BOTH_LOAD: Duration = Duration::from_secs(12);
/// One both-ways check, all told.
pub(crate) const BOTH_STEP: Duration =
    Duration::from_secs(BOTH_LOAD.as_secs() + STEP_OVERHEAD.as_secs());
/// The idle phase's test.
pub(crate) const IDLE: Duration = Duration::from_secs(3);
/// The framing sweep, as [`crate::sweep_phase`] runs it.
const SWEEP: Duration = Duration::from_secs(20);
/// The fewest search steps per direction.
const MIN_STEPS: usize = 3;
/// The both-ways checks the searches leave time for: the pair and one back-off. A second
/// back-off, or the halfway pair, runs when the searches ended early enough; reserving all three
/// would cost each search a step of its four at 3 minutes.
const RESERVED_CHECKS: u32 = 2;
/// Shaping changes, connection set-ups and the put-back, beyond the phases' own time (measured:
/// a 1-minute budget took 114 s in User-Mode Linux before the both-ways phase, for 103 s of
/// phases).
const MARGIN: Duration = Duration::from_secs(15);

/// The least `--max-time` that holds every phase with [`MIN_STEPS`] steps each way and one
/// both-ways check: 2m20s with the framing sweep, 2m without.
pub fn min_time(skip_sweep: bool) -> Duration {
    let step = STEP;
    let sweep = if skip_sweep { Duration::ZERO } else { SWEEP };
    let need = IDLE + 2 * step + sweep + step * (2 * MIN_STEPS as u32) + BOTH_STEP + MARGIN;
    // Whole ten seconds, so the message reads 2m20s rather than 2m12s.
    Duration::from_secs(need.as_secs().div_ceil(10) * 10)
}

/// A run with `--max-time auto` takes this long on a line whose phases fit in it.
pub const DEFAULT_TIME: Duration = Duration::from_secs(180);
/// The longest `auto` stretches a run to.
pub const AUTO_MOST: Duration = Duration::from_secs(360);
/// The steps per direction `auto` keeps on a slow line: what [`DEFAULT_TIME`] gives a fast one.
const AUTO_STEPS: u32 = 4;

/// `--max-time`: a fixed budget, or `auto`: [`DEFAULT_TIME`], stretched on a slow line (whose
/// framing sweep must space its echoes: 54 s at 160 kbit/s up, not 20) to what its phases need
/// with [`AUTO_STEPS`] steps each way, at most [`AUTO_MOST`]. The estimate is said up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTime {
    Auto,
    At(Duration),
}

impl MaxTime {
    /// `auto`, or a time as `unbloat test --duration` takes it (`3m`, `200s`).
    pub fn parse(text: &str) -> Result<MaxTime, String> {
        if text == "auto" {
            return Ok(MaxTime::Auto);
        }
        unbloat_measure::parse_duration(text)
            .map(MaxTime::At)
            .map_err(|e| format!("{e}; or auto: 3 minutes, longer on a slow line"))
    }

    /// The time the user set; `None` for `auto`.
    pub fn fixed(self) -> Option<Duration> {
        match self {
            MaxTime::Auto => None,
            MaxTime::At(d) => Some(d),
        }
    }

    /// The longest the run may take (what a caller's timeout allows for).
    pub fn most(self) -> Duration {
        match self {
            MaxTime::Auto => AUTO_MOST,
            MaxTime::At(d) => d,
        }
    }
}

impl std::fmt::Display for MaxTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxTime::Auto => f.write_str("auto"),
            MaxTime::At(d) => write!(f, "{}s", d.as_secs()),
        }
    }
}

/// The time left for the searches, split into a number of steps per direction.
pub(crate) struct Budget {
    pub(crate) max: Duration,
    auto: bool,
    started: Instant,
    /// The drain wait set aside before each step and check: with `auto`, until the first search
    /// has run, what the unshaped upload's tail predicts ([`crate::drain::expected`]); then the
    /// first search's mean wait. A fixed `--max-time` sets nothing aside before it has seen one
    /// (the unshaped tail overstates a shaped line's: the lab's vdsl2-20 lost its probes there,
    /// a queue of over a second, and its shaped steps waited for nothing).
    pub(crate) drain: Duration,
}

impl Budget {
    pub(crate) fn new(max: MaxTime, started: Instant) -> Budget {
        let (max, auto) = match max {
            MaxTime::Auto => (DEFAULT_TIME, true),
            MaxTime::At(d) => (d, false),
        };
        Budget {
            max,
            auto,
            started,
            drain: Duration::ZERO,
        }
    }

    /// With `auto`, stretches the run (called after the capacity phase) to hold a sweep of
    /// `sweep`, [`AUTO_STEPS`] steps each way and the reserved checks, within [`AUTO_MOST`].
    pub(crate) fn fit(&mut self, sweep: Duration) {
        if self.auto {
            let need = self.started.elapsed() + sweep + self.after(AUTO_STEPS) + MARGIN;
            // Whole ten seconds up: the steps are counted down from what is left, and a
            // budget to the second would lose one to the time the counting itself takes.
            let need = Duration::from_secs(need.as_secs().div_ceil(10) * 10 + 10);
            self.max = need.clamp(DEFAULT_TIME, AUTO_MOST);
        }
    }

    /// One search step with its drain wait.
    fn step(&self) -> Duration {
        STEP + self.drain
    }

    /// One both-ways check with its drain wait.
    fn both_step(&self) -> Duration {
        BOTH_STEP + self.drain
    }

    /// The searches' `steps` each way and the reserved checks.
    fn after(&self, steps: u32) -> Duration {
        self.step() * (2 * steps) + self.both_step() * RESERVED_CHECKS
    }

    /// What the rest of the run takes, said before it: the sweep, the searches, the checks.
    pub(crate) fn estimate(&self, sweep: Duration) -> String {
        let sweep = sweep.min(self.first_sweep());
        let steps = ((self
            .left()
            .saturating_sub(sweep + self.both_step() * RESERVED_CHECKS))
        .as_secs_f64()
            / self.step().as_secs_f64()
            / 2.0) as u32;
        let steps = steps.clamp(MIN_STEPS as u32, 8);
        let total = self.started.elapsed() + sweep + self.after(steps) + MARGIN;
        let drain = if self.drain.is_zero() {
            String::new()
        } else {
            format!(
                " (each with up to {:.1} s first for the queue to drain)",
                self.drain.as_secs_f64()
            )
        };
        format!(
            "the run takes about {} s in all, at most {} s ({}): {}{} steps of {} s each way, both-ways checks of {} s{drain}",
            total.min(self.max).as_secs(),
            self.max.as_secs(),
            if self.auto {
                "--max-time auto"
            } else {
                "--max-time"
            },
            if sweep.is_zero() {
                String::new()
            } else {
                format!("the framing sweep {} s, ", sweep.as_secs())
            },
            steps,
            STEP.as_secs(),
            BOTH_STEP.as_secs()
        )
    }

    /// Steps per direction that fit the time left (called after the fixed phases) once
    /// [`MARGIN`] and [`RESERVED_CHECKS`] are set aside, at least [`MIN_STEPS`] and at most 8.
    pub(crate) fn steps_per_direction(&self) -> usize {
        let checks = self.both_step() * RESERVED_CHECKS;
        let left = self.left().saturating_sub(checks);
        ((left.as_secs_f64() / self.step().as_secs_f64() / 2.0) as usize).clamp(MIN_STEPS, 8)
    }

    /// Steps for the upload's search (called after the download's): what the time left holds
    /// once [`RESERVED_CHECKS`] are set aside, at least [`MIN_STEPS`] and at most `most` (the
    /// download's). The download's drain waits came out of this time.
    pub(crate) fn steps_for_the_upload(&self, most: usize) -> usize {
        let checks = self.both_step() * RESERVED_CHECKS;
        let left = self.left().saturating_sub(checks);
        ((left.as_secs_f64() / self.step().as_secs_f64()) as usize)
            .clamp(MIN_STEPS, most.max(MIN_STEPS))
    }

    /// Whether a sweep of `time` more still leaves [`MIN_STEPS`] steps each way and
    /// [`RESERVED_CHECKS`] their time.
    pub(crate) fn holds_another_sweep(&self, time: Duration) -> bool {
        let after = self.step() * (2 * MIN_STEPS as u32) + self.both_step() * RESERVED_CHECKS;
        self.left() >= time + after
    }

    /// The longest the first framing sweep may take: what is left once the searches' least
    /// steps and one both-ways check ([`min_time`]'s phases) are set aside. A slow upload
    /// spaces the echoes, and its sweep would otherwise overrun `--max-time`.
    pub(crate) fn first_sweep(&self) -> Duration {
        let after = self.step() * (2 * MIN_STEPS as u32) + self.both_step();
        self.left().saturating_sub(after)
    }

    /// Both-ways checks that fit the time left (called after the searches): at least one.
    pub(crate) fn both_ways_checks(&self) -> usize {
        ((self.left().as_secs_f64() / self.both_step().as_secs_f64()) as usize).max(1)
    }

    fn left(&self) -> Duration {
        self.max
            .saturating_sub(self.started.elapsed())
            .saturating_sub(MARGIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain;

    #[test]
    fn the_time_floor_holds_every_phase() {
        assert_eq!(min_time(false), Duration::from_secs(140));
        assert_eq!(min_time(true), Duration::from_secs(120));
    }

    #[test]
    fn a_second_sweep_only_when_the_searches_keep_their_least_steps() {
        let sweep = Duration::from_secs(20);
        // The first sweep ends after idle, capacity and itself: 3 + 2 * 10 + 20 s, and more.
        let ended = Instant::now() - Duration::from_secs(45);
        // 120 s left of 3 minutes: 20 s more still leaves 88 s for 3 + 3 steps and 2 checks.
        assert!(
            Budget::new(MaxTime::At(Duration::from_secs(180)), ended).holds_another_sweep(sweep)
        );
        assert!(
            !Budget::new(MaxTime::At(Duration::from_secs(165)), ended).holds_another_sweep(sweep)
        );
        // The least budget holds one sweep, not two.
        assert!(!Budget::new(MaxTime::At(min_time(false)), ended).holds_another_sweep(sweep));
    }

    #[test]
    fn auto_stretches_a_slow_lines_run_and_a_fixed_budget_stays() {
        let t0 = Instant::now() - Duration::from_secs(25);
        // A fast line's 20 s sweep fits 3 minutes with 4 steps each way.
        let mut fast = Budget::new(MaxTime::Auto, t0);
        fast.fit(Duration::from_secs(20));
        assert_eq!(fast.max, DEFAULT_TIME);
        // 160 kbit/s up: a 54 s sweep; auto makes room for it and 4 steps each way.
        let mut slow = Budget::new(MaxTime::Auto, t0);
        slow.fit(Duration::from_secs(54));
        assert!(
            slow.max > DEFAULT_TIME && slow.max <= AUTO_MOST,
            "{:?}",
            slow.max
        );
        assert!(
            slow.estimate(Duration::from_secs(54)).contains("4 steps"),
            "{}",
            slow.estimate(Duration::from_secs(54))
        );
        // What the user set stands; the sweep is cut to fit it instead.
        let mut fixed = Budget::new(MaxTime::At(min_time(false)), t0);
        fixed.fit(Duration::from_secs(54));
        assert_eq!(fixed.max, min_time(false));
        assert!(fixed.first_sweep() < Duration::from_secs(54));
        let said = fixed.estimate(Duration::from_secs(54));
        assert!(
            said.contains("at most 140 s") && said.contains("3 steps"),
            "{said}"
        );
    }

    /// Issue 55: each step's drain wait comes out of the budget. A line whose queue empties
    /// within its tail sets nothing aside; one that left seconds gets fewer steps in a fixed
    /// time, and `auto` stretches to keep its four.
    #[test]
    fn the_drain_set_aside_costs_steps_only_where_the_line_keeps_a_queue() {
        let t0 = Instant::now() - Duration::from_secs(25);
        let fixed = MaxTime::At(Duration::from_secs(180));
        let fast = Budget::new(fixed, t0);
        let mut slow = Budget::new(fixed, t0);
        slow.drain = drain::expected(drain::Verdict::Queued { excess_ms: None });
        assert!(slow.steps_per_direction() < fast.steps_per_direction());
        assert!(slow.estimate(Duration::from_secs(20)).contains("to drain"));
        assert!(!fast.estimate(Duration::from_secs(20)).contains("to drain"));
        let mut auto = Budget::new(MaxTime::Auto, t0);
        auto.drain = slow.drain;
        auto.fit(Duration::from_secs(20));
        assert!(auto.max > DEFAULT_TIME, "{:?}", auto.max);
        assert!(auto.estimate(Duration::from_secs(20)).contains("4 steps"));
    }

    #[test]
    fn the_upload_gets_what_the_download_left_never_more_steps() {
        let fixed = MaxTime::At(Duration::from_secs(180));
        // Right after a download search that ended on time: its own steps again.
        let t0 = Instant::now() - Duration::from_secs(25 + 20 + 40);
        assert_eq!(Budget::new(fixed, t0).steps_for_the_upload(4), 4);
        // A download whose drain waits took 20 s more leaves fewer, never under the least.
        let late = Instant::now() - Duration::from_secs(25 + 20 + 60);
        let mut b = Budget::new(fixed, late);
        b.drain = Duration::from_secs(2);
        assert_eq!(b.steps_for_the_upload(4), 3);
        let later = Instant::now() - Duration::from_secs(170);
        assert_eq!(Budget::new(fixed, later).steps_for_the_upload(4), MIN_STEPS);
    }

    #[test]
    fn max_time_reads_auto_or_a_time() {
        assert_eq!(MaxTime::parse("auto"), Ok(MaxTime::Auto));
        let three = MaxTime::parse("3m").unwrap();
        assert_eq!(three, MaxTime::At(Duration::from_secs(180)));
        assert_eq!(MaxTime::parse(&three.to_string()), Ok(three));
        assert!(MaxTime::parse("soon").is_err());
        assert_eq!(MaxTime::Auto.most(), AUTO_MOST);
    }
}
