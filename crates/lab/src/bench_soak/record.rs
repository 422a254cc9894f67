//! What autorate did during a soak, read from the daemon's own records: the decision logs of its
//! `[autorate.wan0]` table (`unbloat_autorate::log`'s format: a start line each time a
//! controller begins a run, then a tick line every 0.2 s), and the download rate its metrics
//! showed at each scrape (`unbloat_shaper_rate_bytes_per_second`: cake's bandwidth as tc reads
//! it, so the kernel's rate, not the controller's word for it).
//!
//! Pure: text in, counts out. The daemon's metrics have no autorate series of their own; the
//! logs are its record of every decision, and the metrics' rate is the check that the
//! decisions reached the qdisc.

use serde::{Deserialize, Serialize};
use unbloat_autorate::log::TickLine;
use unbloat_units::Rate;

/// The moves of a tick line (`unbloat_autorate::direction::Move::name`) counted apart.
const BLOAT: &str = "bloat";
const STALLED: &str = "stalled";

/// What a controller's logs show, summed over every log of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Decisions {
    /// Runs begun (start lines): the daemon's start, each reload (its tables start again), and
    /// each time the controller opened wan0 again after losing it.
    pub runs: u64,
    pub ticks: u64,
    /// Ticks that set other rates than the tick before, or than the run's base rates for its
    /// first tick: what `unbloat autorate` counts as its rate changes.
    pub rate_changes: u64,
    /// Ticks that cut a rate for bloat (delays over the threshold).
    pub bloat_cuts: u64,
    /// Ticks that fell back to base for want of answers (the reflectors out of reach).
    pub stalled_ticks: u64,
    /// The lowest and highest rates the ticks set (none without ticks).
    pub down_lowest: Option<Rate>,
    pub down_highest: Option<Rate>,
    pub up_lowest: Option<Rate>,
    pub up_highest: Option<Rate>,
    /// Lines that were neither a tick nor an event: none from a daemon that ended cleanly.
    pub unreadable_lines: u64,
}

/// A line of a log that is not a tick: `{"event":"start",...}` and the like.
#[derive(Deserialize)]
struct Event {
    event: String,
    #[serde(default)]
    down: Option<Base>,
    #[serde(default)]
    up: Option<Base>,
}

/// A start line's bounds, of which the base is where the run begins.
#[derive(Deserialize)]
struct Base {
    base_bps: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Tick(TickLine),
    Event(Event),
}

impl Decisions {
    /// Adds one log's lines (each log is read whole: its rates carry from line to line).
    pub fn add_log(&mut self, text: &str) {
        let mut last: Option<(u64, u64)> = None;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Line>(line) {
                Ok(Line::Event(e)) if e.event == "start" => {
                    self.runs += 1;
                    last = e.down.zip(e.up).map(|(d, u)| (d.base_bps, u.base_bps));
                }
                Ok(Line::Event(_)) => {}
                Ok(Line::Tick(t)) => {
                    let rates = (t.down.rate_bps, t.up.rate_bps);
                    self.ticks += 1;
                    if last.is_some_and(|l| l != rates) {
                        self.rate_changes += 1;
                    }
                    last = Some(rates);
                    let moved = |m: &str| t.down.moved == m || t.up.moved == m;
                    self.bloat_cuts += u64::from(moved(BLOAT));
                    self.stalled_ticks += u64::from(moved(STALLED));
                    let (down, up) = (
                        Rate::from_bits_per_sec(rates.0),
                        Rate::from_bits_per_sec(rates.1),
                    );
                    widen(&mut self.down_lowest, &mut self.down_highest, down);
                    widen(&mut self.up_lowest, &mut self.up_highest, up);
                }
                Err(_) => self.unreadable_lines += 1,
            }
        }
    }
}

fn widen(lowest: &mut Option<Rate>, highest: &mut Option<Rate>, r: Rate) {
    *lowest = Some(lowest.map_or(r, |l| l.min(r)));
    *highest = Some(highest.map_or(r, |h| h.max(r)));
}

