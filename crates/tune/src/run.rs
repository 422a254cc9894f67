//! The tune run: its phases in order, each measured through `unbloat test`'s own timeline
//! against whatever far end the user named, and the shaping changed through a [`Shaping`] the
//! caller provides (the CLI's transactions: verified, journaled, rolled back on failure).
//!
//! 1. idle baseline (a `ping` test): the RTT and its jitter;
//! 2. unshaped capacity per direction (`download`, then `upload`), converted to the line's rate;
//! 3. framing (the size sweep, [`crate::framing`]);
//! 4. rate search for the download ([`crate::search`]), with the upload shaped at
//!    [`OTHER_PERCENT`] of its capacity so its ACKs never queue;
//! 5. the same for the upload, at the download's result;
//! 6. both ways at once ([`crate::both_ways`]): the pair under rrul, backed off while it breaks
//!    the bound.
//!
//! Before each step of 4. to 6. the run waits until the round trip is back near the idle baseline
//! of 1. ([`crate::drain`]): the previous step's queue gone, within a cap.
//!
//! What callers can rely on: whatever happens (an error, the far end gone, [`Stop`] raised),
//! [`run`] ends with the shaping that was there before put back, unless it succeeded and
//! `apply` was asked. The searches get the steps that fit in what `max_time` leaves after the
//! fixed phases and one both-ways check (at least 3 per direction); [`min_time`] is the least
//! `max_time` that holds all of that, which the CLI requires.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_measure::client::{NoProgress, TestPlan};
use unbloat_measure::probe::ipv4_probe_bytes;
use unbloat_measure::profile::Profile;
use unbloat_measure::timeline::run_plan;
use unbloat_measure::MeasureError;
use unbloat_report::model::Results;
use unbloat_report::summary::{Leg, Summary};
use unbloat_shaper::goodput::{GoodputModel, LinkFraming};
use unbloat_shaper::linklayer::LinkLayer;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::Rate;

use crate::both_ways::{self, BothStep, Measured};
pub use crate::budget::{min_time, MaxTime, AUTO_MOST, BOTH_LOAD, DEFAULT_TIME, STEP_LOAD};
use crate::budget::{Budget, IDLE};
use crate::drain::{self, Drainer};
use crate::interrupt::{Shared, Stop};
use crate::search::{self, Next, Outcome as SearchOutcome, Reading, Search, Step};
use crate::shaping::Shaping;
use crate::sweep_phase::FramingFound;
use crate::TuneError;

/// The other direction's rate during a search, in percent of its capacity: low enough that its
/// queue (the loaded direction's ACKs) stays empty.
pub const OTHER_PERCENT: u64 = 85;
/// The least a shaper can keep in its queue is about two full packets; at low rates that alone is
/// tens of milliseconds, so the bound grows by their serialization time at the capacity.
pub const PACKETS_OF_SLACK: f64 = 2.0;
/// Probes every 50 ms: 100 samples in a step's 5 s steady state, enough for its p99.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

/// What the user asked of the run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A test plan against the user's far end; each phase swaps its profile and durations.
    pub test: TestPlan,
    /// The steady-state p99 induced latency the chosen rates must keep, in ms.
    pub bound_ms: f64,
    pub max_time: MaxTime,
    /// The user's link options (`--link` and friends): what a straight-line sweep falls back to.
    pub link: ShapeOptions,
    /// Leave out the framing sweep (the user's link options stand).
    pub skip_sweep: bool,
    /// Shape with the result at the end instead of putting the old setup back.
    pub apply: bool,
}

/// A phase's progress line, for the terminal.
pub trait Report {
    fn phase(&mut self, number: usize, name: &str, detail: &str);
}

