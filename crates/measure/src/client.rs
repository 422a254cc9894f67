//! `unbloat test`: the timeline that drives probes and load and returns the results.
//!
//! The timeline is flent's RRUL one: an idle baseline of probes only (at least
//! [`MIN_IDLE_BEFORE`], default 5 s), the load (default 30 s) with the probes going on, and an
//! idle tail (default 5 s). Every [`SAMPLE_INTERVAL`] (200 ms) the goodput of every stream is
//! sampled on an absolute schedule and the progress display is updated.
//!
//! What callers can rely on:
//! - [`run_test`] returns a complete [`Results`], or a [`TestFailure`] with a typed error and,
//!   once measuring had begun, everything measured so far with `metadata.partial = true` and
//!   the reason. Errors before the first probe (unreachable, refused, wrong version, busy) carry
//!   no results.
//! - Every UDP probe of the idle baseline lost is an error ([`MeasureError::ProbesLost`], a
//!   firewall); every ICMP probe lost is only a note (ICMP is often filtered).
//! - Neither stream bytes nor probe replies for [`STALL`] (or a stream failing) ends the run as
//!   [`MeasureError::LinkGone`].
//! - The server closing the test's control connection, in any phase, or not answering the
//!   final Finish, ends the run as [`MeasureError::ServerGone`] with partial results: a run
//!   whose idle tail the server did not see to the end is not a complete run.
//! - Failing to read the egress qdiscs never fails a run: it becomes a note.

use std::io::IsTerminal;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use unbloat_report::{
    Direction, Metadata, Phase, Phases, ProbeKind, Results, StreamSeries, ThroughputSample,
    RESULTS_VERSION,
};

use crate::load::{self, LoadStream};
use crate::probe::Prober;
use crate::profile::{Profile, ResolvedProfile};
use crate::protocol::{ClientMsg, ServerMsg, TestRequest};
use crate::server::DEFAULT_PORT;
use crate::{meta, parse_duration, MeasureError};

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
/// The longest load `--duration` allows. Servers allow 10 minutes by default; an hour covers a
/// soak test against one's own server, and keeps every sum of phases far from overflowing.
pub const MAX_LOAD: Duration = Duration::from_secs(3600);
/// The longest idle phase `--idle` allows.
pub const MAX_IDLE: Duration = Duration::from_secs(600);
/// `--connect-timeout` bounds: below 100 ms even a nearby server on a loaded link fails to
/// answer; above a minute nobody is waiting any more.
pub const CONNECT_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(60));

/// `unbloat test`: measure latency under load against an `unbloat serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct TestArgs {
    /// The server: a host name or address, optionally with a port (default 4420). IPv6
    /// addresses with a port go in brackets: `[2001:db8::1]:4420`.
    #[arg(value_name = "HOST[:PORT]")]
    pub server: String,
    /// What to run: rrul (4 up + 4 down TCP streams marked BE, BK, CS5, EF; UDP probes BE, EF,
    /// BK; ping), rrul_be (the same, all best effort), upload, download, bidir, ping (latency
    /// only), tcp_nup, tcp_ndown.
    #[arg(long, value_name = "PROFILE", default_value = "rrul")]
    pub profile: String,
    /// How long the load runs (e.g. 30s, 1m; 1s to 60m). The idle phases come on top.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Number of TCP streams per direction, for upload, download, bidir, tcp_nup and tcp_ndown.
    #[arg(long, value_name = "N")]
    pub streams: Option<usize>,
    /// Length of the idle baseline before the load and of the idle tail after it (3s to 10m).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    pub idle: Duration,
    /// Latency probes per second for each probe class (1 to 100).
    #[arg(long, value_name = "HZ", default_value_t = 5.0)]
    pub probe_rate: f64,
    /// How long to wait for the server to answer a connection (100ms to 60s).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

