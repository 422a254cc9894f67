//! What a run says as it goes, in words: every swap of reflectors, stall and recovery, idle and
//! busy, and a line every 10 s with the rates, what the link carried and the delay. `unbloat
//! autorate` prints the lines on stderr; the daemon logs the events to the journal.

use crate::controller::{DirTick, Tick};
use crate::direction::Move;

#[derive(Debug)]
pub struct Narrator {
    stalled: bool,
    last_line: f64,
    /// Seconds between the lines with the rates; infinite: none.
    every: f64,
}

impl Default for Narrator {
    fn default() -> Narrator {
        Narrator {
            stalled: false,
            last_line: 0.0,
            every: 10.0,
        }
    }
}

impl Narrator {
    /// Events only, without the line every 10 s (for a log that runs for months).
    pub fn events_only() -> Narrator {
        Narrator {
            every: f64::INFINITY,
            ..Narrator::default()
        }
    }

    /// The lines `t` calls for, each starting with the run's time.
    pub fn tick(&mut self, t: &Tick) -> Vec<String> {
        let mut out = vec![];
        for r in &t.replaced {
            out.push(format!(
                "{:.1}s: reflector {} replaced by {} ({})",
                t.t, r.out, r.replacement, r.why
            ));
        }
        if t.stalled() && !self.stalled {
            out.push(format!(
                "{:.1}s: no reflector answered for 2 s: back to the base rates until one does",
                t.t
            ));
        } else if !t.stalled() && self.stalled {
            out.push(format!("{:.1}s: reflectors answer again", t.t));
        }
        self.stalled = t.stalled();
        match t.idle {
            Some(true) => out.push(format!(
                "{:.1}s: link idle for 30 s: probing every 2 s",
                t.t
            )),
            Some(false) => out.push(format!("{:.1}s: link busy: probing every 0.3 s", t.t)),
            None => {}
        }
        if t.t - self.last_line >= self.every {
            self.last_line = t.t;
            out.push(format!(
                "{:.0}s: down {}, up {}",
                t.t,
                direction(&t.down),
                direction(&t.up)
            ));
        }
        out
    }
}

fn direction(x: &DirTick) -> String {
    format!(
        "{} (carried {}, delay +{:.1} ms{})",
        x.rate,
        x.achieved,
        x.delta_ms,
        if matches!(x.moved, Move::Bloat { .. }) {
            ", cut"
        } else {
            ""
        }
    )
}