/// Everything the run found, for the config, the report and `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tuned {
    pub idle_rtt_ms: Option<f64>,
    /// Goodput of the unshaped link, bit/s, and its line rate under the framing found.
    pub capacity_down: Capacity,
    pub capacity_up: Capacity,
    pub framing: Option<FramingFound>,
    /// The link options the rates were searched with (and the config carries).
    pub link: ShapeOptions,
    pub bound_down_ms: f64,
    pub bound_up_ms: f64,
    /// The round trip's bound with both directions loaded ([`both_ways::Bounds`]).
    #[serde(default)]
    pub bound_both_ms: f64,
    pub steps_down: Vec<Step>,
    pub steps_up: Vec<Step>,
    /// The both-ways checks of the pair the searches found (empty when a direction has no rate).
    #[serde(default)]
    pub both_ways: Vec<BothStep>,
    pub down: Option<Rate>,
    pub up: Option<Rate>,
    /// The options to shape with: link options and the rates found.
    pub options: ShapeOptions,
    /// Where the result keeps more latency than the bound: a direction whose search found no
    /// rate within it, or the pair under both loads.
    #[serde(default)]
    pub missed: Vec<Missed>,
    /// Where the time went, phase by phase.
    #[serde(default)]
    pub time: Vec<Lap>,
    /// The waits for the line to drain before each search step and both-ways check, in order.
    #[serde(default)]
    pub drains: Vec<drain::Wait>,
    pub seconds: f64,
    /// What happened to the shaping at the end (put back, or applied).
    pub ending: String,
}

/// A bound the result does not keep, and by how much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Missed {
    /// `download`, `upload` or `both ways`.
    pub phase: String,
    pub bound_ms: f64,
    /// The steady-state p99 the chosen rates kept there.
    pub steady_p99_ms: f64,
}

impl Missed {
    pub fn over_ms(&self) -> f64 {
        self.steady_p99_ms - self.bound_ms
    }
}

/// One phase's wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lap {
    pub phase: String,
    pub seconds: f64,
}

/// Where the time went: each [`Laps::lap`] closes the phase that ran since the one before,
/// less the drain waits inside it ([`Laps::aside`]), which get a lap of their own at the end.
struct Laps {
    last: Instant,
    laps: Vec<Lap>,
    /// Drain waits since the last lap, and in all.
    aside: Duration,
    aside_total: Duration,
}

impl Laps {
    fn new(started: Instant) -> Laps {
        Laps {
            last: started,
            laps: vec![],
            aside: Duration::ZERO,
            aside_total: Duration::ZERO,
        }
    }

    fn lap(&mut self, phase: &str) {
        let now = Instant::now();
        self.laps.push(Lap {
            phase: phase.into(),
            seconds: (now - self.last).saturating_sub(self.aside).as_secs_f64(),
        });
        self.last = now;
        self.aside = Duration::ZERO;
    }

    /// Time inside the running phase spent waiting for the line to drain.
    fn aside(&mut self, waited: Duration) {
        self.aside += waited;
        self.aside_total += waited;
    }

    /// The laps, with the drain waits' lap when there were any.
    fn done(mut self) -> Vec<Lap> {
        if !self.aside_total.is_zero() {
            self.laps.push(Lap {
                phase: "draining".into(),
                seconds: self.aside_total.as_secs_f64(),
            });
        }
        self.laps
    }
}

