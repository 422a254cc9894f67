//! The decision log (`unbloat autorate --log FILE`): one JSON object per line, and its plot.
//!
//! Lines, in order: `{"event":"start",...}` with the settings; one line per tick
//! ([`crate::controller::Tick`]: `t`, then `down` and `up` each with `rate_bps`, `achieved_bps`,
//! `delta_ms` and `move`, plus `replaced` and `idle` when they happened); `{"event":"stop",...}`
//! with the run's summary. JSON lines, like cake-autorate's log, so that `jq` and a spreadsheet
//! read it; [`plot`] draws rates, achieved rates and delays over time, as its plotting tools do.

use serde::Deserialize;

// The router's small build has no plots (feature `plots`); a full build draws its logs.
#[cfg(feature = "plots")]
mod plot;
#[cfg(feature = "plots")]
pub use plot::plot;

/// One direction of a tick line, as read back.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DirLine {
    pub rate_bps: u64,
    pub achieved_bps: u64,
    pub delta_ms: f64,
    #[serde(rename = "move")]
    pub moved: String,
}

/// A tick line, as read back.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TickLine {
    pub t: f64,
    pub down: DirLine,
    pub up: DirLine,
}

/// Opens the log at `path` for writing, emptied, mode 0644 when new. Root writes it wherever
/// the command line or the config says, so through `unbloat_safefs`: a symbolic link at `path`
/// (one planted in /tmp, say, at /etc/shadow) is refused rather than followed, and only a
/// regular file is opened, never a FIFO that would block the controller or a device.
pub fn create(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    unbloat_safefs::create(path, 0o644)
}

/// The log's first line: the interface and the settings of the run.
pub fn start_event(iface: &str, cfg: &crate::controller::Config) -> serde_json::Value {
    let bounds = |b: &crate::direction::Bounds| serde_json::json!({"min_bps": b.min.bits_per_sec(), "base_bps": b.base.bits_per_sec(), "max_bps": b.max.bits_per_sec()});
    serde_json::json!({
        "event": "start", "iface": iface, "probe": cfg.probe, "reflectors": cfg.reflectors,
        "pingers": cfg.active, "threshold_ms": cfg.settings.delay_threshold_ms,
        "down": bounds(&cfg.down), "up": bounds(&cfg.up),
    })
}

/// The tick lines of a log; other lines (start, stop, events) are skipped. A line that is not
/// JSON is an error naming it.
pub fn read_ticks(text: &str) -> Result<Vec<TickLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if v.get("down").is_some() && v.get("t").is_some() {
            out.push(serde_json::from_value(v).map_err(|e| format!("line {}: {e}", i + 1))?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36 item 10: root writes the log where it is told; a link planted at that path
    /// must not make it empty another file.
    #[test]
    fn a_log_at_a_symlink_is_refused_and_the_links_target_is_untouched() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"))
            .join(format!("autorate-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (target, link) = (dir.join("precious"), dir.join("autorate.log"));
        std::fs::write(&target, "precious\n").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let opened = create(&link);
        let kept = std::fs::read_to_string(&target).unwrap();
        let plain = create(&dir.join("plain.log")).map(|_| ());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(opened.is_err(), "a log was opened through a symbolic link");
        assert_eq!(kept, "precious\n");
        assert!(plain.is_ok(), "{plain:?}");
    }

    #[cfg(feature = "plots")]
    #[test]
    fn tick_lines_read_back_and_plot_with_their_cuts() {
        use crate::controller::{DirTick, Tick};
        use crate::direction::Move;
        use unbloat_units::Rate;
        let dir = |r, m| DirTick {
            rate: Rate::from_mbit(r),
            achieved: Rate::from_mbit(r - 1),
            delta_ms: 3.0,
            moved: m,
        };
        let ticks: Vec<String> = (0..5)
            .map(|i| {
                let m = if i == 3 {
                    Move::Bloat {
                        achieved: Rate::from_mbit(9),
                    }
                } else {
                    Move::Up
                };
                let t = Tick {
                    t: i as f64 * 0.2,
                    down: dir(10 + i, m),
                    up: dir(5, Move::Hold),
                    replaced: vec![],
                    idle: None,
                };
                serde_json::to_string(&t).unwrap()
            })
            .collect();
        let text = format!(
            "{{\"event\":\"start\"}}\n{}\n{{\"event\":\"stop\"}}\n",
            ticks.join("\n")
        );
        let read = read_ticks(&text).unwrap();
        assert_eq!(read.len(), 5);
        assert_eq!(
            read[3].down,
            DirLine {
                rate_bps: 13_000_000,
                achieved_bps: 12_000_000,
                delta_ms: 3.0,
                moved: "bloat".into()
            }
        );
        let svg = plot("test", &read);
        assert!(svg.contains("data-series=\"rate\"") && svg.contains("data-series=\"delta-up\""));
        assert_eq!(svg.matches("<circle").count(), 1, "one cut for bloat");
        assert!(read_ticks("{\"t\":1,\"down\":\n")
            .unwrap_err()
            .starts_with("line 1"));
    }
}
