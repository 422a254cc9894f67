//! The raw results of one `unbloat test` run, as written to and read from the results file.
//!
//! What callers can rely on:
//! - A [`Results`] serialises to JSON with [`Results::to_json_pretty`] and reads back with
//!   [`Results::from_json`] unchanged (a round-trip property test pins this).
//! - Every file carries `"version"`. [`Results::from_json`] refuses a file newer than
//!   [`RESULTS_VERSION`] with [`ReportError::NewerVersion`] (an old unbloat must not guess at a new
//!   format) and upgrades older ones step by step, so a results file written today still plots
//!   after the format changes. Only version 1 exists now; see [`upgrade`] for where v2 slots in.
//! - Times are seconds since the start of the run (the first idle probe), on one monotonic clock.
//!   The timeline is flent's RRUL one: `[0, idle_before_s)` idle, then `load_s` seconds of load,
//!   then `idle_after_s` seconds of idle tail (see [`Phases`]).
//! - Throughput samples are one per `sample_interval_ms` (200 ms) interval, stamped with the END
//!   of the interval, goodput in bit/s (application payload, not wire bytes).
//! - A lost probe has `rtt_ms: None`; it is kept, not dropped, so loss can be counted.

use serde::{Deserialize, Serialize};

use crate::qdiscs::EgressQdiscs;
use crate::ReportError;

/// The version of the results file format this build writes. Bump it when a field changes
/// meaning or is removed, and add the step from the previous version to [`upgrade`].
pub const RESULTS_VERSION: u32 = 1;

/// Everything one test run measured, plus the context needed to interpret it later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Format version, [`RESULTS_VERSION`] when written by this build.
    pub version: u32,
    pub metadata: Metadata,
    pub phases: Phases,
    /// One series per TCP load stream.
    pub streams: Vec<StreamSeries>,
    /// One series per latency probe class (UDP per DSCP, ICMP).
    pub probes: Vec<ProbeSeries>,
    /// This machine's own egress queue, sampled during the run: what [`crate::locate`] counts
    /// as this machine's share of the delay. Empty when it was not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backlog: Vec<BacklogSample>,
}

/// The bytes this machine's egress qdisc held at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BacklogSample {
    /// Seconds since the start of the run.
    pub t: f64,
    pub bytes: u64,
}

/// Where a probe class's answers come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hop {
    /// The far end of the test (its server, or the host named for probes).
    #[default]
    FarEnd,
    /// This machine's default gateway: the first hop, probed beside the far end to tell where
    /// the queue stands ([`crate::locate`]).
    Gateway,
}

impl Hop {
    fn is_far_end(&self) -> bool {
        *self == Hop::FarEnd
    }
}

/// Where, when and how the run was made. Like flent's metadata, it travels with the data so a
/// plot made months later still says what was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// `CARGO_PKG_VERSION` of the unbloat that measured.
    pub unbloat_version: String,
    /// `uname -r` style kernel release of the measuring host.
    pub kernel: String,
    pub hostname: String,
    /// The command line as typed (argv).
    pub command_line: Vec<String>,
    /// Wall-clock start of the run, seconds since the Unix epoch (UTC).
    pub started_at_unix: f64,
    /// The far end as given by the user (`HOST[:PORT]`).
    pub remote: String,
    /// Profile name: rrul, rrul_be, upload, download, bidir, ping, tcp_nup, tcp_ndown.
    pub profile: String,
    /// Length of one throughput sample interval, normally 200.
    pub sample_interval_ms: u32,
    /// The qdiscs of `egress_iface` (`tc -j -s qdisc show dev <egress>`, written as tc printed
    /// it), or `null` when they were not read.
    pub qdiscs: EgressQdiscs,
    /// The interface the traffic to the remote leaves by, when it could be determined.
    pub egress_iface: Option<String>,
    /// True when the run ended early (link gone, server vanished, interrupted).
    pub partial: bool,
    /// Why the run is partial, for the user.
    pub partial_reason: Option<String>,
    /// Free-form remarks (e.g. "ICMP needs raw sockets; skipped").
    pub notes: Vec<String>,
}