/// The laps in a line: `idle 4 s, capacity 19 s, ...`.
pub fn laps_line(laps: &[Lap]) -> String {
    laps.iter()
        .map(|l| format!("{} {:.0} s", l.phase, l.seconds))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Capacity {
    pub goodput: Rate,
    pub line: Rate,
}

/// Runs the phases; puts the old shaping back on every way out unless `apply` succeeded.
pub fn run(
    s: &Settings,
    shaping: &Shared,
    stop: &Stop,
    report: &mut dyn Report,
) -> Result<Tuned, TuneError> {
    let started = Instant::now();
    let result = phases(s, shaping, stop, report, started);
    match result {
        Ok(mut tuned) => {
            let ending = Instant::now();
            tuned.ending = if s.apply {
                let applied = lock(shaping).shape(&tuned.options);
                match applied {
                    Ok(()) => "shaping with the tuned settings".into(),
                    Err(e) => {
                        let back = lock(shaping).restore();
                        let back = back.unwrap_or_else(|r| r);
                        return Err(TuneError::Shaping(format!("{e}; {back}")));
                    }
                }
            } else {
                lock(shaping).restore().map_err(TuneError::Shaping)?
            };
            tuned.time.push(Lap {
                phase: if s.apply { "applying" } else { "putting back" }.into(),
                seconds: ending.elapsed().as_secs_f64(),
            });
            tuned.seconds = started.elapsed().as_secs_f64();
            Ok(tuned)
        }
        Err(e) => {
            let back = lock(shaping)
                .restore()
                .unwrap_or_else(|r| format!("COULD NOT PUT BACK: {r}"));
            Err(e.with_ending(back))
        }
    }
}

fn phases(
    s: &Settings,
    shaping: &Shared,
    stop: &Stop,
    report: &mut dyn Report,
    started: Instant,
) -> Result<Tuned, TuneError> {
    let mut budget = Budget::new(s.max_time, started);
    let mut laps = Laps::new(started);
    let mut missed = vec![];
    report.phase(1, "idle", "measuring the idle round trip (3 s)");
    lock(shaping).unshape().map_err(TuneError::Shaping)?;
    let idle = test(s, "ping", IDLE, stop)?;
    let idle_rtt_ms = idle.idle_latency_ms.or_else(|| loaded_median(&idle));
    report.phase(1, "idle", &format!("{} ms", fmt_opt(idle_rtt_ms)));
    laps.lap("idle");

    report.phase(
        2,
        "capacity",
        "unshaped download, then upload (8 s each; the link is saturated)",
    );
    let (down_test, down_good, _) = capacity(s, true, stop)?;
    let (up_test, up_good, up_tail) = capacity(s, false, stop)?;
    laps.lap("capacity");
    // What the unshaped upload left in the queues says what each step's drain wait may take:
    // `auto` stretches the run by it (a line whose tail is at the baseline: nothing). A fixed
    // time sets aside what the download's search shows, for the upload's.
    if let (Some(base), MaxTime::Auto) = (idle_rtt_ms, s.max_time) {
        let tolerance = drain::tolerance_ms(bound_at(s.bound_ms, up_good));
        let seen = drain::judge(&up_tail, base, tolerance);
        budget.drain = drain::expected(seen);
    }
    let sweep_time = if s.skip_sweep {
        Duration::ZERO
    } else {
        crate::sweep_phase::plan_for(up_good, AUTO_MOST).duration()
    };
    budget.fit(sweep_time);
    report.phase(2, "capacity", &budget.estimate(sweep_time));

    let (framing, link) = if s.skip_sweep {
        (None, s.link.clone())
    } else {
        report.phase(
            3,
            "framing",
            "round trips over packet sizes, 64 to 256 bytes (ATM cells, or a straight line; \
             20 s, twice or three times that when the noise hides the steps)",
        );
        let mut another = |time: Duration| budget.holds_another_sweep(time);
        let first = budget.first_sweep();
        let rates = (down_good, up_good);
        let guess = crate::sweep_phase::sweep(&s.test, rates, first, stop, &mut another)?;
        let link = crate::sweep_phase::link_options(&guess, &s.link);
        let verdict = crate::sweep_phase::verdict(&guess);
        report.phase(3, "framing", &verdict);
        laps.lap("framing");
        (Some(guess), link)
    };
    let layer = link_layer(&link)?;
    let capacity_down = Capacity {
        goodput: down_good,
        line: line_beside_probes(down_good, &layer, &down_test),
    };
    let capacity_up = Capacity {
        goodput: up_good,
        line: line_beside_probes(up_good, &layer, &up_test),
    };
    report.phase(
        2,
        "capacity",
        &format!(
            "download {} goodput, line {}; upload {} goodput, line {}",
            readable(capacity_down.goodput),
            readable(capacity_down.line),
            readable(capacity_up.goodput),
            readable(capacity_up.line)
        ),
    );

    let steps_each = budget.steps_per_direction();
    let bound_down_ms = bound_at(s.bound_ms, capacity_down.line);
    let bound_up_ms = bound_at(s.bound_ms, capacity_up.line);
    let bounds = both_ways::Bounds::new(s.bound_ms, bound_down_ms, bound_up_ms);
    let with = |down: Rate, up: Rate| ShapeOptions {
        down: Some(down),
        up: Some(up),
        ..link.clone()
    };
    let mut drainer = idle_rtt_ms.map(Drainer::new);

    report.phase(
        4,
        "download",
        &format!(
            "rate search, at most {steps_each} steps of {} s",
            STEP_LOAD.as_secs()
        ),
    );
    let other = capacity_up.line.percent(OTHER_PERCENT);
    let mut search = Search::new(capacity_down.line, bound_down_ms, steps_each);
    let mut ctx = StepContext {
        s,
        shaping,
        stop,
        report: &mut *report,
        drainer: &mut drainer,
        laps: &mut laps,
    };
    let (down, down_missed) = search_one(&mut ctx, &mut search, true, |r| with(r, other))?;
    missed.extend(down_missed);
    let steps_down = search.steps().to_vec();
    laps.lap("download");
    if let Some(d) = drainer.as_ref() {
        budget.drain = d.mean_wait();
    }
    let steps_up_most = budget.steps_for_the_upload(steps_each);

    report.phase(
        5,
        "upload",
        &format!("rate search, at most {steps_up_most} steps"),
    );
    let down_rate = down.unwrap_or(capacity_down.line.percent(OTHER_PERCENT));
    let mut search = Search::new(capacity_up.line, bound_up_ms, steps_up_most);
    let mut ctx = StepContext {
        s,
        shaping,
        stop,
        report: &mut *report,
        drainer: &mut drainer,
        laps: &mut laps,
    };
    let (up, up_missed) = search_one(&mut ctx, &mut search, false, |r| with(down_rate, r))?;
    missed.extend(up_missed);
    let steps_up = search.steps().to_vec();
    laps.lap("upload");

    let (mut down, mut up) = (down, up);
    let mut both = vec![];
    if let (Some(d), Some(u)) = (down, up) {
        // The probe crosses both loaded directions: each adds its packets' slack to the bound.
        let bound = bounds.round_trip_ms;
        report.phase(
            6,
            "both ways",
            &format!("{d} down and {u} up under rrul ({} s)", BOTH_LOAD.as_secs()),
        );
        both = both_ways::check(d, u, bounds, budget.both_ways_checks(), |d, u| {
            lock(shaping)
                .shape(&with(d, u))
                .map_err(TuneError::Shaping)?;
            let waited = drain_before(
                s,
                stop,
                &mut drainer,
                &mut laps,
                format!("both ways {d}/{u}"),
                bound,
            )?;
            let results = test_results(s, "rrul", BOTH_LOAD, stop)?;
            if let Some(dr) = drainer.as_mut() {
                dr.after(&results);
            }
            let sum = Summary::from_results(&results);
            let p = sum.primary();
            let m = Measured {
                steady_p99_ms: p.and_then(|p| p.steady_induced_p99_ms).unwrap_or(f64::NAN),
                growth_ms_per_s: p.and_then(|p| p.steady_growth_ms_per_s),
                late_p99_ms: p.and_then(|p| p.steady_late_induced_p99_ms),
                startup_peak_ms: p.and_then(|p| p.startup_peak_induced_ms),
                goodput_down: goodput(&sum, true).unwrap_or(Rate::ZERO),
                goodput_up: goodput(&sum, false).unwrap_or(Rate::ZERO),
                down_leg: p.and_then(|p| p.steady_down),
                up_leg: p.and_then(|p| p.steady_up),
            };
            let settled = m.judged_p99_ms();
            report.phase(
                6,
                "both ways",
                &format!(
                    "{d} down, {u} up: steady p99 +{:.1} ms{} ({}){}, start-up peak +{} ms{waited}",
                    m.steady_p99_ms,
                    if settled < m.steady_p99_ms {
                        format!(", falling: its second half +{settled:.1} ms")
                    } else {
                        String::new()
                    },
                    if settled > bound || !settled.is_finite() {
                        "over the bound".to_string()
                    } else if search::rising(bound, m.growth_ms_per_s) {
                        format!(
                            "within the bound but rising {:+.1} ms/s: above a line",
                            m.growth_ms_per_s.unwrap_or(0.0)
                        )
                    } else {
                        "within the bound".to_string()
                    },
                    legs(m.down_leg, m.up_leg),
                    fmt_opt(m.startup_peak_ms)
                ),
            );
            Ok(m)
        })?;
        let kept = both.iter().find(|s| s.chosen).expect("one pair is chosen");
        if !kept.pass {
            let why = if both.last().is_some_and(|l| l.chosen) {
                format!("after {} back-offs", both.len() - 1)
            } else {
                format!(
                    "and backing off further did not lower it by {:.0} %",
                    both_ways::MIN_GAIN * 100.0
                )
            };
            report.phase(6, "both ways", &format!(
                "over the {bound:.1} ms bound with both directions loaded, {why}: keeping {} down, {} up (on a slow link this is the packets' own time on the wire; raise --bound to accept it)",
                kept.down, kept.up
            ));
            missed.push(Missed {
                phase: "both ways".into(),
                bound_ms: bound,
                steady_p99_ms: kept.judged_p99_ms(),
            });
        }
        (down, up) = (Some(kept.down), Some(kept.up));
        laps.lap("both ways");
    }

    let options = ShapeOptions {
        down,
        up,
        ..link.clone()
    };
    Ok(Tuned {
        idle_rtt_ms,
        capacity_down,
        capacity_up,
        framing,
        link,
        bound_down_ms,
        bound_up_ms,
        bound_both_ms: bounds.round_trip_ms,
        steps_down,
        steps_up,
        both_ways: both,
        down,
        up,
        options,
        missed,
        drains: drainer.map(|d| d.waits).unwrap_or_default(),
        time: laps.done(),
        seconds: 0.0,
        ending: String::new(),
    })
}

/// What a search's steps need beside the search: the far end, the shaping, the progress line,
/// the drain waits and the laps they are set aside in.
struct StepContext<'a, 'r> {
    s: &'a Settings,
    shaping: &'a Shared,
    stop: &'a Stop,
    report: &'a mut (dyn Report + 'r),
    drainer: &'a mut Option<Drainer>,
    laps: &'a mut Laps,
}

