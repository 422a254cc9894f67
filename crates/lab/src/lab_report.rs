//! What a lab run produced, as `lab.json` holds it and `unbloat-lab run` prints it: the
//! calibration, each strategy's run and the notes. Apart from the run itself (`crate::lab`), so
//! that the report directory's writer (`crate::report_dir`) reads it without reaching back.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{io, LabError};
use crate::profile::LinkProfile;
use crate::table::{self, Row};

/// What the calibration found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub down_bps: Option<f64>,
    pub up_bps: Option<f64>,
    pub down_share: Option<f64>,
    pub up_share: Option<f64>,
    /// False: the emulation could not carry the link's rate; the comparison is CPU-bound.
    pub ok: bool,
}

/// One strategy's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyRun {
    pub row: Row,
    /// The commands applied on the router, as shell lines.
    pub commands: Vec<String>,
    /// The results file, relative to the report directory.
    pub results_file: String,
    /// `unbloat-tuned`: what tune found, beside the profile's truth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<crate::tune_lab::TuneRow>,
    /// `unbloat-autorate`, `cake-autorate`: the controller's bounds and what it cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<crate::autorate_lab::ControllerRun>,
    /// A variable link: how far the trace had played when the test started, seconds (the test's
    /// time plus this is the trace's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_offset_s: Option<f64>,
}

/// Everything a lab run produced; also written as `lab.json` in the report directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabReport {
    pub profile: LinkProfile,
    pub test: String,
    pub duration_s: f64,
    /// `host` or `User-Mode Linux 6.1...`.
    pub kernel: String,
    pub calibration: Calibration,
    pub runs: Vec<StrategyRun>,
    pub out_dir: PathBuf,
    /// Things the reader must know (CPU-bound runs, partial tests).
    pub notes: Vec<String>,
}

impl LabReport {
    /// Why this run measured the machine rather than the link, or `None` when it did not: the
    /// unshaped calibration fell short, or a strategy's load had a second under
    /// [`crate::cpu::IDLE_MIN`] idle.
    pub fn machine_bound(&self) -> Option<String> {
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.0} %", v * 100.0));
        if !self.calibration.ok {
            return Some(format!(
                "the unshaped link carried only {} down and {} up of its theoretical goodput",
                pct(self.calibration.down_share),
                pct(self.calibration.up_share)
            ));
        }
        let bound: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.row.cpu_bound())
            .map(|r| {
                format!(
                    "{} (busiest second {} busy)",
                    r.row.strategy,
                    pct(r.row.cpu_peak_busy)
                )
            })
            .collect();
        (!bound.is_empty()).then(|| format!("CPU-bound during the load of {}", bound.join(", ")))
    }

    /// A report as `lab.json` holds it; `what` says whose, in the error.
    pub fn read(path: &Path, what: &'static str) -> Result<LabReport, LabError> {
        let text = std::fs::read_to_string(path).map_err(io(what, path))?;
        serde_json::from_str(&text).map_err(|e| LabError::Results {
            strategy: "lab.json".into(),
            detail: format!("{}: {e}", path.display()),
        })
    }

    /// The report a finished run left in `dir` (its `lab.json`), if there is one: what the
    /// benchmarks' `--resume` keeps instead of running the lab again.
    pub fn finished(dir: &Path) -> Result<Option<LabReport>, LabError> {
        let path = dir.join("lab.json");
        if !path.is_file() {
            return Ok(None);
        }
        LabReport::read(&path, "cannot read").map(Some)
    }

    pub fn rows(&self) -> Vec<Row> {
        self.runs.iter().map(|r| r.row.clone()).collect()
    }

    /// The heading, notes and table, as `unbloat-lab run` prints them.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "unbloat lab: {}\ntest {} with {:.0} s of load; kernel: {}\n{}\n",
            self.profile,
            self.test,
            self.duration_s,
            self.kernel,
            calibration_line(&self.calibration)
        );
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out.push('\n');
        out.push_str(&table::render_text(&self.rows()));
        out.push_str(&format!(
            "report: {}\n",
            self.out_dir.join("index.html").display()
        ));
        out
    }
}

pub(crate) fn calibration_line(c: &Calibration) -> String {
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0} %", v * 100.0));
    format!(
        "calibration (unshaped, one direction at a time): down {}, up {} of the theoretical TCP goodput: {}",
        pct(c.down_share),
        pct(c.up_share),
        if c.ok { "the emulation keeps up" } else { "CPU-BOUND, the numbers below understate the link" }
    )
}