/// The download rate `iface`'s cake had at a scrape, from the metrics' text.
pub fn scraped_down_rate(metrics: &str, iface: &str) -> Option<Rate> {
    let labels = [
        format!("iface=\"{iface}\""),
        "direction=\"down\"".to_string(),
    ];
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix("unbloat_shaper_rate_bytes_per_second{")?;
        let (inside, value) = rest.split_once("} ")?;
        if !labels
            .iter()
            .all(|want| inside.split(',').any(|have| have == want))
        {
            return None;
        }
        let bytes: f64 = value.trim().parse().ok()?;
        Some(Rate::from_bits_per_sec((bytes * 8.0).round() as u64))
    })
}

/// The download rates seen at the scrapes, against the base the config gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Scraped {
    /// Scrapes that showed the download's rate.
    pub scrapes: u64,
    /// Of those, scrapes whose rate was not the base: autorate had moved it.
    pub off_base: u64,
    pub lowest: Option<Rate>,
    pub highest: Option<Rate>,
}

impl Scraped {
    pub fn add(&mut self, rate: Rate, base: Rate) {
        self.scrapes += 1;
        self.off_base += u64::from(rate != base);
        widen(&mut self.lowest, &mut self.highest, rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(down: u64, up: u64, moved: &str) -> String {
        format!(
            r#"{{"t":1.0,"down":{{"rate_bps":{down},"achieved_bps":0,"delta_ms":0.5,"move":"{moved}"}},"up":{{"rate_bps":{up},"achieved_bps":0,"delta_ms":0.1,"move":"hold"}}}}"#
        )
    }

    fn start(down: u64, up: u64) -> String {
        format!(
            r#"{{"event":"start","iface":"wan0","probe":"auto","reflectors":["10.53.7.10"],"pingers":6,"threshold_ms":20.0,"down":{{"min_bps":1,"base_bps":{down},"max_bps":99000000}},"up":{{"min_bps":1,"base_bps":{up},"max_bps":99000000}}}}"#
        )
    }

    /// A run's first tick is a change only when it moved off the base; a restart begins at the
    /// base again, so the same rate after it is no change either.
    #[test]
    fn changes_are_counted_from_the_base_of_each_run() {
        let log = [
            start(2_600_000, 5_000_000),
            tick(2_600_000, 5_000_000, "hold"),
            tick(2_704_000, 5_000_000, "up"),
            tick(2_028_000, 5_000_000, BLOAT),
            tick(2_028_000, 5_000_000, "hold"),
            start(2_600_000, 5_000_000),
            tick(2_600_000, 5_000_000, STALLED),
            tick(2_574_000, 5_000_000, "decay"),
        ]
        .join("\n");
        let mut d = Decisions::default();
        d.add_log(&log);
        assert_eq!((d.runs, d.ticks, d.rate_changes), (2, 6, 3));
        assert_eq!(
            (d.bloat_cuts, d.stalled_ticks, d.unreadable_lines),
            (1, 1, 0)
        );
        assert_eq!(d.down_lowest, Some(Rate::from_kbit(2028)));
        assert_eq!(d.down_highest, Some(Rate::from_kbit(2704)));
        assert_eq!(d.up_lowest, d.up_highest);
        // A second log adds up; a torn line is counted, not fatal.
        d.add_log(&format!(
            "{}\n{{\"t\":3.0,\"do",
            start(2_600_000, 6_000_000)
        ));
        assert_eq!((d.runs, d.unreadable_lines), (3, 1));
    }

    #[test]
    fn the_download_rate_is_read_from_the_metrics() {
        let text = "# HELP unbloat_shaper_rate_bytes_per_second The rate...\n\
            # TYPE unbloat_shaper_rate_bytes_per_second gauge\n\
            unbloat_shaper_rate_bytes_per_second{iface=\"wan0\",direction=\"up\",qdisc=\"cake\"} 625000\n\
            unbloat_shaper_rate_bytes_per_second{iface=\"wan0\",direction=\"down\",qdisc=\"cake\"} 325500.125\n";
        assert_eq!(
            scraped_down_rate(text, "wan0"),
            Some(Rate::from_bits_per_sec(2_604_001))
        );
        assert_eq!(scraped_down_rate(text, "wan1"), None);
        let mut s = Scraped::default();
        s.add(Rate::from_kbit(2600), Rate::from_kbit(2600));
        s.add(Rate::from_kbit(2028), Rate::from_kbit(2600));
        assert_eq!((s.scrapes, s.off_base), (2, 1));
        assert_eq!(s.lowest, Some(Rate::from_kbit(2028)));
    }
}
