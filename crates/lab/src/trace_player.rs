//! The modem's bottleneck following a [`RateTrace`] (issue 16's variable links): the rate of its
//! HTB class and of its netem leaf changed at every window where the trace's rate changes.
//!
//! One `tc -force -batch -` process in the modem's namespace takes the changes on its standard
//! input, a line per change, for the whole run: a process per change would cost 50-100 ms in
//! User-Mode Linux, longer than a window. tc reads its input line by line and carries out each
//! line as it comes. `-force` keeps it going past a failed line; what it says on standard error is
//! collected and reported by [`TracePlayer::stop`].
//!
//! A window without delivery opportunities (LTE has outages of a few hundred ms) is played at
//! one packet per window ([`floor`]: 120 kbit/s at 100 ms): HTB refuses a zero rate.
//!
//! Only the HTB class changes, as [`crate::topology::modem_commands`] built it (PTM's 64/65
//! included, [`modem_rate`]). On a traced direction the modem's netem leaf has no rate of its
//! own: netem fixes each packet's send time when the packet arrives, so with a rate there a queue
//! built during a slow spell drained at that slow rate long after the trace's rate rose. On the
//! T-Mobile trace that held 10 s of delay with goodput at 28 % of the trace's mean. HTB's tokens
//! follow a change at once.
//!
//! [`TracePlayer::start_in`] is the same player for any namespace's bottleneck, its tc lines
//! given by the caller: `bench soak`'s far side ([`crate::bench_soak`]) plays a trace on its
//! own HTB class that way.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use unbloat_units::Rate;

use crate::profile::LinkProfile;
use crate::topology::{modem_rate, LiveTopology, Node};
use crate::trace::RateTrace;
pub use crate::trace::Traces;

/// A running player; [`TracePlayer::stop`] ends it and says how it went.
pub struct TracePlayer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<usize>>>,
    child: Child,
    stderr: Option<JoinHandle<String>>,
}

/// The least rate played: one full packet per window.
pub fn floor(window: Duration) -> Rate {
    let bits = crate::trace::MAHIMAHI_PACKET_BYTES * 8;
    Rate::from_bits_per_sec((bits as f64 / window.as_secs_f64().max(1e-3)) as u64)
}

/// The tc line that sets `dev`'s bottleneck to `line` (the line rate; the modem's own rate is
/// derived from it as at build time).
pub fn change_lines(profile: &LinkProfile, dev: &str, line: Rate) -> Vec<String> {
    let r = format!("{}bit", modem_rate(profile, line).bits_per_sec());
    vec![format!(
        "class change dev {dev} parent 1: classid 1:1 htb rate {r} ceil {r}"
    )]
}

impl TracePlayer {
    /// Starts playing `traces` on `live`'s modem from now.
    pub fn start(
        live: &LiveTopology,
        profile: &LinkProfile,
        traces: Traces,
    ) -> std::io::Result<TracePlayer> {
        let ways = [("cpe0", traces.down), ("isp0", traces.up)]
            .into_iter()
            .filter_map(|(dev, t)| Some((dev.to_string(), t?)))
            .collect();
        let profile = profile.clone();
        TracePlayer::start_in(&live.topo.ns(Node::Modem), ways, move |dev, rate| {
            change_lines(&profile, dev, rate)
        })
    }

    /// Starts playing each of `ways` (a device and the trace its bottleneck follows) in the
    /// namespace `ns` from now; `change` gives the tc lines that set a device's bottleneck to a
    /// rate. Whoever built the bottleneck knows its shape: the lab's modem, `bench soak`'s far
    /// side.
    pub fn start_in(
        ns: &str,
        ways: Vec<(String, RateTrace)>,
        change: impl Fn(&str, Rate) -> Vec<String> + Send + 'static,
    ) -> std::io::Result<TracePlayer> {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(["tc", "-force", "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || play(stdin, &ways, &change, &flag));
        Ok(TracePlayer {
            stop,
            thread: Some(thread),
            child,
            stderr: Some(stderr),
        })
    }

    /// Stops the player (the modem keeps the rate it has now): how many changes were sent, or
    /// what went wrong (a failed write, or what tc said about a line).
    pub fn stop(mut self) -> Result<usize, String> {
        self.stop.store(true, Ordering::SeqCst);
        let sent = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Ok(n))) => n,
            Some(Ok(Err(e))) => return Err(format!("writing to tc: {e}")),
            _ => return Err("the trace player's thread failed".into()),
        };
        // Its standard input is closed with the thread: tc ends.
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let said = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let errors = tc_errors(&said);
        if !errors.is_empty() || !status.success() {
            return Err(format!("tc ({status}): {errors}"));
        }
        Ok(sent)
    }
}

