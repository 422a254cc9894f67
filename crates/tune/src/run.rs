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
use unbloat_report::model::Results;
use unbloat_report::summary::{Leg, Summary};
use unbloat_shaper::goodput::{GoodputModel, LinkFraming};
use unbloat_shaper::linklayer::LinkLayer;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::Rate;

use crate::both_ways::{self, BothStep, Measured};
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
/// How long each search step loads the link: the start-up (3 s, left out) and the steady state.
pub const STEP_LOAD: Duration = Duration::from_secs(8);
/// What one step costs beyond its load: connection set-up, a short idle baseline and tail.
const STEP_OVERHEAD: Duration = Duration::from_secs(2);
/// One loaded step, all told.
const STEP: Duration = Duration::from_secs(STEP_LOAD.as_secs() + STEP_OVERHEAD.as_secs());
/// How long each both-ways check loads the link. rrul starts eight flows at once, and on a slow
/// ATM link the queue their slow start leaves upstream of the ingress shaper lasts well past the
/// 3 s start-up: on adsl at 96 % of the line the p99 of the load's seconds 3 to 8 read 113 and
/// 185 ms in two 30 s runs, of seconds 8 to 15 57 and 63 ms, and of the whole steady state 91
/// and 128 ms. An 8 s check judged that residue more than the pair, and its 100 probes made the
/// p99 one of its two worst (adsl2-pppoa at 96 %: 37.7, 46.0 and 96.3 ms in three runs of the
/// same pair). 12 s (180 steady probes) weighs the pair more, for 4 s a check.
pub const BOTH_LOAD: Duration = Duration::from_secs(12);
/// One both-ways check, all told.
const BOTH_STEP: Duration = Duration::from_secs(BOTH_LOAD.as_secs() + STEP_OVERHEAD.as_secs());
/// Probes every 50 ms: 100 samples in a step's 5 s steady state, enough for its p99.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);
/// The idle phase's test.
const IDLE: Duration = Duration::from_secs(3);
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

/// Where the time went: each [`Laps::lap`] closes the phase that ran since the one before.
struct Laps {
    last: Instant,
    laps: Vec<Lap>,
}

impl Laps {
    fn new(started: Instant) -> Laps {
        Laps {
            last: started,
            laps: vec![],
        }
    }

    fn lap(&mut self, phase: &str) {
        let now = Instant::now();
        self.laps.push(Lap {
            phase: phase.into(),
            seconds: (now - self.last).as_secs_f64(),
        });
        self.last = now;
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
    let (down_test, down_good) = capacity(s, true, stop)?;
    let (up_test, up_good) = capacity(s, false, stop)?;
    laps.lap("capacity");
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

    // Before the searches, so that their steps measure what the result will shape with.
    let (link, memlimit) = crate::slow_upload::bounded(&link, capacity_up.line);
    if let Some(limit) = memlimit {
        report.phase(
            2,
            "capacity",
            &format!(
                "a slow upload: its cake gets memlimit {limit} (a second of its line; cake's own 4 MB let rrul's uploads keep seconds of queue)"
            ),
        );
    }

    let steps_each = budget.steps_per_direction();
    let bound_down_ms = bound_at(s.bound_ms, capacity_down.line);
    let bound_up_ms = bound_at(s.bound_ms, capacity_up.line);
    let bounds = both_ways::Bounds::new(s.bound_ms, bound_down_ms, bound_up_ms);
    let with = |down: Rate, up: Rate| ShapeOptions {
        down: Some(down),
        up: Some(up),
        ..link.clone()
    };

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
    let (down, down_missed) = search_one(s, shaping, stop, report, &mut search, true, |r| {
        with(r, other)
    })?;
    missed.extend(down_missed);
    let steps_down = search.steps().to_vec();
    laps.lap("download");

    report.phase(
        5,
        "upload",
        &format!("rate search, at most {steps_each} steps"),
    );
    let down_rate = down.unwrap_or(capacity_down.line.percent(OTHER_PERCENT));
    let mut search = Search::new(capacity_up.line, bound_up_ms, steps_each);
    let (up, up_missed) = search_one(s, shaping, stop, report, &mut search, false, |r| {
        with(down_rate, r)
    })?;
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
            let sum = test(s, "rrul", BOTH_LOAD, stop)?;
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
                    "{d} down, {u} up: steady p99 +{:.1} ms{} ({}){}, start-up peak +{} ms",
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
        time: laps.laps,
        seconds: 0.0,
        ending: String::new(),
    })
}

