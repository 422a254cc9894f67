//! The framing phase: the size sweep against the far end's host, its analysis, and what it means
//! for the shaper's link options.
//!
//! Only ATM can be read from round trips (its cells make a staircase whose steps fall where the
//! per-packet overhead puts them). A straight line says "not ATM" and nothing about the overhead,
//! which adds the same bytes to every size: then the user's link options stand (`--link`,
//! `--overhead`, or unbloat's default Ethernet compensation, 38 bytes and mpu 84, which
//! overestimates a few bytes on PTM and DOCSIS links rather than under).

use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use unbloat_measure::client::TestPlan;
use unbloat_measure::sweep::{self, SweepPlan};
use unbloat_measure::MeasureError;
use unbloat_shaper::linklayer::LinkPreset;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::Rate;

use crate::framing::{self, per_size_min, Family, FramingGuess};
use crate::interrupt::{self, Stop};
use crate::TuneError;

/// What the sweep found, and its plot (drawn while the per-size minima are at hand).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FramingFound {
    #[serde(flatten)]
    pub guess: FramingGuess,
    /// Echoes sent and answered.
    pub echoes: usize,
    pub answered: usize,
    /// Sweeps made: more than one when the first could not decide and time allowed.
    #[serde(default = "one")]
    pub sweeps: usize,
    /// The framing the searches assumed because the sweep could not decide on a line as slow
    /// as ADSL ([`fallback`]); `None` when the sweep decided or the line is faster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumed: Option<LinkPreset>,
    #[serde(skip)]
    pub svg: Option<String>,
}

fn one() -> usize {
    1
}

/// The fastest ADSL there is: ADSL2+ carries at most 24 Mbit/s down and, with Annex M, 3.3 up.
/// A line no faster than this each way may be ADSL, so ATM's cells may be costing it.
pub const ADSL_MAX_DOWN: Rate = Rate::from_kbit(24_000);
pub const ADSL_MAX_UP: Rate = Rate::from_kbit(3_300);

/// The framing an undecided sweep searches with on a line as slow as ADSL: sqm's advice when
/// unsure, PPPoE over LLC/SNAP (ATM cells, 40 bytes). Issue 38: a slow ATM line's sweep could not
/// decide (confidence 0.48), the searches ran without compensation and neither direction found
/// a rate. Overestimating the overhead costs a line that is not ATM some goodput (about 10 % of
/// full packets); underestimating it on ATM lets the modem's queue fill.
pub const UNSURE_ADSL: LinkPreset = LinkPreset::PppoeLlcsnap;

/// What the searches assume when the sweep could not decide: [`UNSURE_ADSL`] on a line no
/// faster than ADSL (`down` and `up`, the unshaped goodputs), nothing on a faster one (not ATM).
/// "Straight" is never assumed: only a sweep that saw it says so.
pub fn fallback(guess: &FramingGuess, down: Rate, up: Rate) -> Option<LinkPreset> {
    (guess.family == Family::Undecided && looks_like_adsl(down, up)).then_some(UNSURE_ADSL)
}

/// The link options to shape with: ATM's found overhead, unless the user said otherwise; when
/// the sweep could not decide, what it [`fallback`]s to.
pub fn link_options(found: &FramingFound, user: &ShapeOptions) -> ShapeOptions {
    let said = user.link.is_some() || user.overhead.is_some() || user.framing.is_some();
    if said {
        return user.clone();
    }
    let layer = match found.assumed {
        Some(preset) => Some(preset.link_layer()),
        None => found.guess.link_layer(),
    };
    match layer {
        Some(l) => ShapeOptions {
            framing: Some(l.framing),
            overhead: Some(i64::from(l.overhead)),
            mpu: Some(i64::from(l.mpu)),
            ..user.clone()
        },
        None => user.clone(),
    }
}

/// Whether a line with these unshaped goodputs may be ADSL: no faster than [`ADSL_MAX_DOWN`] and
/// [`ADSL_MAX_UP`].
pub fn looks_like_adsl(down: Rate, up: Rate) -> bool {
    down <= ADSL_MAX_DOWN && up <= ADSL_MAX_UP
}

/// The address the probes go to: the sweep's echoes go there too.
fn target(test: &TestPlan) -> Result<IpAddr, TuneError> {
    let host = test.far_ends.probe.host();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            TuneError::Measure(MeasureError::InvalidArgument(format!("{host}: no address")))
        })
}

/// The most sweeps one run makes: the first, and two more while the noise hides the steps.
pub const MAX_SWEEPS: usize = 3;

/// The least time between echoes: 5 ms keeps a fast link's sweep at 200 echoes a second, a
/// load no far end's ICMP limit (nor User-Mode Linux's timers) minds.
const MIN_SPACING: Duration = Duration::from_millis(5);

