//! Variable links (issue 16): a bottleneck rate that changes over time, as the lab's modem will
//! follow it. Read from mahimahi's packet-delivery traces (the real LTE traces in
//! `third_party/traces/`), or built from steps and ramps.
//!
//! mahimahi's format (its README): one line per opportunity for one 1500-byte packet to leave
//! the bottleneck, as the millisecond it happens; a millisecond with several opportunities
//! repeats. The trace repeats after its last timestamp. A rate needs a window to count over:
//! [`RateTrace::from_mahimahi`] counts the opportunities in each window of the given length
//! (100 ms gives 8 packets' granularity at 1 Mbit/s, and follows LTE's scheduling bursts
//! closely enough for a shaper that reacts in hundreds of milliseconds).
//!
//! Pure: text in, rates out. Playing a trace on the modem is the lab's.

use std::time::Duration;

use unbloat_units::Rate;

/// The bytes one mahimahi delivery opportunity carries.
pub const MAHIMAHI_PACKET_BYTES: u64 = 1500;
/// The longest trace read: a day of milliseconds, far beyond any test.
const MAX_MS: u64 = 86_400_000;

/// A rate per window, repeating from the start when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct RateTrace {
    pub window: Duration,
    pub rates: Vec<Rate>,
}

/// The traces of a run: the downlink (the modem's `cpe0`) and the uplink (`isp0`); a direction
/// without one keeps the profile's fixed rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traces {
    pub down: Option<RateTrace>,
    pub up: Option<RateTrace>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {text:?} is not a millisecond timestamp")]
    NotANumber { line: usize, text: String },
    #[error("line {line}: {ms} ms comes before the line above it ({before} ms)")]
    Backwards { line: usize, ms: u64, before: u64 },
    #[error("line {line}: {ms} ms is past a day; a trace that long is not a link")]
    TooLong { line: usize, ms: u64 },
    #[error("no delivery opportunities: the link would carry nothing")]
    Empty,
    #[error("the window must be 1 ms to 10 s, not {0:?}")]
    Window(Duration),
}