/// Waits before a step judged by `bound_ms` until the line has drained ([`crate::drain`]),
/// when the idle baseline is known; returns the wait's phrase for the step's progress line.
fn drain_before(
    s: &Settings,
    stop: &Stop,
    drainer: &mut Option<Drainer>,
    laps: &mut Laps,
    before: String,
    bound_ms: f64,
) -> Result<String, TuneError> {
    let Some(d) = drainer.as_mut() else {
        return Ok(String::new());
    };
    let tolerance = drain::tolerance_ms(bound_ms);
    let w = d.before(before, tolerance, || ping_window(s, stop))?;
    laps.aside(Duration::from_millis(w.waited_ms));
    Ok(w.phrase())
}

/// One ping window of [`drain::PINGING`] on the idle line: its primary probe's round trips.
/// Every UDP probe lost (a queue holding them past the grace) is a window of no answers, not an
/// error: the line is not drained yet.
fn ping_window(s: &Settings, stop: &Stop) -> Result<Vec<Option<f64>>, TuneError> {
    stop.check()?;
    let mut plan = s.test.clone();
    plan.profile = Profile::by_name("ping")
        .and_then(|p| p.resolve(None))
        .map_err(TuneError::Measure)?;
    plan.idle_before = drain::PINGING / 2;
    plan.load = drain::PINGING / 2;
    plan.idle_after = Duration::ZERO;
    plan.probe_interval = PROBE_INTERVAL;
    let rtts = match run_plan(&plan, &mut NoProgress) {
        Ok(results) => drain::rtts(&results, 0.0),
        Err(f) if matches!(f.error, MeasureError::ProbesLost { .. }) => vec![],
        Err(f) => return Err(TuneError::Measure(f.error)),
    };
    stop.check()?;
    Ok(rtts)
}

