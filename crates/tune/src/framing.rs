//! Framing detection: whether a link sends ATM cells, and with how many bytes of overhead,
//! from the round trips of ICMP echoes of many sizes (`unbloat_measure::sweep`). Pure.
//!
//! Heads up! This is the analysis of the ATM overhead detector (Sebastian Moeller's
//! `ATM_overhead_detector`, after Jesper Brouer's thesis "Linux traffic control on ADSL", 2006):
//! an ATM link carries a packet in whole 48-byte cell payloads, so its serialisation time, and
//! with it the round trip, grows in steps every 48 bytes of packet size; where the steps fall
//! tells how many bytes the encapsulation adds. PTM (VDSL2's 64b/65b), DOCSIS and Ethernet grow
//! in a straight line and hide their overhead in the intercept.
//!
//! How it decides, on the lowest round trip of each size (see [`fit`] for the model):
//! 1. For every offset `o` in 0..48, fit `a + c*x + d*saw(x + o)`; keep the offset whose
//!    sawtooth fits best. On ATM, `d` (the sawtooth) is as tall as the step, `48*c`; on a
//!    straight line, `d` is 0.
//! 2. The step a cell would add is `48*c` from the slope, but never under
//!    [`ATM_MIN_STEP_MS`]: no ATM link is faster than that. The call is ATM when `d` is above
//!    half of that step, straight when below, each by at least [`DECIDE`] standard errors of
//!    `d`; in between (noise too high for the step), undecided. A sawtooth over twice the step
//!    is not cells either (undecided).
//! 3. A straight line is believed only where it grows as fast as the line's measured rates
//!    say it must ([`detect_minima_on`]): a round trip that grows far slower than each byte's
//!    time on the line did not see the line's serialisation at all (a token-bucket shaper in
//!    front of it lets a lone packet through at once), so it tells nothing of cells either, and
//!    the call is undecided. Issue 55: a lab modem like that, 1.5/0.256 Mbit/s of ATM, gave a
//!    flat line (0.002 ms per 48 bytes where the rates give 1.8 ms) and was called straight.
//! 4. The overhead is the best offset, known only modulo 48 (a whole cell more per packet
//!    shifts every step by one cell's time, which the intercept absorbs): it is reported in
//!    [`OVERHEAD_RANGE`], the range real encapsulations use.
//!
//! [`plot::render_svg`] draws a sweep and its verdict (it imports this module's types, never
//! the reverse).
//!
//! What callers can rely on: [`detect`] never panics on any sweep (empty, all lost, one size);
//! a sweep too short to decide is [`Family::Undecided`] with its reason.

mod fit;
pub mod plot;

pub use fit::{per_size_min, SizeMin, CELL_PAYLOAD};
// The name tune's sweep phase calls it by.
pub use plot::render_svg;

use serde::{Deserialize, Serialize};
use unbloat_measure::sweep::SweepSamples;
use unbloat_shaper::linklayer::{Framing, LinkLayer};
use unbloat_units::Rate;

use fit::{capped_rss, cells, least_squares, saw};

/// The smallest round-trip step an ATM cell adds on any ATM link in use: ADSL2+ Annex M's
/// fastest upload (3.3 Mbit/s) with 24 Mbit/s down adds 128 + 18 us per cell, G.SHDSL.bis
/// (5.7 Mbit/s each way) 74 + 74 us; 0.1 ms keeps a margin under both.
pub const ATM_MIN_STEP_MS: f64 = 0.1;

/// Standard errors between the sawtooth found and the boundary of the two families needed for
/// a call (the best of 48 offsets of pure noise reaches 3 about once in a hundred sweeps).
pub const DECIDE: f64 = 4.0;

/// Where an ATM overhead is reported: at least the 8-byte AAL5 trailer (IPoA over VC-mux, the
/// least any ATM link adds), at most 55 (PPPoE over LLC/SNAP with a VLAN tag is 44; cake's
/// `conservative` is 48). Values 48 apart look the same to a sweep.
pub const OVERHEAD_RANGE: std::ops::RangeInclusive<i32> = 8..=55;

/// Sizes, and the span of sizes, below which a sweep cannot show the staircase twice.
const MIN_SIZES: usize = 24;
const MIN_SPAN_BYTES: u16 = 2 * CELL_PAYLOAD as u16;

