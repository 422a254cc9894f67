//! The framing phase: the size sweep against the far end's host, its analysis, and what it means
//! for the shaper's link options.
//!
//! Only ATM can be read from round trips (its cells make a staircase whose steps fall where the
//! per-packet overhead puts them). A straight line says "not ATM" and nothing about the overhead,
//! which adds the same bytes to every size: then the user's link options stand (`--link`,
//! `--overhead`, or unbloat's default Ethernet compensation, 38 bytes and mpu 84, which
//! overestimates a few bytes on PTM and DOCSIS links rather than under).

use serde::{Deserialize, Serialize};
use unbloat_measure::client::TestPlan;
use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::options::ShapeOptions;

use crate::interrupt::Stop;
use crate::TuneError;

/// What the sweep found, in the terms the run and the report need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FramingFound {
    /// `atm`, `straight` (PTM, DOCSIS, Ethernet) or `undecided`.
    pub family: String,
    /// ATM only: bytes over the IP packet.
    pub overhead: Option<i64>,
    pub mpu: Option<i64>,
    /// 0..1.
    pub confidence: f64,
    /// One line for people.
    pub reason: String,
    /// The analysis itself, for the report's plot.
    pub detail: serde_json::Value,
}

/// The link options to shape with: ATM's found overhead, else the user's.
pub fn link_options(found: &FramingFound, user: &ShapeOptions) -> ShapeOptions {
    match (found.family.as_str(), found.overhead) {
        ("atm", Some(overhead)) if user.link.is_none() && user.overhead.is_none() => ShapeOptions {
            framing: Some(Framing::Atm),
            overhead: Some(overhead),
            mpu: Some(found.mpu.unwrap_or(0)),
            ..user.clone()
        },
        _ => user.clone(),
    }
}

/// Runs the sweep towards the test's probe target and analyses it.
pub fn sweep(test: &TestPlan, stop: &Stop) -> Result<FramingFound, TuneError> {
    stop.check()?;
    let _ = test;
    Err(TuneError::Invalid(
        "the framing sweep is not wired yet".into(),
    ))
}

/// The sweep's plot, when the analysis kept what it needs to draw one.
pub fn plot_svg(found: &FramingFound) -> Option<String> {
    found
        .detail
        .get("svg")
        .and_then(|v| v.as_str())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::linklayer::LinkPreset;

    fn found(family: &str, overhead: Option<i64>) -> FramingFound {
        FramingFound {
            family: family.into(),
            overhead,
            mpu: None,
            confidence: 0.9,
            reason: String::new(),
            detail: serde_json::Value::Null,
        }
    }

    #[test]
    fn atm_overrides_the_default_but_not_what_the_user_said() {
        let none = ShapeOptions::default();
        let o = link_options(&found("atm", Some(10)), &none);
        assert_eq!(
            (o.framing, o.overhead, o.mpu),
            (Some(Framing::Atm), Some(10), Some(0))
        );
        let user = ShapeOptions {
            link: Some(LinkPreset::PppoeLlcsnap),
            ..Default::default()
        };
        assert_eq!(link_options(&found("atm", Some(10)), &user), user);
        assert_eq!(link_options(&found("straight", None), &none), none);
    }
}
