//! The line's goodput from an unshaped test: what the capacity phase converts to the line's rate.
//!
//! The summary's steady goodput counts the bytes the application received from the load's third
//! second on. That is the line's rate on most links, but not behind a modem queue of seconds: there
//! the slow start's losses fill that queue about when the steady state begins, and while the lost
//! packets wait seconds for their retransmissions the receiver holds everything after them. The
//! application then sees nothing at all for a second or more (a *stall*: no stream delivers), and
//! then all of it at once. Those bytes crossed the line during the stall, before the window,
//! so the window counted more than the line carries: 927 to 1,093 kbit/s on the lab's 1 Mbit/s
//! ATM line, whose TCP goodput is at most 830 (issue 55).
//!
//! So a window that a stall precedes starts where the stall began: what the stall held back is then
//! inside the window with the time the line took to carry it.

use unbloat_report::model::{Direction, Phase, Results, STARTUP_S};

/// A stall: consecutive loaded intervals whose total is under this share of the steady reading.
const STALL_SHARE: f64 = 0.1;
/// The shortest stall, in seconds: longer than a sampling hiccup, shorter than a retransmission
/// behind a queue of seconds.
const STALL_S: f64 = 0.6;

/// The direction's goodput in bit/s as the line carried it: the mean total of the intervals from
/// the steady state's start, or from the first stall's start when one began before it. `None`
/// without streams in that direction or without a loaded interval.
pub fn line_goodput(results: &Results, down: bool) -> Option<f64> {
    let direction = if down { Direction::Down } else { Direction::Up };
    let phases = &results.phases;
    let interval_s = f64::from(results.metadata.sample_interval_ms.max(1)) / 1000.0;
    // (start of the interval, total bit/s) over the load; the streams share sample instants.
    let mut totals: Vec<(f64, f64)> = vec![];
    for stream in results.streams.iter().filter(|s| s.direction == direction) {
        for (k, sample) in stream.samples.iter().enumerate() {
            match totals.get_mut(k) {
                Some(total) => total.1 += sample.bps,
                None => totals.push((sample.t - interval_s, sample.bps)),
            }
        }
    }
    let mid = |start: f64| start + interval_s / 2.0;
    totals.retain(|&(start, _)| phases.phase_of(mid(start)) == Phase::Loaded);
    let steady_from = phases.load_start() + STARTUP_S;
    let steady = mean_from(&totals, steady_from, interval_s)?;
    let from = first_stall(&totals, steady * STALL_SHARE, interval_s)
        .map_or(steady_from, |stall| stall.min(steady_from));
    mean_from(&totals, from, interval_s)
}

/// The mean of the intervals whose middle is at or after `from`.
fn mean_from(totals: &[(f64, f64)], from: f64, interval_s: f64) -> Option<f64> {
    let kept: Vec<f64> = totals
        .iter()
        .filter(|&&(start, _)| start + interval_s / 2.0 >= from)
        .map(|&(_, bps)| bps)
        .collect();
    (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Where the first run of intervals under `floor` lasting [`STALL_S`] began, once the direction
/// had delivered: the quiet before the first bytes (a handshake over a far path) is no stall.
fn first_stall(totals: &[(f64, f64)], floor: f64, interval_s: f64) -> Option<f64> {
    let mut began: Option<f64> = None;
    let mut delivered = false;
    for &(start, bps) in totals {
        if bps >= floor {
            (delivered, began) = (true, None);
            continue;
        }
        if !delivered {
            continue;
        }
        let b = *began.get_or_insert(start);
        if start + interval_s - b >= STALL_S - 1e-9 {
            return Some(b);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_report::model::{Phases, StreamSeries, ThroughputSample};
    use unbloat_report::summary::Summary;

    /// The lab's measured download (run 1 of `bench lab --profiles adsl-remote`).
    fn adsl_remote() -> Results {
        let text = include_str!("capacity/adsl-remote-download.txt");
        let rows: Vec<Vec<f64>> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect())
            .collect();
        let streams = (1..rows[0].len())
            .map(|i| stream(rows.iter().map(|r| (r[0], r[i])).collect()))
            .collect();
        with(
            Phases {
                idle_before_s: 3.0,
                load_s: 6.0,
                idle_after_s: 3.0,
            },
            streams,
        )
    }

    fn stream(samples: Vec<(f64, f64)>) -> StreamSeries {
        StreamSeries {
            name: "TCP download".into(),
            direction: Direction::Down,
            dscp: 0,
            samples: samples
                .into_iter()
                .map(|(t, bps)| ThroughputSample { t, bps })
                .collect(),
            total_bytes: 0,
        }
    }

    fn with(phases: Phases, streams: Vec<StreamSeries>) -> Results {
        let mut r = unbloat_report::synthetic::rrul(0);
        r.phases = phases;
        r.metadata.sample_interval_ms = 200;
        r.streams = streams;
        r
    }

    #[test]
    fn a_stall_before_the_steady_state_moves_the_window_back_to_it() {
        let r = adsl_remote();
        let steady = Summary::from_results(&r)
            .download
            .steady_goodput_bps
            .unwrap();
        let line = line_goodput(&r, true).unwrap();
        // The summary's window starts just after the 1.2 s stall and counts its release:
        // more than the 830 kbit/s TCP carries over 1 Mbit/s of ATM with 40 bytes.
        assert!(steady > 950e3, "steady {steady}");
        assert!((650e3..830e3).contains(&line), "line {line}");
        assert_eq!(line_goodput(&r, false), None, "no upload streams");
    }

    /// An 8 s load after 1 s of idle, 200 ms samples of `bps(t)` (t: an interval's end); asserts
    /// the line's goodput is the summary's steady goodput.
    fn same_as_steady(bps: impl Fn(f64) -> f64) {
        let phases = Phases {
            idle_before_s: 1.0,
            load_s: 8.0,
            idle_after_s: 1.0,
        };
        let samples = (1..=50)
            .map(|k| k as f64 * 0.2)
            .map(|t| (t, bps(t)))
            .collect();
        let r = with(phases, vec![stream(samples)]);
        let steady = Summary::from_results(&r)
            .download
            .steady_goodput_bps
            .unwrap();
        assert_eq!(line_goodput(&r, true), Some(steady));
    }

    #[test]
    fn without_a_stall_it_is_the_steady_goodput() {
        // A far end that answers after 0.8 s, a slow start, then 20 Mbit/s with the usual ripple
        // (one interval at 30 %).
        same_as_steady(|t| match t {
            t if t <= 1.8 || t > 9.0 => 0.0,
            t if t <= 2.4 => 5e6,
            t if (t - 5.0).abs() < 1e-9 => 6e6,
            _ => 20e6,
        });
    }

    #[test]
    fn a_stall_inside_the_steady_state_changes_nothing() {
        same_as_steady(|t| {
            let stalled = t > 6.0 && t <= 7.0;
            let on = t > 1.0 && t <= 9.0;
            if on && !stalled {
                10e6
            } else {
                0.0
            }
        });
    }
}