/// A validated test: what [`run_plan`] executes. Build it with [`TestArgs::plan`], or directly
/// (tests and the lab use shorter idle phases than the command line allows).
#[derive(Debug, Clone)]
pub struct TestPlan {
    /// The server as the user typed it.
    pub remote: String,
    pub profile: ResolvedProfile,
    pub idle_before: Duration,
    pub load: Duration,
    pub idle_after: Duration,
    pub probe_interval: Duration,
    pub connect_timeout: Duration,
    pub command_line: Vec<String>,
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
        parse_remote(&self.server)?;
        let profile = Profile::by_name(&self.profile)?.resolve(self.streams)?;
        Ok(TestPlan {
            remote: self.server.clone(),
            profile,
            idle_before: self.idle,
            load: self.duration,
            idle_after: self.idle,
            probe_interval: Duration::from_secs_f64(1.0 / self.probe_rate),
            connect_timeout: self.connect_timeout,
            command_line: std::env::args().collect(),
        })
    }
}

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
    let bad = |why: &str| MeasureError::InvalidArgument(format!("server {text:?}: {why}"));
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| bad("the port must be a number 1..65535"))
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| bad("missing ]"))?;
        return match after {
            "" => Ok((host.to_string(), DEFAULT_PORT)),
            p => Ok((
                host.to_string(),
                port(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("expected :PORT after ]"))?,
                )?,
            )),
        };
    }
    let (host, port) = match text.matches(':').count() {
        0 => (text.to_string(), DEFAULT_PORT),
        1 => {
            let (h, p) = text.split_once(':').ok_or_else(|| bad("bad port"))?;
            (h.to_string(), port(p)?)
        }
        _ => (text.to_string(), DEFAULT_PORT),
    };
    if host.is_empty() || port == 0 {
        return Err(bad("expected HOST[:PORT]"));
    }
    Ok((host, port))
}

/// Runs `unbloat test` as the arguments say.
pub fn run_test(args: &TestArgs, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    let plan = args.plan()?;
    run_plan(&plan, progress)
}

fn random_id() -> u64 {
    let mut b = [0u8; 8];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    match from_os {
        Ok(()) => u64::from_ne_bytes(b),
        Err(_) => {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            (t as u64) ^ (u64::from(std::process::id()) << 32)
        }
    }
}