/// How long one sweep lasts on a fast link: 64 to 256 bytes, every byte, 20 rounds 5 ms apart.
const SWEEP_TIME: Duration = Duration::from_millis(19_300);

/// The fewest rounds a sweep makes when time is short: on the slow uplinks that make a sweep
/// long, one cell's step is a millisecond (0.97 ms at 512 kbit/s), 80 times the lab's noise, and
/// the minimum over 4 rounds shows it.
pub const FEWEST_ROUNDS: u32 = 4;

/// The sweep's plan: 64 to 256 bytes, every byte, 5 ms apart, as many rounds (at least 10) as
/// fit about 20 s; further apart on a slow upload: each echo must have left the line before the
/// next is sent, or they queue behind each other and the staircase drowns (a 256-byte echo is
/// 7 ATM cells, 371 bytes, 13.5 ms at 220 kbit/s). `up` is the unshaped upload's goodput. The
/// rounds are cut (to [`FEWEST_ROUNDS`] at the least) to fit `at_most`: the time the run's
/// `--max-time` leaves.
pub fn plan_for(up: Rate, at_most: Duration) -> SweepPlan {
    let mut plan = SweepPlan::default();
    let largest = f64::from(plan.ip_bytes.iter().copied().max().unwrap_or(256));
    // With the most overhead a sweep reports (55 bytes), in 53-byte cells.
    let cells = ((largest + f64::from(*framing::OVERHEAD_RANGE.end())) / 48.0).ceil() * 53.0;
    let on_line =
        Duration::from_secs_f64(1.5 * cells * 8.0 / (up.bits_per_sec().max(1_000) as f64));
    plan.interval = on_line.max(MIN_SPACING);
    let round = plan.interval.as_secs_f64() * plan.ip_bytes.len() as f64;
    let fit = SWEEP_TIME.as_secs_f64() / round;
    let fit_budget = (at_most.saturating_sub(plan.grace)).as_secs_f64() / round;
    plan.rounds = ((fit as u32).max(10))
        .min(fit_budget as u32)
        .max(FEWEST_ROUNDS);
    plan
}

/// Runs the sweep towards the test's probe target ([`plan_for`] the upload, within `at_most`)
/// and analyses it against the measured goodputs `down` and `up` ([`framing::detect_minima_on`]).
/// While the analysis cannot decide, and `another(time)` says the run has time for one more
/// sweep, it sweeps again (at most [`MAX_SWEEPS`] in all, each in an order of its own) and
/// decides on every echo so far: a minimum over more rounds is quieter.
pub fn sweep(
    test: &TestPlan,
    (down, up): (Rate, Rate),
    at_most: Duration,
    stop: &Stop,
    another: &mut dyn FnMut(Duration) -> bool,
) -> Result<FramingFound, TuneError> {
    stop.check()?;
    let target = target(test)?;
    let mut plan = plan_for(up, at_most);
    let mut echoes = vec![];
    let mut sweeps = 0;
    let (mins, guess) = loop {
        let samples = sweep::run(&plan, target, interrupt::flag(), &mut |_| {})
            .map_err(TuneError::Measure)?;
        stop.check()?;
        sweeps += 1;
        echoes.extend(samples.echoes);
        let mins = per_size_min(echoes.iter().map(|e| (e.ip_bytes, e.rtt_ns)));
        let guess = framing::detect_minima_on(&mins, Some((down, up)));
        let undecided = guess.family == Family::Undecided;
        if !undecided || sweeps == MAX_SWEEPS || !another(plan.duration()) {
            break (mins, guess);
        }
        plan.seed = plan.seed.wrapping_add(1);
    };
    let assumed = fallback(&guess, down, up);
    let said = assumed.map(|a| format!("{a}'s ATM framing, overhead {}", a.link_layer().overhead));
    let svg = Some(framing::render_svg(&mins, &guess, said.as_deref()));
    let answered = echoes.iter().filter(|e| e.rtt_ns.is_some()).count();
    Ok(FramingFound {
        guess,
        echoes: echoes.len(),
        answered,
        sweeps,
        assumed,
        svg,
    })
}

/// The one-line verdict for the progress line, its evidence, and what the searches use when the
/// sweep could not decide on a line as slow as ADSL.
pub fn verdict(found: &FramingFound) -> String {
    let g = &found.guess;
    let sweeps = match found.sweeps {
        1 => String::new(),
        n => format!(" ({n} sweeps)"),
    };
    let said = match g.family {
        Family::Atm => format!(
            "ATM, overhead {} bytes ({}): {}",
            g.overhead.map_or("?".into(), |o| o.to_string()),
            g.evidence(),
            g.reason
        ),
        _ => format!("{:?} ({}): {}", g.family, g.evidence(), g.reason),
    };
    let unsure = match found.assumed {
        Some(preset) => format!(
            "; the line is no faster than ADSL, so the searches assume {preset}'s ATM framing \
             (overhead {}): too much overhead costs a little goodput, too little fills the modem",
            preset.link_layer().overhead
        ),
        None => String::new(),
    };
    said + &sweeps + &unsure
}

