//! A lab run's report directory: `index.html` (see [`crate::page`]), `compare.svg` (the
//! comparison the page opens with, which docs/img/before-after.svg is a copy of), `table.txt`
//! and `lab.json`, beside the strategies' own directories.

use std::path::{Path, PathBuf};

use crate::error::{io, LabError};
use crate::lab_report::{calibration_line, LabReport};
use crate::page::{self, HtmlSection, Page};

/// Writes `index.html`, `compare.svg`, `table.txt` and `lab.json` into `out` (the tests already
/// wrote their results, flent files and plots into `out/<strategy>/`).
pub fn write(report: &LabReport, out: &Path) -> Result<(), LabError> {
    let mut sections = Vec::new();
    for run in &report.runs {
        let sub = run.row.strategy.dir_name();
        let dir = out.join(&sub);
        let mut plots = Vec::new();
        let mut files = Vec::new();
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(io("cannot list", &dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.ends_with(".svg") {
                let svg = std::fs::read_to_string(&path).map_err(io("cannot read", &path))?;
                plots.push((name.trim_end_matches(".svg").to_string(), svg));
            } else if name.ends_with(".json") || name.ends_with(".flent.gz") {
                files.push(format!("{sub}/{name}"));
            }
        }
        sections.push(HtmlSection {
            strategy: run.row.strategy.clone(),
            commands: &run.commands,
            plots,
            files,
        });
    }
    let mut notes = vec![
        report.profile.to_string(),
        calibration_line(&report.calibration),
    ];
    notes.extend(report.notes.iter().cloned());
    let title = format!(
        "unbloat lab: {} ({}, {:.0} s)",
        report.profile.name, report.test, report.duration_s
    );
    let compare = compare_svg(report, out)?;
    let text = report.render_text();
    let html = page::render_html(&Page {
        title: &title,
        notes: &notes,
        rows: &report.rows(),
        compare: Some(&compare),
        sections: &sections,
        table: &text,
    });
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(io("cannot write", &path))
    };
    write("compare.svg", &compare)?;
    write("index.html", &html)?;
    write("table.txt", &text)?;
    let json = serde_json::to_string_pretty(report).map_err(|e| LabError::Results {
        strategy: "lab.json".into(),
        detail: e.to_string(),
    })?;
    write("lab.json", &(json + "\n"))
}

/// The comparison plot of every strategy of `report` (flent's compare view), from their
/// results files in `out`: the picture the report opens with, and the README's.
pub fn compare_svg(report: &LabReport, out: &Path) -> Result<String, LabError> {
    let mut results = Vec::new();
    for run in &report.runs {
        let path = out.join(&run.results_file);
        let r = unbloat_report::files::read_results(&path).map_err(|e| LabError::Results {
            strategy: run.row.strategy.name(),
            detail: e.to_string(),
        })?;
        results.push((run.row.strategy.name(), r));
    }
    let runs: Vec<_> = results
        .iter()
        .map(|(label, results)| unbloat_report::plot::compare::Run { label, results })
        .collect();
    // Short enough to read on a phone, where the picture is 390 px wide.
    let p = &report.profile;
    let subtitle = format!(
        "unbloat-lab, {} ({} down, {} up): {}, {:.0} s of load, steady after {:.0} s",
        p.name,
        p.down,
        p.up,
        report.test,
        report.duration_s,
        unbloat_report::summary::STARTUP_S
    );
    Ok(unbloat_report::plot::compare::render(
        "Round trip under load, by strategy",
        &subtitle,
        &runs,
    ))
}