impl RateTrace {
    /// Counts `text`'s delivery opportunities per `window`. Blank lines and `#` comments are
    /// skipped (mahimahi itself has none, hand-written traces may).
    pub fn from_mahimahi(text: &str, window: Duration) -> Result<RateTrace, TraceError> {
        let window_ms = window.as_millis() as u64;
        if !(1..=10_000).contains(&window_ms) || !window.subsec_micros().is_multiple_of(1000) {
            return Err(TraceError::Window(window));
        }
        let mut stamps = Vec::new();
        let mut last = 0;
        for (i, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let line = i + 1;
            let ms: u64 = t.parse().map_err(|_| TraceError::NotANumber {
                line,
                text: t.to_string(),
            })?;
            if ms < last {
                return Err(TraceError::Backwards {
                    line,
                    ms,
                    before: last,
                });
            }
            if ms > MAX_MS {
                return Err(TraceError::TooLong { line, ms });
            }
            last = ms;
            stamps.push(ms);
        }
        if stamps.is_empty() {
            return Err(TraceError::Empty);
        }
        // mm-link repeats the trace after its last timestamp: the period is that last
        // millisecond, and at least one (a file holding only "0" or "1" is one packet per ms).
        let period = last.max(1);
        let windows = period.div_ceil(window_ms) as usize;
        let mut counts = vec![0u64; windows];
        for ms in stamps {
            // A stamp at the period's end is the first millisecond of the next round.
            let ms = if ms == period { 0 } else { ms };
            counts[(ms / window_ms) as usize] += 1;
        }
        let rates = counts
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                // The last window may be cut short by the period.
                let len = window_ms.min(period - i as u64 * window_ms);
                Rate::from_bits_per_sec(n * MAHIMAHI_PACKET_BYTES * 8 * 1000 / len)
            })
            .collect();
        Ok(RateTrace { window, rates })
    }

    /// Constant rates, each for its duration (rounded to whole windows).
    pub fn steps(window: Duration, steps: &[(Rate, Duration)]) -> RateTrace {
        let mut rates = vec![];
        for &(rate, d) in steps {
            let n = (d.as_millis() / window.as_millis().max(1)).max(1) as usize;
            rates.extend(std::iter::repeat_n(rate, n));
        }
        RateTrace { window, rates }
    }

    /// From `from` to `to` in a straight line over `over`, one rate per window.
    pub fn ramp(window: Duration, from: Rate, to: Rate, over: Duration) -> RateTrace {
        let n = (over.as_millis() / window.as_millis().max(1)).max(1) as i128;
        let (a, b) = (from.bits_per_sec() as i128, to.bits_per_sec() as i128);
        let rates = (0..n)
            .map(|i| Rate::from_bits_per_sec((a + (b - a) * i / (n - 1).max(1)) as u64))
            .collect();
        RateTrace { window, rates }
    }

    /// The same link over windows of `over` (a whole number of windows, at least one), each the
    /// mean of the windows it covers: a shaper's view, which moves in seconds, not in LTE's
    /// scheduling bursts.
    pub fn coarsen(&self, over: Duration) -> RateTrace {
        let k = (over.as_nanos() / self.window.as_nanos().max(1)).max(1) as usize;
        let rates = self
            .rates
            .chunks(k)
            .map(|c| {
                let sum: u128 = c.iter().map(|r| u128::from(r.bits_per_sec())).sum();
                Rate::from_bits_per_sec((sum / c.len() as u128) as u64)
            })
            .collect();
        RateTrace {
            window: self.window * k as u32,
            rates,
        }
    }

    /// How long the trace runs before it repeats.
    pub fn period(&self) -> Duration {
        self.window * self.rates.len() as u32
    }

    /// The rate at `t` since the start (the trace repeats).
    pub fn at(&self, t: Duration) -> Rate {
        let i = (t.as_nanos() / self.window.as_nanos().max(1)) as usize % self.rates.len();
        self.rates[i]
    }

    /// The mean rate: what the link carries on average.
    pub fn mean(&self) -> Rate {
        let sum: u128 = self
            .rates
            .iter()
            .map(|r| u128::from(r.bits_per_sec()))
            .sum();
        Rate::from_bits_per_sec((sum / self.rates.len().max(1) as u128) as u64)
    }

    /// The rate at or below which `p` percent of the windows lie (nearest rank): the fixed rate
    /// a shaper must stay under to keep the queue empty that share of the time.
    pub fn percentile(&self, p: f64) -> Rate {
        let mut sorted = self.rates.clone();
        sorted.sort();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS100: Duration = Duration::from_millis(100);

    #[test]
    fn opportunities_per_window_become_rates() {
        // Every ms of the first 100 (12 Mbit/s), then every other ms up to 200 (6 Mbit/s). The
        // trace repeats after 200 ms: the stamp at 200 is the next round's first millisecond,
        // as in mm-link, so the first window holds 1..99 and 200.
        let mut text = String::new();
        for ms in 1..=100 {
            text += &format!("{ms}\n");
        }
        for ms in (102..=200).step_by(2) {
            text += &format!("{ms}\n");
        }
        let t = RateTrace::from_mahimahi(&text, MS100).unwrap();
        assert_eq!(t.rates, vec![Rate::from_mbit(12), Rate::from_mbit(6)]);
        assert_eq!(t.period(), Duration::from_millis(200));
        assert_eq!(t.at(Duration::from_millis(150)), Rate::from_mbit(6));
        // It repeats: 250 ms is 50 ms into the second round.
        assert_eq!(t.at(Duration::from_millis(250)), Rate::from_mbit(12));
        assert_eq!(t.mean(), Rate::from_mbit(9));
    }

    #[test]
    fn repeated_milliseconds_are_several_packets_and_a_single_stamp_is_a_fixed_link() {
        // README.mahimahi: a file holding "1" is one packet per millisecond, 12 Mbit/s.
        let t = RateTrace::from_mahimahi("1\n", Duration::from_millis(1)).unwrap();
        assert_eq!(t.rates, vec![Rate::from_mbit(12)]);
        let t = RateTrace::from_mahimahi("1\n1\n", Duration::from_millis(1)).unwrap();
        assert_eq!(t.rates, vec![Rate::from_mbit(24)]);
    }

    #[test]
    fn bad_traces_say_where() {
        let w = MS100;
        assert_eq!(
            RateTrace::from_mahimahi("5\n3\n", w),
            Err(TraceError::Backwards {
                line: 2,
                ms: 3,
                before: 5
            })
        );
        assert!(matches!(
            RateTrace::from_mahimahi("1\n2x\n", w),
            Err(TraceError::NotANumber { line: 2, .. })
        ));
        assert_eq!(
            RateTrace::from_mahimahi("# nothing\n\n", w),
            Err(TraceError::Empty)
        );
        assert!(RateTrace::from_mahimahi("1\n", Duration::ZERO).is_err());
        assert!(RateTrace::from_mahimahi("1\n", Duration::from_micros(1500)).is_err());
    }

    #[test]
    fn steps_and_ramps_have_one_rate_per_window() {
        let s = RateTrace::steps(
            MS100,
            &[
                (Rate::from_mbit(20), Duration::from_secs(1)),
                (Rate::from_mbit(10), Duration::from_millis(500)),
            ],
        );
        assert_eq!(s.rates.len(), 15);
        assert_eq!(s.at(Duration::from_millis(1_050)), Rate::from_mbit(10));
        assert_eq!(s.percentile(10.0), Rate::from_mbit(10));
        assert_eq!(s.percentile(50.0), Rate::from_mbit(20));
        let r = RateTrace::ramp(
            MS100,
            Rate::from_mbit(2),
            Rate::from_mbit(20),
            Duration::from_secs(1),
        );
        assert_eq!(r.rates.first(), Some(&Rate::from_mbit(2)));
        assert_eq!(r.rates.last(), Some(&Rate::from_mbit(20)));
        assert_eq!(r.rates[1], Rate::from_mbit(4));
        let c = s.coarsen(Duration::from_secs(1));
        assert_eq!(c.rates, vec![Rate::from_mbit(20), Rate::from_mbit(10)]);
        assert_eq!(c.window, Duration::from_secs(1));
    }
}