/// The framing's family, as far as a sweep can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// 48-byte cells: ADSL (and anything else over AAL5).
    Atm,
    /// No cells: PTM (VDSL2), DOCSIS, Ethernet, which a sweep cannot tell apart.
    Straight,
    /// The noise was too high for the step a cell would add, or the sweep too short.
    Undecided,
}

/// The fitted model, for the plot and the record: `rtt = intercept + slope*x + saw*saw(x+offset)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub offset: u32,
    pub intercept_ms: f64,
    pub slope_ms_per_byte: f64,
    pub saw_ms: f64,
}

impl Model {
    /// The model's round trip at `ip_bytes`.
    pub fn rtt_ms(&self, ip_bytes: f64) -> f64 {
        self.intercept_ms
            + self.slope_ms_per_byte * ip_bytes
            + self.saw_ms * saw(ip_bytes, f64::from(self.offset))
    }
}

/// What the sweep says about the link's framing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FramingGuess {
    pub family: Family,
    /// ATM only: bytes over the IP packet (cake's `overhead`), in [`OVERHEAD_RANGE`].
    pub overhead: Option<i32>,
    /// ATM only, and only when the smallest sizes show a floor: cake's `mpu` (a multiple of
    /// 48). `None`: no floor within the sweep (ATM presets use 0).
    pub mpu: Option<u32>,
    /// 0..1; 0.5 at the decision threshold; below it the family is `Undecided`.
    pub confidence: f64,
    /// The scatter of the per-size minima around the model (robust standard deviation).
    pub noise_ms: f64,
    /// The round trip 48 more bytes add, from the slope: on ATM, one cell's step.
    pub step_ms: f64,
    /// The sawtooth fitted (`model.saw_ms`): on ATM as tall as `step_ms`, on a straight line 0.
    #[serde(default)]
    pub fitted_step_ms: f64,
    /// The round trip 48 bytes add on a straight line at the rates tune measured, both ways;
    /// `None` when the rates were not given ([`detect_minima`]).
    #[serde(default)]
    pub line_step_ms: Option<f64>,
    /// Sizes with at least one reply.
    pub sizes: usize,
    /// One line for people: what was seen and, when it cannot tell, what to set by hand.
    pub reason: String,
    pub model: Option<Model>,
}

impl FramingGuess {
    /// The compensation to shape with when the sweep found ATM; `None` otherwise (a straight
    /// line does not tell PTM, DOCSIS and Ethernet overheads apart: the user's `--link` stays).
    pub fn link_layer(&self) -> Option<LinkLayer> {
        match (self.family, self.overhead) {
            (Family::Atm, Some(overhead)) => Some(LinkLayer {
                preset: None,
                overhead,
                mpu: self.mpu.unwrap_or(0),
                framing: Framing::Atm,
                raw: false,
            }),
            _ => None,
        }
    }
}

impl FramingGuess {
    /// The evidence in one line, for the progress line, the page and the plot: `confidence
    /// 0.97; fitted step 1.950 ms, 1.938 ms from the slope (the rates give 1.750 ms); residual
    /// 0.048 ms; 193 sizes`.
    pub fn evidence(&self) -> String {
        let rates = self
            .line_step_ms
            .map(|l| format!(" (the rates give {l:.3} ms)"))
            .unwrap_or_default();
        format!(
            "confidence {:.2}; fitted step {:.3} ms, {:.3} ms from the slope{rates}; residual \
             {:.3} ms; {} sizes",
            self.confidence, self.fitted_step_ms, self.step_ms, self.noise_ms, self.sizes
        )
    }
}

/// Reads the framing from a sweep.
pub fn detect(samples: &SweepSamples) -> FramingGuess {
    detect_minima(&per_size_min(
        samples.echoes.iter().map(|e| (e.ip_bytes, e.rtt_ns)),
    ))
}

/// [`detect`] on the lowest round trip of each size.
pub fn detect_minima(mins: &[SizeMin]) -> FramingGuess {
    detect_minima_on(mins, None)
}