/// One direction's search: shape, load, record, until the search is done.
fn search_one(
    ctx: &mut StepContext,
    search: &mut Search,
    down: bool,
    opts: impl Fn(Rate) -> ShapeOptions,
) -> Result<(Option<Rate>, Option<Missed>), TuneError> {
    let (s, shaping, stop) = (ctx.s, ctx.shaping, ctx.stop);
    let report = &mut *ctx.report;
    let (phase, name, profile) = if down {
        (4, "download", "download")
    } else {
        (5, "upload", "upload")
    };
    loop {
        match search.next() {
            Next::Done(SearchOutcome::Found(r)) => {
                // Download only: its shaper sits behind the bottleneck (search::drain_limit).
                let drain = search.drain_limit().filter(|(cap, _)| down && *cap < r);
                let detail = match drain {
                    Some((cap, peak)) => format!(
                        "chose {cap}: the search's {r} less the margin that drains the start-up queue (+{peak:.0} ms) within {:.0} s",
                        crate::search::DRAIN_S
                    ),
                    None => format!("chose {r}"),
                };
                report.phase(phase, name, &detail);
                return Ok((Some(drain.map_or(r, |(cap, _)| cap)), None));
            }
            Next::Done(SearchOutcome::Closest {
                rate,
                steady_p99_ms,
            }) => {
                // Issue 38: a direction left unshaped keeps the modem's whole queue; the rate that
                // came closest keeps most of it out.
                let bound = search.bound_ms();
                report.phase(phase, name, &format!(
                    "no rate kept the steady-state p99 within {bound:.1} ms: chose {rate}, the closest (steady p99 +{steady_p99_ms:.1} ms, {:.1} ms over the bound; on a slow line this is often the modem's start-up queue, which a step cannot drain: raise --bound to accept it)",
                    steady_p99_ms - bound
                ));
                let missed = Missed {
                    phase: name.into(),
                    bound_ms: bound,
                    steady_p99_ms,
                };
                return Ok((Some(rate), Some(missed)));
            }
            Next::Done(SearchOutcome::NoRatePasses) => {
                report.phase(phase, name, &format!(
                    "no rate kept the steady-state p99 within {:.1} ms, and no step at or above {:.0} % of the capacity gave a latency figure; left unset (are the probes answered?)",
                    search.bound_ms(),
                    crate::search::CLOSEST_FLOOR_PERCENT
                ));
                return Ok((None, None));
            }
            Next::Try(rate) => {
                lock(shaping)
                    .shape(&opts(rate))
                    .map_err(TuneError::Shaping)?;
                let before = format!("{name} {rate}");
                let bound = search.bound_ms();
                let waited = drain_before(s, stop, ctx.drainer, ctx.laps, before, bound)?;
                let results = test_results(s, profile, STEP_LOAD, stop)?;
                if let Some(d) = ctx.drainer.as_mut() {
                    d.after(&results);
                }
                let sum = Summary::from_results(&results);
                let p = sum.primary();
                let p99 = p.and_then(|p| p.steady_induced_p99_ms).unwrap_or(f64::NAN);
                let peak = p.and_then(|p| p.startup_peak_induced_ms);
                let good = goodput(&sum, down).unwrap_or(Rate::from_bits_per_sec(0));
                search.record(
                    rate,
                    Reading {
                        steady_p99_ms: p99,
                        startup_peak_ms: peak,
                        growth_ms_per_s: p.and_then(|p| p.steady_growth_ms_per_s),
                        goodput: good,
                        down_leg: p.and_then(|p| p.steady_down),
                        up_leg: p.and_then(|p| p.steady_up),
                    },
                );
                let last = search.steps().last().expect("just recorded");
                report.phase(
                    phase,
                    name,
                    &format!(
                        "{rate}: steady p99 +{p99:.1} ms ({}){}, start-up peak +{} ms, goodput {}{waited}",
                        last.verdict(search.bound_ms()),
                        legs(last.down_leg, last.up_leg),
                        fmt_opt(peak),
                        readable(good)
                    ),
                );
            }
        }
    }
}