/// Connects the control connection to the first address of `remote` that answers.
fn connect_control(plan: &TestPlan) -> Result<(TcpStream, SocketAddr), MeasureError> {
    let (host, port) = parse_remote(&plan.remote)?;
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|source| MeasureError::Resolve {
            host: host.clone(),
            source,
        })?
        .collect();
    let mut last = MeasureError::NoAddress { host };
    for addr in addrs {
        match load::connect(addr, plan.connect_timeout, 0) {
            Ok(c) => return Ok((c, addr)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Executes a validated plan.
pub fn run_plan(plan: &TestPlan, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    let result = run_inner(plan, progress);
    progress.finish();
    result
}

/// The measured data of a run in progress.
struct Run<'a> {
    plan: &'a TestPlan,
    /// The test's control connection: the server says nothing on it until the Finish, so
    /// anything that ends it (a close, a reset) means the server is gone. A second handle to
    /// the connection the Finish is sent on.
    control: TcpStream,
    epoch: Instant,
    streams: Vec<LoadStream>,
    series: Vec<StreamSeries>,
    last_bytes: Vec<u64>,
    last_sample: Instant,
    last_activity: Instant,
    last_replies: u64,
    /// Tells the load streams' threads to stop.
    stop: Arc<AtomicBool>,
}

fn run_inner(plan: &TestPlan, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    let (mut control, addr) = connect_control(plan)?;
    load::handshake(&mut control, addr, plan.connect_timeout)?;
    let test_id = random_id();
    let total = plan.idle_before + plan.load + plan.idle_after;
    let request = TestRequest {
        test_id,
        load_ms: plan.load.as_millis().min(u128::from(u32::MAX)) as u32,
        session_ms: (total + Duration::from_secs(5))
            .as_millis()
            .min(u128::from(u32::MAX)) as u32,
        streams: plan
            .profile
            .streams
            .iter()
            .map(|s| crate::protocol::StreamSpec {
                direction: s.direction,
                dscp: s.dscp,
            })
            .collect(),
    };
    let asked = ClientMsg::Request(request);
    let probe_port = match load::request(&mut control, addr, &asked, plan.connect_timeout)? {
        ServerMsg::Accept { probe_port } => probe_port,
        ServerMsg::Busy { active, limit } => {
            return Err(MeasureError::Busy { active, limit }.into())
        }
        ServerMsg::Refused { reason } => return Err(MeasureError::refused(&reason).into()),
        other => {
            let why = format!("expected Accept, got {other:?}");
            let e = crate::protocol::ProtocolError::BadField {
                field: "reply",
                why,
            };
            return Err(load::protocol_error(addr, e).into());
        }
    };
    let info = meta::collect(addr.ip());
    let started_at_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let epoch = Instant::now();
    let probe_target = SocketAddr::new(addr.ip(), probe_port);
    let prober = Prober::start(
        &plan.profile.probes,
        probe_target,
        test_id,
        plan.probe_interval,
        epoch,
    )?;
    let mut run = Run {
        plan,
        control: control
            .try_clone()
            .map_err(|e| MeasureError::io("control connection", e))?,
        epoch,
        streams: Vec::new(),
        series: Vec::new(),
        last_bytes: Vec::new(),
        last_sample: epoch,
        last_activity: epoch,
        last_replies: 0,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut notes = info.notes.clone();
    notes.extend(prober.notes.iter().cloned());
    let mut failure = timeline(
        &mut run,
        &prober,
        probe_target,
        addr,
        test_id,
        &mut notes,
        progress,
    )
    .err();
    run.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in std::mem::take(&mut run.streams) {
        s.stop();
    }
    // Late replies: a second, or three probe intervals at low rates.
    let grace = (plan.probe_interval * 3).max(Duration::from_secs(1));
    let idle_end_ns = plan.idle_before.as_nanos() as u64;
    let probes = prober.finish(grace, idle_end_ns);
    if failure.is_none() {
        match load::request(&mut control, addr, &ClientMsg::Finish, plan.connect_timeout) {
            Ok(ServerMsg::Report { .. }) => {}
            Ok(other) => notes.push(format!(
                "server ended the test with {other:?} instead of a report"
            )),
            Err(e) => {
                failure = Some(MeasureError::ServerGone {
                    phase: "the final report",
                    why: e.to_string(),
                })
            }
        }
    }
    let results = Results {
        version: RESULTS_VERSION,
        metadata: Metadata {
            unbloat_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel: info.kernel,
            hostname: info.hostname,
            command_line: plan.command_line.clone(),
            started_at_unix,
            remote: plan.remote.clone(),
            profile: plan.profile.name.clone(),
            sample_interval_ms: SAMPLE_INTERVAL.as_millis() as u32,
            qdiscs: info.qdiscs,
            egress_iface: info.egress_iface,
            partial: failure.is_some(),
            partial_reason: failure.as_ref().map(|e| e.to_string()),
            notes,
        },
        phases: Phases {
            idle_before_s: plan.idle_before.as_secs_f64(),
            load_s: plan.load.as_secs_f64(),
            idle_after_s: plan.idle_after.as_secs_f64(),
        },
        streams: run.series,
        probes,
    };
    match failure {
        None => Ok(results),
        Some(error) => Err(TestFailure {
            error,
            partial: Some(Box::new(results)),
        }),
    }
}

/// The three phases; returns the error that ended the run early, if any.
fn timeline(
    run: &mut Run,
    prober: &Prober,
    probe_target: SocketAddr,
    server: SocketAddr,
    test_id: u64,
    notes: &mut Vec<String>,
    progress: &mut dyn Progress,
) -> Result<(), MeasureError> {
    let plan = run.plan;
    let load_start = plan.idle_before;
    let load_end = load_start + plan.load;
    let total = load_end + plan.idle_after;
    run.ticks(
        Duration::ZERO,
        load_start,
        Phase::IdleBefore,
        total,
        prober,
        progress,
    )?;

    let (udp_sent, udp_answered) = prober.counts(ProbeKind::Udp);
    if udp_sent > 0 && udp_answered == 0 {
        return Err(MeasureError::ProbesLost {
            kind: "UDP",
            sent: udp_sent,
            target: format!("UDP port {} of {}", probe_target.port(), probe_target.ip()),
        });
    }
    let (icmp_sent, icmp_answered) = prober.counts(ProbeKind::Icmp);
    if icmp_sent > 0 && icmp_answered == 0 {
        notes.push(format!(
            "every ICMP echo of the idle baseline was lost ({icmp_sent} sent): ICMP is probably \
             filtered on the path; the ICMP series is all losses"
        ));
    }

    // Connect and attach every stream before any moves data: a stream connecting while the
    // others already fill the queue could lose its SYN and start seconds late. All at once: one
    // after the other, eight streams' handshakes would take a second of the load phase on a slow
    // link, and the goodput would be divided by time in which nothing could move.
    let opened: Vec<Result<LoadStream, MeasureError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .profile
            .streams
            .iter()
            .enumerate()
            .map(|(i, plan_stream)| {
                scope.spawn(move || {
                    LoadStream::open(server, test_id, i as u16, plan_stream, plan.connect_timeout)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for (plan_stream, stream) in plan.profile.streams.iter().zip(opened) {
        let stream = stream?;
        run.series.push(StreamSeries {
            name: plan_stream.name.clone(),
            direction: plan_stream.direction,
            dscp: plan_stream.dscp,
            samples: Vec::new(),
            total_bytes: 0,
        });
        run.last_bytes.push(0);
        run.streams.push(stream);
    }
    for stream in &mut run.streams {
        stream.start(Arc::clone(&run.stop))?;
    }
    run.last_sample = Instant::now();
    let loaded = run.ticks(load_start, load_end, Phase::Loaded, total, prober, progress);
    run.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    loaded?;
    for s in std::mem::take(&mut run.streams) {
        s.stop();
    }
    run.ticks(load_end, total, Phase::IdleAfter, total, prober, progress)
}

impl Run<'_> {
    /// Ticks every sample interval from `from` to `to` (times since the epoch): samples the
    /// streams, updates the progress, watches for a dead link.
    fn ticks(
        &mut self,
        from: Duration,
        to: Duration,
        phase: Phase,
        total: Duration,
        prober: &Prober,
        progress: &mut dyn Progress,
    ) -> Result<(), MeasureError> {
        let mut k = 1u32;
        loop {
            let tick = (from + SAMPLE_INTERVAL * k).min(to);
            let now = self.epoch.elapsed();
            if tick > now {
                std::thread::sleep(tick - now);
            }
            // A tick that passed while the streams were being set up (slow on a loaded or
            // emulated machine), or that comes right after the set-up, would divide the bytes
            // by a near-zero interval and report absurd rates: the next tick's sample covers it.
            let short = self.last_sample.elapsed() < SAMPLE_INTERVAL / 2;
            if tick < to && (now.saturating_sub(tick) > SAMPLE_INTERVAL / 4 || short) {
                k += 1;
                continue;
            }
            let (down_bps, up_bps) = self.sample();
            let replies = prober.replies();
            if replies != self.last_replies || up_bps + down_bps > 0.0 {
                self.last_replies = replies;
                self.last_activity = Instant::now();
            }
            progress.update(&ProgressStatus {
                elapsed: self.epoch.elapsed(),
                total,
                phase,
                down_bps,
                up_bps,
                latency_ms: prober.latest_rtt_ms(),
            });
            if let Some((name, err)) = self
                .streams
                .iter()
                .find_map(|s| s.error().map(|e| (s.plan.name.clone(), e)))
            {
                return Err(MeasureError::LinkGone(format!("{name}: {err}")));
            }
            if let Some(why) = connection_ended(&self.control) {
                let phase = match phase {
                    Phase::IdleBefore => "the idle baseline",
                    Phase::Loaded => "the load",
                    Phase::IdleAfter => "the idle tail",
                };
                return Err(MeasureError::ServerGone { phase, why });
            }
            let stall = STALL.max(self.plan.probe_interval * 10);
            if self.last_activity.elapsed() >= stall && self.epoch.elapsed() > stall {
                return Err(MeasureError::LinkGone(format!(
                    "no data and no probe reply for {:.0} s",
                    stall.as_secs_f64()
                )));
            }
            if tick >= to {
                return Ok(());
            }
            k += 1;
        }
    }

    /// One goodput sample per stream; returns the total (down, up) bit/s of this interval.
    fn sample(&mut self) -> (f64, f64) {
        let now = Instant::now();
        let dt = now.duration_since(self.last_sample).as_secs_f64();
        self.last_sample = now;
        let t = now.duration_since(self.epoch).as_secs_f64();
        let (mut down, mut up) = (0.0, 0.0);
        for (i, stream) in self.streams.iter().enumerate() {
            let bytes = stream.bytes();
            let delta = bytes.saturating_sub(self.last_bytes[i]);
            self.last_bytes[i] = bytes.max(self.last_bytes[i]);
            let bps = if dt > 0.0 {
                delta as f64 * 8.0 / dt
            } else {
                0.0
            };
            let series = &mut self.series[i];
            series.samples.push(ThroughputSample { t, bps });
            series.total_bytes = self.last_bytes[i];
            match series.direction {
                Direction::Down => down += bps,
                Direction::Up => up += bps,
            }
        }
        (down, up)
    }
}

/// Why `conn` has ended (the peer closed or reset it), or `None` while it is open. Never waits,
/// and leaves the connection's blocking mode alone (a peek with MSG_DONTWAIT).
fn connection_ended(conn: &TcpStream) -> Option<String> {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT;
    match socket2::SockRef::from(conn).recv_with_flags(&mut byte, flags) {
        Ok(0) => Some("it closed the test's control connection".to_string()),
        // Something unasked for: the Finish's answer will say whether it makes sense.
        Ok(_) => None,
        Err(e) if crate::server::is_timeout(&e) => None,
        Err(e) => Some(format!("the test's control connection failed: {e}")),
    }
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

    fn args(extra: &[&str]) -> Result<TestPlan, MeasureError> {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            test: TestArgs,
        }
        let argv = std::iter::once("unbloat-test").chain(extra.iter().copied());
        Cli::try_parse_from(argv)
            .map_err(|e| MeasureError::InvalidArgument(e.to_string()))?
            .test
            .plan()
    }

    #[test]
    fn arguments_are_checked_with_the_flag_named() {
        let plan = args(&[
            "host",
            "--duration",
            "10s",
            "--profile",
            "tcp_nup",
            "--streams",
            "2",
        ])
        .expect("valid");
        assert_eq!(plan.load, Duration::from_secs(10));
        assert_eq!(plan.profile.streams.len(), 2);
        assert_eq!(plan.probe_interval, Duration::from_millis(200));
        let err = |a: &[&str]| args(a).expect_err("invalid").to_string();
        assert!(err(&["host", "--idle", "2s"]).contains("--idle"));
        assert!(err(&["host", "--probe-rate", "101"]).contains("--probe-rate"));
        assert!(err(&["host", "--probe-rate", "0"]).contains("--probe-rate"));
        assert!(err(&["host", "--duration", "0s"]).contains("--duration"));
        assert!(err(&["host", "--profile", "nope"]).contains("known profiles"));
        assert!(err(&["host:x"]).contains("port"));
    }

    /// Bug: `--connect-timeout 0s` was accepted (every connection then failed at once), and a
    /// tiny `--probe-rate` (1e-300) panicked turning its interval into a Duration. Every time
    /// and rate flag is now finite and within a range, or refused with the flag named.
    #[test]
    fn connect_timeout_zero_and_out_of_range_times_and_rates_are_refused() {
        let refused = [
            ("--connect-timeout", "0s"),
            ("--connect-timeout", "10ms"),
            ("--connect-timeout", "61s"),
            ("--probe-rate", "1e-300"),
            ("--probe-rate", "0.5"),
            ("--probe-rate", "inf"),
            ("--probe-rate", "NaN"),
            ("--probe-rate", "-5"),
            ("--duration", "1440m"),
            ("--duration", "500ms"),
            ("--idle", "11m"),
        ];
        for (flag, value) in refused {
            let arg = format!("{flag}={value}");
            let err = args(&["host", arg.as_str()]).expect_err(&arg).to_string();
            assert!(err.contains(flag), "{arg}: {err}");
        }
        for (flag, value) in [("--duration", "inf"), ("--idle", "nan"), ("--idle", "1e99")] {
            let arg = format!("{flag}={value}");
            let err = args(&["host", arg.as_str()]).expect_err(&arg).to_string();
            assert!(err.contains(flag), "{arg}: {err}");
        }
        let plan = args(&[
            "host",
            "--connect-timeout=100ms",
            "--probe-rate=1",
            "--duration=60m",
            "--idle=10m",
        ])
        .expect("the ends of every range");
        assert_eq!(plan.connect_timeout, Duration::from_millis(100));
        assert_eq!(plan.probe_interval, Duration::from_secs(1));
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
