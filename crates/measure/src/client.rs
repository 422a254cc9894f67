//! `unbloat test`'s arguments, its validated plan and its progress display.
//!
//! The timeline is flent's RRUL one: an idle baseline of probes only (at least
//! [`MIN_IDLE_BEFORE`], default 5 s), the load (default 30 s) with the probes going on, and an
//! idle tail (default 5 s); [`crate::timeline`] runs it against any far end ([`crate::farend`]):
//! `unbloat serve`, a web server, a stock irtt server, a stock iperf3 server.
//!
//! What callers can rely on: [`TestArgs::plan`] checks every flag (its range, its far ends)
//! before anything is sent, and names the flag in its error.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use unbloat_report::{Phase, Results};

use crate::farend::{FarEnds, HttpChoice};
use crate::profile::{Profile, ResolvedProfile};
use crate::server::DEFAULT_PORT;
use crate::MeasureError;

/// Goodput sampling interval.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(200);
/// The shortest idle baseline `unbloat test` accepts: fewer probes make the idle median and the
/// clock relation unreliable.
pub const MIN_IDLE_BEFORE: Duration = Duration::from_secs(3);
/// No progress at all (no stream bytes, no probe reply) for this long means the link is gone.
pub const STALL: Duration = Duration::from_secs(5);
/// The fastest probe rate per class.
pub const MAX_PROBE_HZ: f64 = 100.0;
/// The slowest probe rate per class: one a second puts at least three probes in the shortest
/// idle baseline ([`MIN_IDLE_BEFORE`]), which the idle median and the clock relation need.
pub const MIN_PROBE_HZ: f64 = 1.0;
/// The longest load `--duration` allows. Servers allow 2 minutes a test by default (idle phases
/// included); an hour covers a soak test against one's own server, and keeps every sum of phases far from overflowing.
pub const MAX_LOAD: Duration = Duration::from_secs(3600);
/// The longest idle phase `--idle` allows.
pub const MAX_IDLE: Duration = Duration::from_secs(600);
/// `--connect-timeout` bounds: below 100 ms even a nearby server on a loaded link fails to
/// answer; above a minute nobody is waiting any more.
pub const CONNECT_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(60));

/// `unbloat test`'s options, as the command line gives them (the `unbloat` binary parses them
/// and documents each flag); [`TestArgs::plan`] checks them.
#[derive(Debug, Clone)]
pub struct TestArgs {
    /// The far end (`HOST[:PORT]`, `unbloat://`, `https://`, `irtt://`, `iperf3://`).
    pub server: Option<String>,
    /// The far end given as `--server` rather than as the argument.
    pub server_flag: Option<String>,
    /// Where the load goes, when not to the server.
    pub load: Option<String>,
    /// Where the latency probes go, when not to the server.
    pub probe: Option<String>,
    /// A web server's small object (latency probes), without its `.well-known/nq` config.
    pub small_url: Option<String>,
    /// A web server's large object (download load).
    pub large_url: Option<String>,
    /// A web server's URL that takes uploads.
    pub upload_url: Option<String>,
    /// More certificate authorities to trust (PEM).
    pub ca_file: Option<PathBuf>,
    /// A web server test's most load connections per direction.
    pub max_connections: Option<usize>,
    /// The profile's name (rrul, rrul_be, upload, download, bidir, ping, tcp_nup, tcp_ndown).
    pub profile: String,
    /// How long the load runs.
    pub duration: Duration,
    /// TCP streams per direction, for the profiles that take a number.
    pub streams: Option<usize>,
    /// The idle baseline before the load, and the idle tail after it.
    pub idle: Duration,
    /// Latency probes per second for each probe class.
    pub probe_rate: f64,
    /// How long to wait for the far end to answer a connection.
    pub connect_timeout: Duration,
    /// Probe the gateway and read this machine's egress backlog beside the far end, to tell
    /// where the queue stands (`unbloat_report::locate`).
    pub locate: bool,
}