/// One direction's search: shape, load, record, until the search is done.
fn search_one(
    s: &Settings,
    shaping: &Shared,
    stop: &Stop,
    report: &mut dyn Report,
    search: &mut Search,
    down: bool,
    opts: impl Fn(Rate) -> ShapeOptions,
) -> Result<(Option<Rate>, Option<Missed>), TuneError> {
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
                untold,
            }) => {
                // Issue 38: a direction left unshaped keeps the modem's whole queue; the rate that
                // came closest keeps most of it out.
                let bound = search.bound_ms();
                let which = match untold {
                    Some(lower) => format!("the highest rate whose readings overlap the closest's ({lower}): the steps cannot tell them apart, the goodput can"),
                    None => "the closest".into(),
                };
                report.phase(phase, name, &format!(
                    "no rate kept the steady-state p99 within {bound:.1} ms: chose {rate}, {which} (steady p99 +{steady_p99_ms:.1} ms, {:.1} ms over the bound; on a slow line this is often the modem's start-up queue, which a step cannot drain: raise --bound to accept it)",
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
                let sum = test(s, profile, STEP_LOAD, stop)?;
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
                        "{rate}: steady p99 +{p99:.1} ms ({}){}, start-up peak +{} ms, goodput {}",
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
fn capacity(s: &Settings, down: bool, stop: &Stop) -> Result<(Summary, Rate), TuneError> {
    let results = test_results(s, if down { "download" } else { "upload" }, STEP_LOAD, stop)?;
    let summary = Summary::from_results(&results);
    match crate::capacity::line_goodput(&results, down) {
        Some(g) if g > 0.0 => Ok((summary, Rate::from_bits_per_sec(g as u64))),
        _ => goodput(&summary, down).map(|g| (summary, g)),
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

/// The time left for the searches, split into a number of steps per direction.
struct Budget {
    max: Duration,
    auto: bool,
    started: Instant,
}

impl Budget {
    fn new(max: MaxTime, started: Instant) -> Budget {
        let (max, auto) = match max {
            MaxTime::Auto => (DEFAULT_TIME, true),
            MaxTime::At(d) => (d, false),
        };
        Budget { max, auto, started }
    }

    /// With `auto`, stretches the run (called after the capacity phase) to hold a sweep of
    /// `sweep`, [`AUTO_STEPS`] steps each way and the reserved checks, within [`AUTO_MOST`].
    fn fit(&mut self, sweep: Duration) {
        if self.auto {
            let need = self.started.elapsed() + sweep + self.after(AUTO_STEPS) + MARGIN;
            // Whole ten seconds up: the steps are counted down from what is left, and a
            // budget to the second would lose one to the time the counting itself takes.
            let need = Duration::from_secs(need.as_secs().div_ceil(10) * 10 + 10);
            self.max = need.clamp(DEFAULT_TIME, AUTO_MOST);
        }
    }

    /// The searches' `steps` each way and the reserved checks.
    fn after(&self, steps: u32) -> Duration {
        STEP * (2 * steps) + BOTH_STEP * RESERVED_CHECKS
    }

    /// What the rest of the run takes, said before it: the sweep, the searches, the checks.
    fn estimate(&self, sweep: Duration) -> String {
        let sweep = sweep.min(self.first_sweep());
        let steps = ((self
            .left()
            .saturating_sub(sweep + BOTH_STEP * RESERVED_CHECKS))
        .as_secs_f64()
            / STEP.as_secs_f64()
            / 2.0) as u32;
        let steps = steps.clamp(MIN_STEPS as u32, 8);
        let total = self.started.elapsed() + sweep + self.after(steps) + MARGIN;
        format!(
            "the run takes about {} s in all, at most {} s ({}): {}{} steps of {} s each way, both-ways checks of {} s",
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
    fn steps_per_direction(&self) -> usize {
        let checks = BOTH_STEP * RESERVED_CHECKS;
        let left = self.left().saturating_sub(checks);
        ((left.as_secs_f64() / STEP.as_secs_f64() / 2.0) as usize).clamp(MIN_STEPS, 8)
    }

    /// Whether a sweep of `time` more still leaves [`MIN_STEPS`] steps each way and
    /// [`RESERVED_CHECKS`] their time.
    fn holds_another_sweep(&self, time: Duration) -> bool {
        let after = STEP * (2 * MIN_STEPS as u32) + BOTH_STEP * RESERVED_CHECKS;
        self.left() >= time + after
    }

    /// The longest the first framing sweep may take: what is left once the searches' least
    /// steps and one both-ways check ([`min_time`]'s phases) are set aside. A slow upload
    /// spaces the echoes, and its sweep would otherwise overrun `--max-time`.
    fn first_sweep(&self) -> Duration {
        let after = STEP * (2 * MIN_STEPS as u32) + BOTH_STEP;
        self.left().saturating_sub(after)
    }

    /// Both-ways checks that fit the time left (called after the searches): at least one.
    fn both_ways_checks(&self) -> usize {
        ((self.left().as_secs_f64() / BOTH_STEP.as_secs_f64()) as usize).max(1)
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
    use unbloat_shaper::linklayer::LinkPreset;

    #[test]
    fn the_bound_grows_by_two_packets_at_low_rates_only() {
        assert!((bound_at(10.0, Rate::from_kbit(768)) - (10.0 + 31.5)).abs() < 0.2);
        assert!(bound_at(10.0, Rate::from_mbit(80)) < 10.31);
    }

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

    #[test]
    fn max_time_reads_auto_or_a_time() {
        assert_eq!(MaxTime::parse("auto"), Ok(MaxTime::Auto));
        let three = MaxTime::parse("3m").unwrap();
        assert_eq!(three, MaxTime::At(Duration::from_secs(180)));
        assert_eq!(MaxTime::parse(&three.to_string()), Ok(three));
        assert!(MaxTime::parse("soon").is_err());
        assert_eq!(MaxTime::Auto.most(), AUTO_MOST);
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
