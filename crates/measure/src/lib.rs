//! unbloat-measure: `unbloat serve` and `unbloat test`, latency under load.
//!
//! The layers, from bytes to a finished run:
//! - [`protocol`]: the wire formats (TCP control frames, UDP probes). Pure; property-tested.
//! - [`server`]: the far end. Bounded (tests at once, streams, length), one log line per test,
//!   hostile input ends only that session. [`server::Server::bind`] + `run_until` runs it
//!   in-process on an ephemeral port (tests, benchmarks, the lab).
//! - [`profile`]: the test profiles (rrul, rrul_be, upload, download, bidir, ping, tcp_nup,
//!   tcp_ndown) as data, from the embedded `profiles.toml`.
//! - [`probe`]: latency probes (UDP to the server's responder, ICMP echo) sent on an absolute
//!   schedule, and the clock relation that turns their stamps into one-way delays.
//! - the ICMP echo socket the probes and the sweep share (unprivileged or raw), and the kernel's
//!   receive stamps, are `unbloat_icmp`'s: autorate pings with them too.
//! - [`sweep`]: `unbloat tune`'s framing sweep: ICMP echoes of many sizes, for the RTT against
//!   packet size that shows ATM's cells (the analysis is `unbloat_tune::framing`).
//! - [`load`]: the TCP load streams and how their goodput is counted.
//! - [`farend`]: what the timeline needs from any far end ([`farend::Load`], [`farend::Probes`])
//!   and how the user names one ([`farend::Endpoint`]: `HOST`, `unbloat://`, `https://`,
//!   `irtt://`, `iperf3://`).
//! - `native`: `unbloat serve` as a far end (its control session and load streams).
//! - [`irtt`]: irtt's own protocol, so a stock `irtt server` answers the probes ([`probe`] sends
//!   them on its schedule).
//! - [`iperf3`]: iperf3's own control protocol, so a stock `iperf3 -s` carries the load.
//! - [`http`]: a web server as the far end, the IETF responsiveness test (hyper over rustls).
//! - [`client`]: `unbloat test`'s arguments, plan and progress display.
//! - [`timeline`]: the run (idle, load, idle tail) against any far end, returning an
//!   [`unbloat_report::Results`]; [`timeline::run_test`] is what `unbloat test` calls.
//! - [`meta`]: the run's metadata (kernel, hostname, egress interface, its qdiscs via `tc -j`).
//!
//! This crate holds no test bench: the throw-away namespaces its tests and the benchmarks run in
//! are `unbloat_testbed::netns`, and the accuracy benchmarks against iperf3, ping and irtt live
//! with the lab (`unbloat_lab::bench_measure`).
//!
//! Goodput is counted where the bytes arrive: download streams count what the client reads;
//! upload streams read `tcpi_bytes_acked` from the sender's TCP_INFO (what the server's kernel
//! acknowledged), so the client alone sees both directions every 200 ms, even if the server
//! vanishes mid-run. The server's own byte counts come back at the end as a cross-check.

mod atomic64;
pub mod backlog;
pub mod client;
pub mod farend;
#[cfg(feature = "http")]
pub mod http;
pub mod iperf3;
pub mod irtt;
pub mod load;
pub mod meta;
mod native;
pub mod probe;
pub mod profile;
pub mod protocol;
pub mod serve_policy;
pub mod server;
mod sockopt;
pub mod sweep;
pub mod timeline;

pub use client::{
    NoProgress, Progress, ProgressStatus, TerminalProgress, TestArgs, TestFailure, TestPlan,
};
pub use serve_policy::DscpPolicy;
pub use server::{run_serve, serve, BackgroundServer, ServeArgs, ServeOptions, Server};
pub use timeline::{run_plan, run_test};

use std::net::SocketAddr;

/// Everything that can end a test or stop the server, with a message for the user.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("server {addr} is unreachable: {source}")]
    Unreachable {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "server {addr} refused the connection: nothing listens there (is `unbloat serve` running?)"
    )]
    ConnectionRefused { addr: SocketAddr },
    #[error("{addr} is not an unbloat server (it answered something else)")]
    NotUnbloat { addr: SocketAddr },
    #[error(
        "server speaks unbloat protocol {server}, this client speaks {client}: upgrade the older \
         side so both run the same unbloat version"
    )]
    WrongVersion { server: u16, client: u16 },
    #[error("server is busy: it runs {active} of at most {limit} tests; try again in a minute")]
    Busy { active: u16, limit: u16 },
    #[error("server refused the test: {reason}")]
    Refused { reason: String },
    #[error("protocol error talking to {addr}: {source}")]
    Protocol {
        addr: SocketAddr,
        source: protocol::ProtocolError,
    },
    #[error(
        "every {kind} probe was lost ({sent} sent to {target}): a firewall probably blocks it"
    )]
    ProbesLost {
        kind: &'static str,
        sent: usize,
        target: String,
    },
    #[error("the link is gone: {0}")]
    LinkGone(String),
    /// A load stream failed: the far end closed it, or something on the way reset it.
    #[error("a load stream broke: {0}")]
    StreamBroke(String),
    #[error("the server went away during {phase}: {why}")]
    ServerGone { phase: &'static str, why: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A stock far end (a web server, irtt, iperf3) is running someone else's test.
    #[error("{server} is busy: {why}; try again in a minute")]
    FarEndBusy { server: String, why: String },
    /// A stock far end refused the test, broke its protocol, stalled, redirected elsewhere or
    /// went away; `why` says which, in words a user can act on.
    #[error("{server}: {why}")]
    FarEnd { server: String, why: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl MeasureError {
    /// Whether the far end, not this machine or its link, ended the test: busy, refused,
    /// went away, or spoke something else than it should (`unbloat test` exits 3 for these).
    pub fn is_far_end(&self) -> bool {
        matches!(
            self,
            MeasureError::NotUnbloat { .. }
                | MeasureError::WrongVersion { .. }
                | MeasureError::Busy { .. }
                | MeasureError::Refused { .. }
                | MeasureError::Protocol { .. }
                | MeasureError::ServerGone { .. }
                | MeasureError::FarEndBusy { .. }
                | MeasureError::FarEnd { .. }
        )
    }

    /// A stock far end's failure, its text made safe to print.
    pub fn far_end(server: impl std::fmt::Display, why: impl AsRef<str>) -> Self {
        MeasureError::FarEnd {
            server: server.to_string(),
            why: protocol::printable(why.as_ref()),
        }
    }

    /// A server's refusal, its reason made safe to print ([`protocol::printable`]).
    pub(crate) fn refused(reason: &str) -> Self {
        MeasureError::Refused {
            reason: protocol::printable(reason),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        MeasureError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Parses a duration as typed on the command line: `30s`, `500ms`, `2m`, `1.5s`, or a bare
/// number of seconds (`30`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    // The one rule of the units crate: a bare number is seconds, as iperf3, flent and ping.
    unbloat_units::duration::parse_test_duration(
        text,
        unbloat_units::Time::from_micros(0)..=unbloat_units::Time::from_secs(86_400),
    )
    .map(unbloat_units::Time::as_duration)
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_in_the_usual_units() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3h").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1e99").is_err());
    }
}
