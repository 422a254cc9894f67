//! `unbloat-lab bench household` (issue 40): the household of [`crate::household`] on each link
//! with each setup, runs interleaved (one of each in turn, so a slow spell of the host lands on
//! all of them), and the table of medians with the rank test against best effort.

use crate::hosts::{HostsError, Tools};
use crate::household::{self, Link, Outcome, Setup};
use crate::spread::{p_larger, Spread};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bench {
    pub runs: usize,
    pub load_s: u32,
    pub outcomes: Vec<Outcome>,
}

/// Every (run, link, setup), in that order; `progress` sees each outcome as it comes.
pub fn run(
    links: &[Link],
    setups: &[Setup],
    runs: usize,
    load_s: u32,
    tools: &Tools,
    progress: impl Fn(&Outcome),
) -> Result<Bench, HostsError> {
    let mut outcomes = vec![];
    for _ in 0..runs {
        for link in links {
            for &setup in setups {
                let o = household::run(link, setup, load_s, tools)?;
                progress(&o);
                outcomes.push(o);
            }
        }
    }
    Ok(Bench {
        runs,
        load_s,
        outcomes,
    })
}

/// One outcome as a progress line.
pub fn line(o: &Outcome) -> String {
    format!(
        "{} {:<15} game down p99 {:.1} ms, call down loss {:.1} % p99 {:.1} ms, web p50 {:.0} ms, bulk {:.2}/{:.2} Mbit/s",
        o.link,
        o.setup.name(),
        o.game.down.induced_p99_ms,
        o.call.down.loss * 100.0,
        o.call.down.induced_p99_ms,
        o.web.p50_ms,
        o.bulk_down_bps / 1e6,
        o.bulk_up_bps / 1e6
    )
}

type Pick = fn(&Outcome) -> f64;

/// The columns: (heading, value). Delays are induced, in the steady state.
const COLUMNS: [(&str, Pick); 13] = [
    ("game up p99", |o| o.game.up.induced_p99_ms),
    ("game dn p50", |o| o.game.down.induced_p50_ms),
    ("game dn p99", |o| o.game.down.induced_p99_ms),
    ("(peak)", |o| o.game.down.startup_peak_ms),
    ("jitter dn", |o| o.game.down.jitter_ms),
    ("call up p99", |o| o.call.up.induced_p99_ms),
    ("call dn p99", |o| o.call.down.induced_p99_ms),
    ("loss up %", |o| o.call.up.loss * 100.0),
    ("loss dn %", |o| o.call.down.loss * 100.0),
    ("web p50", |o| o.web.p50_ms),
    ("web fail %", |o| {
        o.web.failed as f64 * 100.0 / o.web.fetches.max(1) as f64
    }),
    ("bulk dn", |o| o.bulk_down_bps / 1e6),
    ("bulk up", |o| o.bulk_up_bps / 1e6),
];

fn column(heading: &str) -> Pick {
    COLUMNS
        .iter()
        .find(|(h, _)| *h == heading)
        .map_or(|_| f64::NAN, |(_, f)| *f)
}

fn spread(os: &[&Outcome], f: Pick) -> Option<Spread> {
    Spread::of(os.iter().map(|o| f(o)))
}

/// Medians of each setup per link, then how classification compares with best effort and with
/// sqm's layer_cake: the ratio of medians and the rank test's one-sided p.
pub fn render(b: &Bench) -> String {
    let mut out = String::new();
    let mut links: Vec<&str> = vec![];
    for o in &b.outcomes {
        if !links.contains(&o.link.as_str()) {
            links.push(&o.link);
        }
    }
    for link in links {
        let _ = writeln!(
            out,
            "\nlink {link} Mbit/s (shaped at 95 %): medians of {} runs, {} s of bulk (host b: 16 streams down, 4 up);\n\
             induced one-way delay in ms in the steady state (the load's first 3 s left out; the game's start-up peak in brackets), Mbit/s for bulk",
            b.runs, b.load_s
        );
        let _ = write!(out, "{:<15}", "setup");
        for (h, _) in COLUMNS {
            let _ = write!(out, " {h:>11}");
        }
        out.push('\n');
        let of = |s: Setup| -> Vec<&Outcome> {
            b.outcomes
                .iter()
                .filter(|o| o.link == link && o.setup == s)
                .collect()
        };
        for setup in Setup::ALL {
            let os = of(setup);
            if os.is_empty() {
                continue;
            }
            let _ = write!(out, "{:<15}", setup.name());
            for (_, f) in COLUMNS {
                match spread(&os, f) {
                    Some(s) => {
                        let _ = write!(out, " {:>11.1}", s.median);
                    }
                    None => {
                        let _ = write!(out, " {:>11}", "-");
                    }
                }
            }
            out.push('\n');
        }
        let classify = of(Setup::Classify);
        for other in [Setup::Besteffort, Setup::Diffserv4, Setup::SqmLayerCake] {
            let base = of(other);
            if classify.is_empty() || base.is_empty() {
                continue;
            }
            let _ = writeln!(out, "classify against {}:", other.name());
            for (name, heading) in [
                ("game down p99", "game dn p99"),
                ("game up p99", "game up p99"),
                ("call down p99", "call dn p99"),
                ("call down loss %", "loss dn %"),
                ("call up loss %", "loss up %"),
                ("web p50", "web p50"),
                ("bulk down", "bulk dn"),
                ("bulk up", "bulk up"),
            ] {
                let f = column(heading);
                let (Some(c), Some(o)) = (spread(&classify, f), spread(&base, f)) else {
                    continue;
                };
                let lower = p_larger(&o.values, &c.values);
                let higher = p_larger(&c.values, &o.values);
                let _ = writeln!(
                    out,
                    "  {name:<17} {:>8.2} against {:>8.2}{}   p(lower) {}  p(higher) {}",
                    c.median,
                    o.median,
                    if o.median != 0.0 {
                        format!("  ({:.2}x)", c.median / o.median)
                    } else {
                        String::new()
                    },
                    p_text(lower),
                    p_text(higher)
                );
            }
        }
    }
    out
}

fn p_text(p: Option<f64>) -> String {
    p.map_or("-".into(), |p| format!("{p:.3}"))
}