/// The shaping, for one transaction; a poisoned lock (a panic elsewhere) still restores.
fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Box<dyn Shaping + Send>> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A run's one-way legs, for its progress line: which way the delay stood.
fn legs(down: Option<Leg>, up: Option<Leg>) -> String {
    match (down, up) {
        (Some(d), Some(u)) => format!(
            "; one way: down +{:.1} ms, up +{:.1} ms",
            d.induced_p99_ms, u.induced_p99_ms
        ),
        _ => String::new(),
    }
}

/// The bound at a line rate: the user's plus [`PACKETS_OF_SLACK`] full packets' time.
pub fn bound_at(bound_ms: f64, line: Rate) -> f64 {
    let bits = PACKETS_OF_SLACK * 1514.0 * 8.0;
    bound_ms + 1000.0 * bits / (line.bits_per_sec().max(1) as f64)
}

/// The line rate that carries `goodput` of bulk TCP under `link`'s framing.
pub fn line_rate(goodput: Rate, link: &LinkLayer) -> Rate {
    let model = GoodputModel::ipv4_timestamps(LinkFraming::from(link));
    match model.fraction() {
        Ok((payload, wire)) => Rate::from_bits_per_sec(
            (u128::from(goodput.bits_per_sec()) * u128::from(wire) / u128::from(payload)) as u64,
        ),
        Err(_) => goodput,
    }
}