/// The three phases of the run, in seconds. Timeline: `[0, idle_before_s)` idle,
/// `[idle_before_s, idle_before_s + load_s)` loaded, then `idle_after_s` of idle tail.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub idle_before_s: f64,
    pub load_s: f64,
    pub idle_after_s: f64,
}

/// The start-up of a load: its first 3 s. Slow start overshoots every queue on the path at first,
/// including ones upstream of a shaper that only drains them at its margin below the line rate;
/// a shaper's bound is judged on what comes after, and the start-up's peak is reported beside it.
pub const STARTUP_S: f64 = 3.0;

/// Which phase a timestamp falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    IdleBefore,
    Loaded,
    IdleAfter,
}

impl Phases {
    /// When the load starts, seconds since the start of the run.
    pub fn load_start(&self) -> f64 {
        self.idle_before_s
    }

    /// When the load ends, seconds since the start of the run.
    pub fn load_end(&self) -> f64 {
        self.idle_before_s + self.load_s
    }

    /// The whole planned run length.
    pub fn total(&self) -> f64 {
        self.idle_before_s + self.load_s + self.idle_after_s
    }

    /// The phase `t` belongs to; boundaries belong to the later phase (half-open intervals).
    /// Times before 0 count as idle-before and times past the end as idle-after.
    pub fn phase_of(&self, t: f64) -> Phase {
        if t < self.load_start() {
            Phase::IdleBefore
        } else if t < self.load_end() {
            Phase::Loaded
        } else {
            Phase::IdleAfter
        }
    }
}

/// Direction of a load stream, seen from the host running `unbloat test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the tester to the server.
    Up,
    /// From the server to the tester.
    Down,
}

/// The throughput of one TCP load stream over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSeries {
    /// Display name, flent style, e.g. "TCP upload BE".
    pub name: String,
    pub direction: Direction,
    /// The DSCP code point the stream was marked with (0..=63).
    pub dscp: u8,
    /// One sample per sample interval, in time order.
    pub samples: Vec<ThroughputSample>,
    /// Payload bytes moved over the whole stream's life.
    pub total_bytes: u64,
}

/// Goodput over one sample interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThroughputSample {
    /// End of the interval, seconds since the start of the run.
    pub t: f64,
    /// Goodput over the interval, bit/s.
    pub bps: f64,
}

/// How a latency probe travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// UDP to a responder that stamps arrival and departure: unbloat serve's, or a stock irtt
    /// server's.
    Udp,
    /// ICMP echo.
    Icmp,
    /// A new TCP connection's handshake (SYN to SYN-ACK): one round trip through the kernel, the
    /// responsiveness draft's "foreign" TCP probe.
    TcpConnect,
    /// A TLS handshake on a new connection (ClientHello to the server's Finished).
    TlsHandshake,
    /// A small HTTP GET on a new connection, request to the response's last byte (the draft's
    /// foreign HTTP probe).
    HttpNew,
    /// A small HTTP GET on a connection that carries load (the draft's self probe: HTTP/2
    /// streams beside the load's).
    HttpLoaded,
}

/// Every probe of one class (kind + DSCP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSeries {
    /// Display name: "UDP BE", "UDP EF", "UDP BK", "ICMP".
    pub name: String,
    pub kind: ProbeKind,
    pub dscp: u8,
    /// Scheduled spacing between probes of this class (200 ms at 5 Hz).
    pub interval_ms: f64,
    /// One entry per probe sent, in send order, lost ones included.
    pub samples: Vec<ProbeSample>,
    /// Whose answers these are: the far end's unless said.
    #[serde(default, skip_serializing_if = "Hop::is_far_end")]
    pub hop: Hop,
}