/// [`detect_minima`] on a line whose capacity was measured (`line`: the download's and the
/// upload's rates): on a line as slow as ATM (48 bytes take [`ATM_MIN_STEP_MS`] or more at
/// those rates) a round trip that is not ATM must grow by at least half of what each byte's
/// time on the line adds, by [`DECIDE`] standard errors, or the sweep did not see the line and
/// is undecided, saying so (step 3).
pub fn detect_minima_on(mins: &[SizeMin], line: Option<(Rate, Rate)>) -> FramingGuess {
    // 48 bytes' time each way, in ms, without cells (a lower bound of what ATM adds).
    let line_step_ms = line.map(|(down, up)| {
        let per_bit = |r: Rate| 1e3 / (r.bits_per_sec().max(1) as f64);
        f64::from(CELL_PAYLOAD) * 8.0 * (per_bit(down) + per_bit(up))
    });
    let undecided = |reason: String| FramingGuess {
        family: Family::Undecided,
        overhead: None,
        mpu: None,
        confidence: 0.0,
        noise_ms: 0.0,
        step_ms: 0.0,
        fitted_step_ms: 0.0,
        line_step_ms,
        sizes: mins.len(),
        reason,
        model: None,
    };
    let span = match (mins.first(), mins.last()) {
        (Some(a), Some(b)) => b.ip_bytes - a.ip_bytes,
        _ => 0,
    };
    if mins.len() < MIN_SIZES || span < MIN_SPAN_BYTES {
        return undecided(format!(
            "cannot tell: {} sizes answered over {span} bytes; the sweep needs {MIN_SIZES} over \
             {MIN_SPAN_BYTES} (two cells); {}",
            mins.len(),
            FALLBACK
        ));
    }
    let Some((model, se, slope_se)) = best_offset(mins) else {
        return undecided(format!(
            "cannot tell: the sizes do not fit a line; {FALLBACK}"
        ));
    };
    let (noise, se) = (model.1, se.max(1e-6));
    let model = model.0;
    let step = f64::from(CELL_PAYLOAD) * model.slope_ms_per_byte;
    let expected = step.max(ATM_MIN_STEP_MS);
    // Standard errors from the midway point between "no sawtooth" and "a sawtooth as tall as a
    // cell's step": positive towards ATM.
    let margin = (model.saw_ms - expected / 2.0) / se;
    let confidence = margin * margin / (margin * margin + DECIDE * DECIDE);
    let mut guess = FramingGuess {
        family: Family::Undecided,
        overhead: None,
        mpu: None,
        confidence,
        noise_ms: noise,
        step_ms: step,
        fitted_step_ms: model.saw_ms,
        line_step_ms,
        sizes: mins.len(),
        reason: String::new(),
        model: Some(model),
    };
    let ms = |v: f64| format!("{v:.3} ms");
    // Cells make the sawtooth as tall as the step the slope gives; one far taller is something
    // else that repeats every 48 bytes (or noise the error estimate missed), not cells.
    let too_tall = model.saw_ms > 2.0 * expected + DECIDE * se;
    if margin >= DECIDE && too_tall {
        guess.confidence = guess.confidence.min(0.49);
        guess.reason = format!(
            "cannot tell: the round trip repeats every 48 bytes by {}, far more than the {} its \
             slope gives a cell; {FALLBACK}",
            ms(model.saw_ms),
            ms(expected)
        );
    } else if margin >= DECIDE {
        let overhead = overhead_in_range(model.offset);
        guess.family = Family::Atm;
        guess.overhead = Some(overhead);
        guess.mpu = floor_cells(mins, &model, se).map(|f| f * CELL_PAYLOAD);
        guess.reason = format!(
            "ATM: the round trip steps by {} every 48 bytes (noise {}), the cells starting at \
             overhead {overhead}{}",
            ms(model.saw_ms),
            ms(noise),
            guess.mpu.map(|m| format!(", mpu {m}")).unwrap_or_default()
        );
    } else if let Some(hidden) = line_step_ms.filter(|&l| {
        // Only a line as slow as ATM ever is: on a faster one no cell could show either way.
        let half = l / 2.0 / f64::from(CELL_PAYLOAD);
        let hidden = (half - model.slope_ms_per_byte) / slope_se.max(1e-9) >= DECIDE;
        // Said whether the sawtooth's noise left it undecided or called it straight.
        l >= ATM_MIN_STEP_MS && hidden
    }) {
        guess.confidence = guess.confidence.min(0.49);
        guess.reason = format!(
            "cannot tell: the round trip grows by {} per 48 bytes, where the line's measured \
             rates put {} on them: the sweep did not see the line's own time (a shaper in \
             front of it lets a lone packet through at once), so neither cells nor their \
             absence show; {FALLBACK}",
            ms(step),
            ms(hidden)
        );
    } else if margin <= -DECIDE {
        guess.family = Family::Straight;
        guess.reason = format!(
            "no ATM cells: the round trip grows in a straight line, {} per 48 bytes, where a \
             cell would step by {} at least (noise {}): PTM, DOCSIS or Ethernet; their overhead \
             does not show in a sweep, so give --link (vdsl2, bridged-ptm, docsis, ethernet)",
            ms(step),
            ms(expected),
            ms(noise)
        );
    } else {
        guess.reason = format!(
            "cannot tell: the noise ({}) is too high for the step a cell would add ({}); {}",
            ms(noise),
            ms(expected),
            FALLBACK
        );
    }
    guess
}