/// The line rate that carried `goodput` of bulk TCP beside `test`'s own latency probes. Each
/// probe crosses the link once each way, so every class sent during the load takes its framed
/// size from the line too: on dsl-2002's 220 kbit/s ATM upload, UDP and ICMP probes 20 times a
/// second, two cells each, take 34 kbit/s, and the goodput alone put the line at 185 kbit/s.
pub fn line_beside_probes(goodput: Rate, link: &LinkLayer, test: &Summary) -> Rate {
    let framing = LinkFraming::from(link);
    let per_second = 1.0 / PROBE_INTERVAL.as_secs_f64();
    let probes: f64 = test
        .probes
        .iter()
        .filter(|p| p.sent > 0)
        .map(|p| per_second * framing.wire_bytes(ipv4_probe_bytes(p.kind)) as f64 * 8.0)
        .sum();
    Rate::from_bits_per_sec(line_rate(goodput, link).bits_per_sec() + probes as u64)
}

fn link_layer(opts: &ShapeOptions) -> Result<LinkLayer, TuneError> {
    LinkLayer::resolve(opts.link, opts.overhead, opts.mpu, opts.framing, opts.vlan)
        .map_err(|e| TuneError::Invalid(e.to_string()))
}

/// The unshaped test of one direction, and its goodput as the line carried it
/// ([`crate::capacity`]: not what a stall held back and released into the window).
/// With it, the round trips of the test's idle tail ([`drain::tail`]).
fn capacity(
    s: &Settings,
    down: bool,
    stop: &Stop,
) -> Result<(Summary, Rate, Vec<Option<f64>>), TuneError> {
    let results = test_results(s, if down { "download" } else { "upload" }, STEP_LOAD, stop)?;
    let summary = Summary::from_results(&results);
    let tail = drain::tail(&results);
    match crate::capacity::line_goodput(&results, down) {
        Some(g) if g > 0.0 => Ok((summary, Rate::from_bits_per_sec(g as u64), tail)),
        _ => goodput(&summary, down).map(|g| (summary, g, tail)),
    }
}

/// Runs one test of `profile` with `load` against the user's far end.
fn test(s: &Settings, profile: &str, load: Duration, stop: &Stop) -> Result<Summary, TuneError> {
    test_results(s, profile, load, stop).map(|r| Summary::from_results(&r))
}

