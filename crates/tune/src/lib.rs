//! `unbloat tune`: find the rates and the framing of the user's own link by measuring it.
//!
//! The phases, each with its own module:
//! - [`framing`]: an RTT sweep over packet sizes tells ATM's 48-byte cell staircase (and so its
//!   per-packet overhead) from a straight line (PTM, DOCSIS, Ethernet). Pure analysis; the sweep
//!   itself is `unbloat_measure::sweep`, run by [`sweep_phase`].
//! - [`capacity`]: the unshaped goodput as the line carried it, from where a stall began when a
//!   deep queue's lost packets held the bytes back (what the searches start from).
//! - [`search`]: the rate search per direction, a pure state machine fed with each step's
//!   steady-state latency and goodput.
//! - [`both_ways`]: the pair of rates the searches found, checked with both directions loaded.
//! - [`slow_upload`]: the memory limit a slow upload's cake gets, from its measured line.
//! - [`run`]: the phases in order against the user's far end, shaping through a [`shaping::Shaping`]
//!   the caller provides; [`interrupt`] puts the old shaping back on Ctrl-C at any moment.
//! - [`output`]: the config file, the JSON and the HTML report with its plots.
//!
//! Dependencies go one way: tune uses shaper (plans), measure (tests) and report (summaries,
//! plots); the CLI uses tune, and the lab runs the `unbloat tune` binary.

pub mod both_ways;
pub mod capacity;
pub mod framing;
pub mod interrupt;
pub mod output;
pub mod run;
pub mod search;
pub mod shaping;
pub mod slow_upload;
pub mod sweep_phase;

use unbloat_measure::MeasureError;

/// Why a tune run ended early. Every variant leaves the shaping as it was before the run (see
/// [`run::run`]); `Ended` carries what putting it back did.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Measure(MeasureError),
    #[error("shaping failed: {0}")]
    Shaping(String),
    #[error("the unshaped {0} carried no goodput: the far end sent or took nothing")]
    NoGoodput(&'static str),
    #[error("interrupted")]
    Interrupted,
    #[error("{error}; {ending}")]
    Ended {
        error: Box<TuneError>,
        ending: String,
    },
}

impl TuneError {
    pub fn with_ending(self, ending: String) -> TuneError {
        TuneError::Ended {
            error: Box::new(self),
            ending,
        }
    }

    /// The error under the ending, for the exit status.
    pub fn cause(&self) -> &TuneError {
        match self {
            TuneError::Ended { error, .. } => error.cause(),
            e => e,
        }
    }

    /// Exit status by unbloat's convention: 2 invalid input, 3 the far end, 1 anything else.
    pub fn exit_code(&self) -> i32 {
        match self.cause() {
            TuneError::Invalid(_) => 2,
            TuneError::Measure(m) if m.is_far_end() => 3,
            TuneError::Measure(MeasureError::InvalidArgument(_)) => 2,
            TuneError::Measure(_) | TuneError::NoGoodput(_) => 3,
            TuneError::Interrupted => 130,
            _ => 1,
        }
    }
}
