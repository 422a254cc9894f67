//! The probe that explains a failed apply, backed off. A flapping link (a PPPoE session that
//! drops every few seconds, a USB modem that re-enumerates) fails apply after apply, and each
//! failure probed the kernel again: a namespace and a dozen `tc` runs, every time. The kernel's
//! qdiscs do not change between two failures seconds apart, so one probe's answer serves the
//! failures that follow for a while, a while that doubles as long as they keep coming.

use super::{probe, Capabilities};
use crate::runner::Runner;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a first answer serves, and the most a run of failures stretches that to.
const FIRST_HOLD: Duration = Duration::from_secs(10);
const MAX_HOLD: Duration = Duration::from_secs(600);

/// One remembered answer: for which kinds, when, for how long, and what (None: the probe
/// itself failed).
#[derive(Debug, Default)]
pub struct ProbeBackoff {
    last: Option<(Vec<String>, Instant, Duration, Option<Capabilities>)>,
}

impl ProbeBackoff {
    /// The answer for `wanted` at `now`: the remembered one while it holds, else a new probe.
    /// A new probe within twice the last hold of the last one (failures keep coming) is held
    /// twice as long, up to [`MAX_HOLD`]; after a quiet spell, [`FIRST_HOLD`] again.
    pub fn probe(
        &mut self,
        runner: &dyn Runner,
        wanted: &[&str],
        now: Instant,
    ) -> Option<Capabilities> {
        let key: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
        let mut hold = FIRST_HOLD;
        if let Some((k, at, held, caps)) = &self.last {
            let age = now.saturating_duration_since(*at);
            if *k == key && age < *held {
                return caps.clone();
            }
            if *k == key && age < *held * 2 {
                hold = (*held * 2).min(MAX_HOLD);
            }
        }
        let caps = probe(runner, wanted).ok();
        self.last = Some((key, now, hold, caps.clone()));
        caps
    }
}

static SHARED: Mutex<ProbeBackoff> = Mutex::new(ProbeBackoff { last: None });

/// [`ProbeBackoff::probe`] with this process's one memory, now, for a runner on this machine
/// ([`Runner::is_this_machine`]); a scripted kernel (the tests' [`crate::runner::RecordingRunner`])
/// is probed every time, since each test scripts its own.
pub fn probe_backed_off(runner: &dyn Runner, wanted: &[&str]) -> Option<Capabilities> {
    if !runner.is_this_machine() {
        return probe(runner, wanted).ok();
    }
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    shared.probe(runner, wanted, Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::RecordingRunner;

    fn probes(r: &RecordingRunner) -> usize {
        r.calls().iter().filter(|c| c.args == ["-V"]).count()
    }

    /// Issue 36, item 12: every failure of a flapping link re-ran the whole probe.
    #[test]
    fn failures_in_a_row_probe_ever_less_often_and_a_quiet_spell_starts_over() {
        let r = RecordingRunner::new()
            .stdout_when(|c| c.args == ["-V"], "tc utility, iproute2-6.1.0\n");
        let mut b = ProbeBackoff::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // A failure every 2 s for 80 s: probes at 0 (held 10 s), 10 (20 s), 30 (40 s) and
        // 70 (80 s): 4, not 40.
        for s in (0..80).step_by(2) {
            assert!(b.probe(&r, &["cake"], at(s)).is_some());
        }
        assert_eq!(probes(&r), 4);
        // Other kinds are another question.
        b.probe(&r, &["htb"], at(80));
        assert_eq!(probes(&r), 5);
        // A quiet spell: held 10 s again.
        b.probe(&r, &["htb"], at(200));
        b.probe(&r, &["htb"], at(209));
        assert_eq!(probes(&r), 6);
        b.probe(&r, &["htb"], at(211));
        assert_eq!(probes(&r), 7);
    }

    #[test]
    fn the_hold_never_passes_ten_minutes() {
        let r = RecordingRunner::new();
        let mut b = ProbeBackoff::default();
        let t0 = Instant::now();
        let mut t = 0;
        for _ in 0..20 {
            b.probe(&r, &["cake"], t0 + Duration::from_secs(t));
            t += 1;
            while b
                .last
                .as_ref()
                .is_some_and(|l| t0 + Duration::from_secs(t) < l.1 + l.2)
            {
                t += 1;
            }
        }
        let held = b.last.as_ref().unwrap().2;
        assert_eq!(held, MAX_HOLD);
    }
}