/// One latency probe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeSample {
    /// Send time, seconds since the start of the run.
    pub t: f64,
    /// Round-trip time; `None` when no reply came (lost). For UDP it leaves out the time the
    /// server held the probe between its receive and send stamps (as irtt does), so it is
    /// `owd_up_ms + owd_down_ms` when those are known.
    pub rtt_ms: Option<f64>,
    /// One-way delay tester -> server, when the clocks could be related.
    pub owd_up_ms: Option<f64>,
    /// One-way delay server -> tester, when the clocks could be related.
    pub owd_down_ms: Option<f64>,
    /// How late the probe left compared with its schedule (send jitter), ms.
    pub send_lag_ms: f64,
}

impl Results {
    /// Reads a results file of any version up to [`RESULTS_VERSION`], upgrading older ones.
    pub fn from_json(text: &str) -> Result<Results, ReportError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ReportError::Json(e.to_string()))?;
        let version = value
            .get("version")
            .and_then(serde_json::Value::as_u64)
            .ok_or(ReportError::MissingVersion)?;
        let version = u32::try_from(version).map_err(|_| ReportError::NewerVersion {
            found: u32::MAX,
            supported: RESULTS_VERSION,
        })?;
        let value = upgrade(value, version)?;
        serde_json::from_value(value).map_err(|e| ReportError::Json(e.to_string()))
    }

    /// The results as pretty-printed JSON, ending without a newline.
    pub fn to_json_pretty(&self) -> Result<String, ReportError> {
        serde_json::to_string_pretty(self).map_err(|e| ReportError::Json(e.to_string()))
    }

    /// The probe class that stands for "the" latency of the link: UDP BE when present (it shares
    /// the best-effort queue with the load, like most traffic), else a best-effort TCP connect
    /// (against a web server: a round trip of the kernel's, in a flow of its own like UDP BE's),
    /// else the first class.
    pub fn primary_probe(&self) -> Option<&ProbeSeries> {
        let best_effort = |kind: ProbeKind| {
            move |p: &&ProbeSeries| p.kind == kind && p.dscp == 0 && p.hop == Hop::FarEnd
        };
        self.probes
            .iter()
            .find(best_effort(ProbeKind::Udp))
            .or_else(|| self.probes.iter().find(best_effort(ProbeKind::TcpConnect)))
            .or_else(|| self.probes.iter().find(|p| p.hop == Hop::FarEnd))
    }

    /// The upload's goodput over the load, bit/s: the sum of the upload streams' bytes over the
    /// load's length; `None` without upload bytes.
    pub fn upload_goodput_bps(&self) -> Option<f64> {
        let bytes: u64 = self
            .streams
            .iter()
            .filter(|s| s.direction == Direction::Up)
            .map(|s| s.total_bytes)
            .sum();
        (bytes > 0 && self.phases.load_s > 0.0).then(|| bytes as f64 * 8.0 / self.phases.load_s)
    }
}

/// Brings a parsed results document of `version` up to [`RESULTS_VERSION`], one step at a time.
///
/// To add version 2: bump [`RESULTS_VERSION`], write `fn v1_to_v2(Value) -> Result<Value, _>`
/// that rewrites the changed fields and sets `"version": 2`, and add `1 => v1_to_v2(value)?` to
/// the match below. Each step only knows its own two versions, so old files keep loading forever.
pub fn upgrade(
    mut value: serde_json::Value,
    version: u32,
) -> Result<serde_json::Value, ReportError> {
    if version > RESULTS_VERSION {
        return Err(ReportError::NewerVersion {
            found: version,
            supported: RESULTS_VERSION,
        });
    }
    if version == 0 {
        return Err(ReportError::UnknownVersion(version));
    }
    for from in version..RESULTS_VERSION {
        value = upgrade_step(from, value)?;
    }
    Ok(value)
}