/// A validated test: what [`crate::timeline::run_plan`] executes. Build it with [`TestArgs::plan`], or directly
/// (tests and the lab use shorter idle phases than the command line allows).
#[derive(Debug, Clone)]
pub struct TestPlan {
    /// The far end as the user typed it (`--load` and `--probe` after it, when given).
    pub remote: String,
    /// Where the load and the probes go.
    pub far_ends: FarEnds,
    pub profile: ResolvedProfile,
    pub idle_before: Duration,
    pub load: Duration,
    pub idle_after: Duration,
    pub probe_interval: Duration,
    pub connect_timeout: Duration,
    pub command_line: Vec<String>,
    /// As [`TestArgs::locate`].
    pub locate: bool,
}

impl TestArgs {
    /// Checks the arguments and resolves the profile.
    pub fn plan(&self) -> Result<TestPlan, MeasureError> {
        let invalid = |s: String| Err(MeasureError::InvalidArgument(s));
        let secs = |d: Duration| format!("{}s", d.as_secs_f64());
        if !(MIN_IDLE_BEFORE..=MAX_IDLE).contains(&self.idle) {
            return invalid(format!(
                "--idle {}: must be from {} to {}",
                secs(self.idle),
                secs(MIN_IDLE_BEFORE),
                secs(MAX_IDLE)
            ));
        }
        if !(Duration::from_secs(1)..=MAX_LOAD).contains(&self.duration) {
            return invalid(format!(
                "--duration {}: must be from 1s to {}",
                secs(self.duration),
                secs(MAX_LOAD)
            ));
        }
        // Written so that NaN fails too.
        if !(self.probe_rate >= MIN_PROBE_HZ && self.probe_rate <= MAX_PROBE_HZ) {
            return invalid(format!(
                "--probe-rate {:?}: must be from {MIN_PROBE_HZ} to {MAX_PROBE_HZ} probes a second",
                self.probe_rate
            ));
        }
        let (shortest, longest) = CONNECT_TIMEOUT_RANGE;
        if !(shortest..=longest).contains(&self.connect_timeout) {
            return invalid(format!(
                "--connect-timeout {}: must be from {} to {}",
                secs(self.connect_timeout),
                secs(shortest),
                secs(longest)
            ));
        }
        let profile = Profile::by_name(&self.profile)?.resolve(self.streams)?;
        let server = self.server.as_deref().or(self.server_flag.as_deref());
        let mut far_ends = FarEnds::choose(
            server,
            self.load.as_deref(),
            self.probe.as_deref(),
            !profile.streams.is_empty(),
        )?;
        far_ends.http = self.http_choice()?;
        let mut remote: Vec<&str> = server.into_iter().collect();
        for (flag, v) in [("--load", &self.load), ("--probe", &self.probe)] {
            if let Some(v) = v {
                remote.extend([flag, v.as_str()]);
            }
        }
        Ok(TestPlan {
            remote: remote.join(" "),
            far_ends,
            profile,
            idle_before: self.idle,
            load: self.duration,
            idle_after: self.idle,
            probe_interval: Duration::from_secs_f64(1.0 / self.probe_rate),
            connect_timeout: self.connect_timeout,
            command_line: std::env::args().collect(),
            locate: self.locate,
        })
    }
}

impl TestArgs {
    fn http_choice(&self) -> Result<HttpChoice, MeasureError> {
        if let Some(n) = self.max_connections {
            if !(1..=MAX_HTTP_CONNECTIONS).contains(&n) {
                return Err(MeasureError::InvalidArgument(format!(
                    "--max-connections {n}: must be from 1 to {MAX_HTTP_CONNECTIONS}"
                )));
            }
        }
        if let Some(file) = &self.ca_file {
            if !file.is_file() {
                return Err(MeasureError::InvalidArgument(format!(
                    "--ca-file {}: no such file (a PEM file of certificate authorities)",
                    file.display()
                )));
            }
        }
        let urls = match (&self.small_url, &self.large_url, &self.upload_url) {
            (Some(s), Some(l), Some(u)) => Some([s.clone(), l.clone(), u.clone()]),
            _ => None,
        };
        Ok(HttpChoice {
            ca_file: self.ca_file.clone(),
            max_connections: self.max_connections,
            urls,
        })
    }
}

/// The most load connections per direction a web server test may open.
pub const MAX_HTTP_CONNECTIONS: usize = 32;

/// A failed run: why, and what was measured before it failed (marked partial), if anything.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct TestFailure {
    #[source]
    pub error: MeasureError,
    pub partial: Option<Box<Results>>,
}