/// What tc said that is an error: its lines less its warnings. Newer kernels answer a change to
/// an HTB class with a large quantum by "Warning: quantum of class 10001 is big. Consider r2q
/// change." on standard error, and the change is made all the same.
fn tc_errors(said: &str) -> String {
    said.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning:"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Drop for TracePlayer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.child.wait();
    }
}

/// Writes a change at each window where a trace's rate differs from the last one sent, until
/// `stop`; the number of changes.
fn play(
    mut tc: ChildStdin,
    ways: &[(String, RateTrace)],
    change: &dyn Fn(&str, Rate) -> Vec<String>,
    stop: &AtomicBool,
) -> std::io::Result<usize> {
    let Some(tick) = ways.iter().map(|(_, t)| t.window).min() else {
        return Ok(0);
    };
    let started = Instant::now();
    let mut last: Vec<Option<Rate>> = vec![None; ways.len()];
    let mut sent = 0;
    let mut n: u32 = 0;
    while !stop.load(Ordering::SeqCst) {
        let at = started.elapsed();
        let mut batch = String::new();
        for (i, (dev, trace)) in ways.iter().enumerate() {
            let rate = trace.at(at).max(floor(trace.window));
            if last[i] != Some(rate) {
                for line in change(dev, rate) {
                    batch += &line;
                    batch.push('\n');
                }
                last[i] = Some(rate);
                sent += 1;
            }
        }
        if !batch.is_empty() {
            tc.write_all(batch.as_bytes())?;
            tc.flush()?;
        }
        // The next window's start, not `tick` from now: no drift over a long trace.
        n += 1;
        let next = tick * n;
        if let Some(wait) = next.checked_sub(started.elapsed()) {
            std::thread::sleep(wait.min(Duration::from_secs(1)));
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bug (issue 35): on a 7.2 kernel every variable-link strategy failed with "tc (exit status:
    /// 0): Warning: quantum of class 10001 is big. Consider r2q change.", which 7.2 printed for
    /// changes it made. A warning is not an error; a failed line still is.
    #[test]
    fn tc_warnings_are_not_errors_but_failed_lines_are() {
        let warned = "Warning: quantum of class 10001 is big. Consider r2q change.\n\
                      Warning: quantum of class 10001 is big. Consider r2q change.\n";
        assert_eq!(tc_errors(warned), "");
        let failed = "Warning: quantum of class 10001 is big. Consider r2q change.\n\
                      Error: Specified class not found.\nCommand failed -:7\n";
        assert_eq!(
            tc_errors(failed),
            "Error: Specified class not found.\nCommand failed -:7"
        );
    }

    #[test]
    fn changes_mirror_the_modems_build_commands() {
        let adsl = LinkProfile::shipped("adsl").unwrap();
        assert_eq!(
            change_lines(&adsl, "cpe0", Rate::from_mbit(5)),
            vec!["class change dev cpe0 parent 1: classid 1:1 htb rate 5000000bit ceil 5000000bit"]
        );
        // PTM: the modem runs at 64/65 of the line, as when it was built.
        let vdsl = LinkProfile::shipped("vdsl2").unwrap();
        let lines = change_lines(&vdsl, "isp0", Rate::from_mbit(65));
        assert!(
            lines[0].contains("rate 64000000bit ceil 64000000bit"),
            "{lines:?}"
        );
    }

    #[test]
    fn an_outage_is_played_at_one_packet_per_window() {
        assert_eq!(floor(Duration::from_millis(100)), Rate::from_kbit(120));
        assert_eq!(floor(Duration::from_secs(1)), Rate::from_kbit(12));
    }
}