/// The sweep's plot.
pub fn plot_svg(found: &FramingFound) -> Option<String> {
    found.svg.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::linklayer::Framing;

    /// A sweep's result on a line of these goodputs, with what it falls back to.
    fn found(family: Family, overhead: Option<i32>, (down, up): (Rate, Rate)) -> FramingFound {
        let mut f = FramingFound {
            guess: FramingGuess {
                family,
                overhead,
                mpu: None,
                confidence: 0.9,
                noise_ms: 0.01,
                step_ms: 0.5,
                fitted_step_ms: 0.5,
                line_step_ms: None,
                sizes: 193,
                reason: String::new(),
                model: None,
            },
            echoes: 1930,
            answered: 1930,
            sweeps: 1,
            assumed: None,
            svg: None,
        };
        f.assumed = fallback(&f.guess, down, up);
        f
    }

    #[test]
    fn a_slow_upload_spaces_the_echoes() {
        let plenty = Duration::from_secs(60);
        let fast = plan_for(Rate::from_mbit(20), plenty);
        assert_eq!((fast.interval, fast.rounds), (Duration::from_millis(5), 20));
        let slow = plan_for(Rate::from_kbit(220), plenty);
        assert!(
            slow.interval > Duration::from_millis(20) && slow.interval < Duration::from_millis(25),
            "{slow:?}"
        );
        assert_eq!(slow.rounds, 10);
    }

    #[test]
    fn a_short_budget_cuts_the_rounds_but_not_below_four() {
        // 220 kbit/s: a round is 3.9 s, so 10 take 39 s; 25 s (less 1 s for the last replies) hold 6.
        let slow = plan_for(Rate::from_kbit(220), Duration::from_secs(25));
        assert_eq!(slow.rounds, 6, "{slow:?}");
        assert!(slow.duration() <= Duration::from_secs(25));
        assert_eq!(
            plan_for(Rate::from_kbit(220), Duration::ZERO).rounds,
            FEWEST_ROUNDS
        );
        // A fast link's 20 rounds fit in 20 s.
        assert_eq!(
            plan_for(Rate::from_mbit(20), Duration::from_secs(20)).rounds,
            19
        );
    }

    #[test]
    fn atm_overrides_the_default_but_not_what_the_user_said() {
        let none = ShapeOptions::default();
        let (down, up) = (Rate::from_mbit(50), Rate::from_mbit(10));
        let o = link_options(&found(Family::Atm, Some(10), (down, up)), &none);
        assert_eq!(
            (o.framing, o.overhead, o.mpu),
            (Some(Framing::Atm), Some(10), Some(0))
        );
        let user = ShapeOptions {
            link: Some(LinkPreset::PppoeLlcsnap),
            ..Default::default()
        };
        assert_eq!(
            link_options(&found(Family::Atm, Some(10), (down, up)), &user),
            user
        );
        assert_eq!(
            link_options(&found(Family::Straight, None, (down, up)), &none),
            none
        );
        assert_eq!(
            link_options(&found(Family::Undecided, None, (down, up)), &none),
            none
        );
    }

    #[test]
    fn an_undecided_sweep_on_a_line_as_slow_as_adsl_assumes_pppoe_llcsnap() {
        let none = ShapeOptions::default();
        let (down, up) = (Rate::from_kbit(1_100), Rate::from_kbit(180));
        let undecided = found(Family::Undecided, None, (down, up));
        let o = link_options(&undecided, &none);
        assert_eq!(
            (o.framing, o.overhead, o.mpu),
            (Some(Framing::Atm), Some(40), Some(0))
        );
        assert!(verdict(&undecided).contains("pppoe-llcsnap"));
        // What the user said stands; a straight line on a slow link stays as it is.
        let user = ShapeOptions {
            overhead: Some(18),
            ..Default::default()
        };
        assert_eq!(link_options(&undecided, &user), user);
        assert_eq!(
            link_options(&found(Family::Straight, None, (down, up)), &none),
            none
        );
        // Faster than ADSL2+ either way: not ADSL, so nothing is assumed.
        let vdsl = (Rate::from_mbit(40), Rate::from_mbit(10));
        let fast = found(Family::Undecided, None, vdsl);
        assert_eq!(fast.assumed, None);
        assert_eq!(link_options(&fast, &none), none);
        assert!(!verdict(&fast).contains("pppoe-llcsnap"));
    }
}