const FALLBACK: &str = "give --link yourself (on ADSL when unsure, --link pppoe-llcsnap: \
                        overhead 40 atm, or --overhead 44 --framing atm as sqm advises)";

/// The offset whose sawtooth fits best (least squares over `[1, x, saw(x+o)]`), as a model
/// with its noise, and the standard errors of its sawtooth and of its slope. Among offsets whose sawtooth is
/// positive the smallest residual over every size wins ([`fit::capped_rss`]: an ATM
/// staircase); with none positive, the largest sawtooth.
fn best_offset(mins: &[SizeMin]) -> Option<((Model, f64), f64, f64)> {
    let x: Vec<f64> = mins.iter().map(|m| f64::from(m.ip_bytes)).collect();
    let y: Vec<f64> = mins.iter().map(|m| m.min_ms).collect();
    let mut best: Option<(bool, f64, Model, f64, [f64; 2])> = None;
    for o in 0..CELL_PAYLOAD {
        let rows: Vec<Vec<f64>> = x
            .iter()
            .map(|&xi| vec![1.0, xi, saw(xi, f64::from(o))])
            .collect();
        let Some(fit) = least_squares(&rows, &y) else {
            continue;
        };
        let model = Model {
            offset: o,
            intercept_ms: fit.coef[0],
            slope_ms_per_byte: fit.coef[1],
            saw_ms: fit.coef[2],
        };
        let positive = fit.coef[2] > 0.0;
        let score = capped_rss(&rows, &y, &fit);
        let better = match &best {
            None => true,
            Some((p, rss, m, _, _)) => match (positive, *p) {
                (true, false) => true,
                (false, true) => false,
                (true, true) => score < *rss,
                (false, false) => model.saw_ms > m.saw_ms,
            },
        };
        if better {
            best = Some((positive, score, model, fit.sigma, [fit.se[2], fit.se[1]]));
        }
    }
    best.map(|(_, _, model, sigma, [se, slope_se])| ((model, sigma), se, slope_se))
}

/// The offset as an overhead in [`OVERHEAD_RANGE`].
fn overhead_in_range(offset: u32) -> i32 {
    let o = offset as i32;
    if o < *OVERHEAD_RANGE.start() {
        o + CELL_PAYLOAD as i32
    } else {
        o
    }
}

/// A floor of `F` cells under the smallest sizes (cake's mpu), when the sizes below it sit a
/// whole step per missing cell above the staircase, by [`DECIDE`] standard errors. Floors up to
/// cake's mpu limit (256 bytes, 5 cells) are tried; the strongest wins.
fn floor_cells(mins: &[SizeMin], model: &Model, se: f64) -> Option<u32> {
    let o = f64::from(model.offset);
    let k = |m: &SizeMin| cells(f64::from(m.ip_bytes), o);
    let lowest = k(mins.first()?);
    let mut best = None;
    for floor in (lowest as u32 + 1)..=(256 / CELL_PAYLOAD) {
        let bump = |m: &SizeMin| (f64::from(floor) - k(m)).max(0.0);
        let below = mins.iter().filter(|m| bump(m) > 0.0).count();
        if below < 3 {
            continue;
        }
        let rows: Vec<Vec<f64>> = mins
            .iter()
            .map(|m| {
                let x = f64::from(m.ip_bytes);
                vec![1.0, x, saw(x, o), bump(m)]
            })
            .collect();
        let y: Vec<f64> = mins.iter().map(|m| m.min_ms).collect();
        let Some(fit) = least_squares(&rows, &y) else {
            continue;
        };
        // The floor's extra cells must cost what a cell costs, and clearly more than nothing.
        let (e, e_se) = (fit.coef[3], fit.se[3].max(se).max(1e-6));
        let step = model.saw_ms;
        if e / e_se >= DECIDE && (e - step).abs() < step / 2.0 {
            match best {
                Some((_, z)) if z >= e / e_se => {}
                _ => best = Some((floor, e / e_se)),
            }
        }
    }
    best.map(|(floor, _)| floor)
}

#[cfg(test)]
mod tests;