impl From<MeasureError> for TestFailure {
    fn from(error: MeasureError) -> Self {
        TestFailure {
            error,
            partial: None,
        }
    }
}

/// What the progress display is told every sample interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressStatus {
    pub elapsed: Duration,
    pub total: Duration,
    pub phase: Phase,
    pub down_bps: f64,
    pub up_bps: f64,
    /// The latest round trip of the primary probe class.
    pub latency_ms: Option<f64>,
}

/// Receives progress while a test runs.
pub trait Progress {
    fn update(&mut self, status: &ProgressStatus);
    /// The run is over (successfully or not); clean up the display.
    fn finish(&mut self) {}
}

/// Shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&mut self, _: &ProgressStatus) {}
}

/// Progress on stderr: one line rewritten in place on a terminal, else a line every 5 s.
pub struct TerminalProgress {
    tty: bool,
    last_line: Option<Instant>,
}

impl Default for TerminalProgress {
    fn default() -> Self {
        TerminalProgress {
            tty: std::io::stderr().is_terminal(),
            last_line: None,
        }
    }
}

/// The progress line's text.
pub fn progress_line(s: &ProgressStatus) -> String {
    let phase = match s.phase {
        Phase::IdleBefore => "idle",
        Phase::Loaded => "the load",
        Phase::IdleAfter => "the idle tail",
    };
    let latency = s
        .latency_ms
        .map(|l| format!("{l:7.1} ms"))
        .unwrap_or_else(|| "      - ms".into());
    format!(
        "{:5.1}/{:.0} s  {phase:<9}  down {:8.2} Mbit/s  up {:8.2} Mbit/s  latency {latency}",
        s.elapsed.as_secs_f64(),
        s.total.as_secs_f64(),
        s.down_bps / 1e6,
        s.up_bps / 1e6,
    )
}

impl Progress for TerminalProgress {
    fn update(&mut self, status: &ProgressStatus) {
        if self.tty {
            eprint!("\r\x1b[K{}", progress_line(status));
        } else if !matches!(self.last_line, Some(t) if t.elapsed() < Duration::from_secs(5)) {
            eprintln!("{}", progress_line(status));
            self.last_line = Some(Instant::now());
        }
    }
    fn finish(&mut self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// Splits `HOST[:PORT]`: `host`, `host:4420`, `10.0.0.1:4420`, `[2001:db8::1]:4420`,
/// `[2001:db8::1]`, `2001:db8::1` (a bare IPv6 address takes no port).
pub fn parse_remote(text: &str) -> Result<(String, u16), MeasureError> {
    crate::farend::parse_host_port(text, DEFAULT_PORT)
        .map_err(|why| MeasureError::InvalidArgument(format!("server {text:?}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_parse_with_and_without_ports() {
        let p = |s: &str| parse_remote(s).map_err(|e| e.to_string());
        assert_eq!(p("server"), Ok(("server".into(), 4420)));
        assert_eq!(p("server:99"), Ok(("server".into(), 99)));
        assert_eq!(p("10.0.0.1:5000"), Ok(("10.0.0.1".into(), 5000)));
        assert_eq!(p("[2001:db8::1]:5000"), Ok(("2001:db8::1".into(), 5000)));
        assert_eq!(p("[::1]"), Ok(("::1".into(), 4420)));
        assert_eq!(p("2001:db8::1"), Ok(("2001:db8::1".into(), 4420)));
        for bad in [
            "server:x",
            "server:0",
            ":80",
            "[::1",
            "[::1]80",
            "server:70000",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn progress_line_shows_phase_rates_and_latency() {
        let line = progress_line(&ProgressStatus {
            elapsed: Duration::from_millis(12_300),
            total: Duration::from_secs(40),
            phase: Phase::Loaded,
            down_bps: 95.5e6,
            up_bps: 19.25e6,
            latency_ms: Some(23.4),
        });
        assert!(line.contains(" 12.3/40 s"), "{line}");
        assert!(
            line.contains("load")
                && line.contains("95.50")
                && line.contains("19.25")
                && line.contains("23.4 ms"),
            "{line}"
        );
    }
}
