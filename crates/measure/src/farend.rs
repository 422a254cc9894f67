//! What the test's timeline needs from a far end, whatever server it is.
//!
//! `unbloat test` runs one timeline (idle baseline, load, idle tail; [`crate::client`]) against
//! four kinds of far end: `unbloat serve`, a web server (HTTP/1.1 or HTTP/2 over TLS, the IETF
//! responsiveness draft's endpoints), a stock `irtt server` (latency probes) and a stock
//! `iperf3 -s` (load). A far end gives the timeline two things:
//! - [`Load`]: the load streams, started at the load phase's start and stopped at its end. Their
//!   goodput is sampled every 200 ms; a far end may add streams while it runs (the HTTP load adds
//!   connections until goodput stops rising), so the set only grows and keeps its order.
//! - [`Probes`]: latency probes sent from the start of the idle baseline to the end of the idle
//!   tail, every one recorded, answered or not.
//!
//! Both are driven from one thread and only polled: no method may block for longer than a
//! connection timeout, and none may panic on what a server sends.

use std::time::Duration;

use unbloat_report::{Direction, ProbeKind, ProbeSeries};

use crate::MeasureError;

/// One load stream as the results name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Display name, unique in the run: "TCP upload BE", "HTTP download 3", "iperf3 upload 2".
    pub name: String,
    pub direction: Direction,
    pub dscp: u8,
}

/// The load of a run.
pub trait Load {
    /// Connects and starts every stream. Called once, at the start of the load phase; nothing
    /// may move before. Returns when the first streams move data.
    fn start(&mut self) -> Result<(), MeasureError>;
    /// Every stream so far, in a stable order (stream `i` stays `i`; new ones are appended).
    fn streams(&self) -> Vec<StreamInfo>;
    /// Goodput bytes of every stream so far, in the order of [`Load::streams`] (a stream added
    /// since that call may appear at the end). Counted where the bytes arrive: for downloads what
    /// this side's TCP received in order, for uploads what the far side's TCP acknowledged.
    fn bytes(&self) -> Vec<u64>;
    /// Why the load failed (a stream broke, the far end went away), or `None` while it runs.
    fn error(&self) -> Option<String>;
    /// Stops every stream at once (connections reset, not drained). Called once, at the end of
    /// the load phase or when the run ends early.
    fn stop(&mut self);
    /// After [`Load::stop`]: ends the session with the far end (iperf3 exchanges results) and
    /// returns remarks for the results' notes. An error here means the far end did not see the
    /// test to its end.
    fn finish(&mut self) -> Result<Vec<String>, MeasureError>;
}

/// The latency probes of a run; started before the idle baseline.
pub trait Probes {
    /// Probes sent and answered so far of this kind: (sent, answered).
    fn counts(&self, kind: ProbeKind) -> (usize, u64);
    /// Replies so far over every class (to notice a dead link).
    fn replies(&self) -> u64;
    /// The latest round trip of the primary class, for the progress line.
    fn latest_rtt_ms(&self) -> Option<f64>;
    /// Remarks for the results' notes (a class skipped and why, what the server allowed).
    fn notes(&self) -> Vec<String>;
    /// Stops sending, waits `grace` for late replies and returns every class's series; one-way
    /// delays (where the far end stamps) relate the clocks on probes sent before `idle_end_ns`
    /// (ns since the run's epoch).
    fn finish(self: Box<Self>, grace: Duration, idle_end_ns: u64) -> Vec<ProbeSeries>;
}