fn test_results(
    s: &Settings,
    profile: &str,
    load: Duration,
    stop: &Stop,
) -> Result<Results, TuneError> {
    stop.check()?;
    let mut plan = s.test.clone();
    plan.profile = Profile::by_name(profile)
        .and_then(|p| p.resolve(None))
        .map_err(TuneError::Measure)?;
    plan.idle_before = Duration::from_secs(1);
    plan.load = load;
    plan.idle_after = Duration::from_millis(500);
    plan.probe_interval = PROBE_INTERVAL;
    let results = run_plan(&plan, &mut NoProgress).map_err(|f| TuneError::Measure(f.error))?;
    stop.check()?;
    Ok(results)
}

fn loaded_median(s: &Summary) -> Option<f64> {
    s.primary().and_then(|p| p.loaded_p50_ms)
}

/// The unshaped link's goodput: over the steady state, where the flows fill the link (slow
/// start's ramp in the mean put vdsl2's 40 Mbit/s line at 36 in the lab, and the search's
/// ceiling, 105 % of it, under the line).
fn goodput(s: &Summary, down: bool) -> Result<Rate, TuneError> {
    let d = if down { &s.download } else { &s.upload };
    match d.steady_goodput_bps.or(d.goodput_bps) {
        Some(g) if g > 0.0 => Ok(Rate::from_bits_per_sec(g as u64)),
        _ => Err(TuneError::NoGoodput(if down {
            "download"
        } else {
            "upload"
        })),
    }
}

/// A rate for the progress lines: "37.2 Mbit/s", not the exact `37220337bit`.
fn readable(r: Rate) -> String {
    unbloat_report::format::rate(Some(r.bits_per_sec() as f64))
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("?".into(), |v| format!("{v:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::linklayer::LinkPreset;

    #[test]
    fn the_bound_grows_by_two_packets_at_low_rates_only() {
        assert!((bound_at(10.0, Rate::from_kbit(768)) - (10.0 + 31.5)).abs() < 0.2);
        assert!(bound_at(10.0, Rate::from_mbit(80)) < 10.31);
    }

    #[test]
    fn the_drain_waits_get_a_lap_of_their_own_and_leave_the_phases() {
        let mut laps = Laps::new(Instant::now() - Duration::from_secs(10));
        laps.aside(Duration::from_secs(4));
        laps.lap("download");
        laps.lap("upload");
        let laps = laps.done();
        assert_eq!(laps.len(), 3);
        assert!((laps[0].seconds - 6.0).abs() < 0.5, "{laps:?}");
        assert!(laps[1].seconds < 0.5, "{laps:?}");
        assert_eq!(laps[2].phase, "draining");
        assert_eq!(laps[2].seconds, 4.0);
        // No wait, no lap.
        assert_eq!(Laps::new(Instant::now()).done(), vec![]);
    }

    /// Issue 38: dsl-2002's upload was put at 185 kbit/s of its 220, and every rate searched
    /// from there: the probes' 34 kbit/s were left out.
    #[test]
    fn the_line_counts_the_probes_that_crossed_it_beside_the_goodput() {
        let vcmux = LinkPreset::PppoaVcmux.link_layer();
        let mut test = Summary::from_results(&unbloat_report::synthetic::rrul(0));
        test.probes
            .retain(|p| p.name == "UDP BE" || p.name == "ICMP");
        assert_eq!(test.probes.len(), 2, "{:?}", test.probes);
        let good = Rate::from_kbit(158);
        let added = line_beside_probes(good, &vcmux, &test).bits_per_sec()
            - line_rate(good, &vcmux).bits_per_sec();
        // UDP 72 and ICMP 40 IP bytes, + 10 of overhead: two cells (106 bytes) each, 20 a second.
        assert_eq!(added, 2 * 20 * 106 * 8);
    }

    #[test]
    fn line_rate_undoes_the_framing_cost() {
        let atm = LinkPreset::PppoeLlcsnap.link_layer();
        let good = Rate::from_kbit(1_000);
        let line = line_rate(good, &atm);
        // 1448 payload bytes in 1500 + 40 = 1540 bytes, 33 cells = 1749 bytes on the line.
        assert_eq!(line.bits_per_sec(), 1_000_000 * 1749 / 1448);
    }
}