/// One step of [`upgrade`]: from version `from` to `from + 1`. Add each new step as a match
/// arm (`1 => v1_to_v2(value)`); a version without a step is one unbloat never wrote.
#[allow(clippy::match_single_binding)] // one arm per future version; none exists yet
fn upgrade_step(from: u32, value: serde_json::Value) -> Result<serde_json::Value, ReportError> {
    match from {
        _ => {
            let _ = value;
            Err(ReportError::UnknownVersion(from))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic;

    #[test]
    fn round_trips_through_json() {
        let results = synthetic::rrul(7);
        let text = results.to_json_pretty().expect("serialise");
        assert_eq!(Results::from_json(&text).expect("parse"), results);
    }

    #[test]
    fn enums_serialise_lowercase() {
        let results = synthetic::rrul(1);
        let text = results.to_json_pretty().expect("serialise");
        assert!(text.contains("\"direction\": \"up\""));
        assert!(text.contains("\"direction\": \"down\""));
        assert!(text.contains("\"kind\": \"udp\""));
        assert!(text.contains("\"kind\": \"icmp\""));
    }

    #[test]
    fn lost_probe_is_null_rtt() {
        let mut results = synthetic::rrul(1);
        results.probes[0].samples[0].rtt_ms = None;
        let text = results.to_json_pretty().expect("serialise");
        assert!(text.contains("\"rtt_ms\": null"));
        assert_eq!(
            Results::from_json(&text).expect("parse").probes[0].samples[0].rtt_ms,
            None
        );
    }

    #[test]
    fn newer_version_is_refused_with_a_clear_message() {
        let mut value = serde_json::to_value(synthetic::rrul(1)).expect("to value");
        value["version"] = serde_json::json!(RESULTS_VERSION + 1);
        let err = Results::from_json(&value.to_string()).expect_err("must refuse");
        assert!(matches!(err, ReportError::NewerVersion { found, supported }
            if found == RESULTS_VERSION + 1 && supported == RESULTS_VERSION));
        assert!(err.to_string().contains("newer unbloat"), "{err}");
    }

    #[test]
    fn huge_version_is_refused_not_truncated() {
        let mut value = serde_json::to_value(synthetic::rrul(1)).expect("to value");
        value["version"] = serde_json::json!(u64::from(u32::MAX) + 1);
        let err = Results::from_json(&value.to_string()).expect_err("must refuse");
        assert!(matches!(err, ReportError::NewerVersion { .. }));
    }

    #[test]
    fn missing_or_zero_version_is_refused() {
        let mut value = serde_json::to_value(synthetic::rrul(1)).expect("to value");
        value.as_object_mut().expect("object").remove("version");
        assert!(matches!(
            Results::from_json(&value.to_string()),
            Err(ReportError::MissingVersion)
        ));
        value["version"] = serde_json::json!(0);
        assert!(matches!(
            Results::from_json(&value.to_string()),
            Err(ReportError::UnknownVersion(0))
        ));
    }

    #[test]
    fn garbage_is_a_json_error() {
        assert!(matches!(
            Results::from_json("{not json"),
            Err(ReportError::Json(_))
        ));
        assert!(matches!(
            Results::from_json("[1,2]"),
            Err(ReportError::MissingVersion)
        ));
        // Right version, wrong shape.
        assert!(matches!(
            Results::from_json("{\"version\":1}"),
            Err(ReportError::Json(_))
        ));
    }

    #[test]
    fn phase_boundaries_belong_to_the_later_phase() {
        let p = Phases {
            idle_before_s: 5.0,
            load_s: 30.0,
            idle_after_s: 5.0,
        };
        assert_eq!(p.phase_of(-1.0), Phase::IdleBefore);
        assert_eq!(p.phase_of(4.999), Phase::IdleBefore);
        assert_eq!(p.phase_of(5.0), Phase::Loaded);
        assert_eq!(p.phase_of(34.999), Phase::Loaded);
        assert_eq!(p.phase_of(35.0), Phase::IdleAfter);
        assert_eq!(p.phase_of(100.0), Phase::IdleAfter);
        assert_eq!(p.total(), 40.0);
    }

    #[test]
    fn primary_probe_prefers_udp_be() {
        let mut results = synthetic::rrul(1);
        assert_eq!(
            results.primary_probe().map(|p| p.name.as_str()),
            Some("UDP BE")
        );
        results.probes.retain(|p| p.name != "UDP BE");
        let first = results.probes[0].name.clone();
        assert_eq!(results.primary_probe().map(|p| p.name.clone()), Some(first));
        results.probes.clear();
        assert!(results.primary_probe().is_none());
    }
}
