//! The run itself: open the far ends, then idle baseline, load and idle tail, then the results.
//!
//! What callers can rely on:
//! - [`run_plan`] returns a complete [`Results`], or a [`TestFailure`] with a typed error and,
//!   once measuring had begun, everything measured so far with `metadata.partial = true` and
//!   the reason. Errors before the first probe (unreachable, refused, wrong version, busy) carry
//!   no results.
//! - Every UDP probe of the idle baseline lost is an error ([`MeasureError::ProbesLost`], a
//!   firewall); every ICMP probe lost is only a note (ICMP is often filtered).
//! - Neither stream bytes nor probe replies for [`STALL`] ends the run as
//!   [`MeasureError::LinkGone`]; a stream failing as [`MeasureError::StreamBroke`].
//! - Against `unbloat serve`, the server closing the test's control connection, in any phase,
//!   or not answering the final Finish, ends the run as [`MeasureError::ServerGone`] with
//!   partial results: a run whose idle tail the server did not see to the end is not complete.
//! - A stock iperf3's session is ended right after the load (its results exchange), so that the
//!   server is free again during the idle tail.
//! - Failing to read the egress qdiscs never fails a run: it becomes a note.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use unbloat_report::{
    Direction, Metadata, Phase, Phases, ProbeKind, Results, StreamSeries, ThroughputSample,
    RESULTS_VERSION,
};

use crate::client::{
    Progress, ProgressStatus, TestArgs, TestFailure, TestPlan, SAMPLE_INTERVAL, STALL,
};
use crate::farend::{Endpoint, Load, Probes};
use crate::native::{self, NativeLoad, Session};
use crate::probe::Prober;
use crate::profile::ProbePlan;
use crate::{meta, MeasureError};

/// Runs `unbloat test` as the arguments say.
pub fn run_test(args: &TestArgs, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    let plan = args.plan()?;
    run_plan(&plan, progress)
}

/// Executes a validated plan.
pub fn run_plan(plan: &TestPlan, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    let result = run_inner(plan, progress);
    progress.finish();
    result
}

/// The far ends of a run, opened.
struct Opened {
    /// The `unbloat serve` session, when either role is one.
    session: Option<Session>,
    load: Option<Box<dyn Load>>,
    probes: Box<dyn Probes>,
    /// The address the probes go to (the path whose qdiscs the metadata reads).
    target: IpAddr,
    notes: Vec<String>,
}

/// The address of the first far end: where unbloat's session connected, else the name's first.
fn address(endpoint: &Endpoint, session: Option<&Session>) -> Result<SocketAddr, MeasureError> {
    match (endpoint, session) {
        (Endpoint::Unbloat { .. }, Some(s)) => Ok(s.addr),
        (Endpoint::Unbloat { host, port } | Endpoint::Irtt { host, port }, _)
        | (Endpoint::Iperf3 { host, port }, _) => Ok(native::resolve(host, *port)?[0]),
        (Endpoint::Http { host, .. }, _) => Ok(native::resolve(host, 443)?[0]),
    }
}

fn open(plan: &TestPlan, epoch: Instant) -> Result<Opened, MeasureError> {
    let ends = &plan.far_ends;
    let streams = &plan.profile.streams;
    let total = plan.idle_before + plan.load + plan.idle_after;
    let mut notes = Vec::new();
    // One unbloat session serves both roles when both are the same server.
    let session = match (&ends.probe, &ends.load) {
        (Endpoint::Unbloat { host, port }, _) | (_, Some(Endpoint::Unbloat { host, port })) => {
            let loads_here = matches!(&ends.load, Some(Endpoint::Unbloat { .. }));
            let asked = if loads_here { &streams[..] } else { &[] };
            let session_len = total + Duration::from_secs(5);
            Some(Session::open(
                host,
                *port,
                asked,
                plan.load,
                session_len,
                plan.connect_timeout,
            )?)
        }
        _ => None,
    };
    // One web server session serves both roles: its self probes ride the load's connections.
    let mut http_probes = None;
    let mut http_load = None;
    let http_end = [Some(&ends.probe), ends.load.as_ref()]
        .into_iter()
        .flatten()
        .find(|e| matches!(e, Endpoint::Http { .. }));
    if let Some(end) = http_end {
        let (load, probes) = http_open(plan, end, epoch)?;
        if matches!(&ends.load, Some(Endpoint::Http { .. })) {
            http_load = Some(load);
        }
        http_probes = Some(probes);
    }
    let probe_addr = address(&ends.probe, session.as_ref())?;
    let udp: Vec<ProbePlan> = plan.profile.probes.clone();
    let icmp_only: Vec<ProbePlan> = udp
        .iter()
        .filter(|p| p.kind == ProbeKind::Icmp)
        .cloned()
        .collect();
    let probes: Box<dyn Probes> = match &ends.probe {
        Endpoint::Unbloat { .. } => {
            let s = session.as_ref().ok_or_else(|| {
                MeasureError::InvalidArgument("an unbloat probe far end needs a session".into())
            })?;
            let target = SocketAddr::new(s.addr.ip(), s.probe_port);
            Box::new(Prober::start(
                &udp,
                target,
                s.test_id,
                plan.probe_interval,
                epoch,
            )?)
        }
        Endpoint::Irtt { .. } => irtt_probes(plan, &udp, probe_addr, epoch)?,
        Endpoint::Iperf3 { .. } => {
            notes.push(
                "iperf3 answers no latency probes: only ICMP echo measured the latency \
                 (add --probe irtt://HOST for UDP probes)"
                    .into(),
            );
            Box::new(Prober::start(
                &icmp_only,
                probe_addr,
                0,
                plan.probe_interval,
                epoch,
            )?)
        }
        Endpoint::Http { .. } => match http_probes.take() {
            Some(probes) => probes,
            None => return Err(MeasureError::InvalidArgument("no web server opened".into())),
        },
    };
    let load: Option<Box<dyn Load>> = match &ends.load {
        None => None,
        Some(Endpoint::Unbloat { .. }) => {
            let s = session.as_ref().ok_or_else(|| {
                MeasureError::InvalidArgument("an unbloat load far end needs a session".into())
            })?;
            Some(Box::new(NativeLoad::new(s, streams)))
        }
        Some(end @ Endpoint::Iperf3 { .. }) => {
            let addr = address(end, None)?;
            Some(iperf3_load(plan, addr)?)
        }
        Some(Endpoint::Http { .. }) => match http_load {
            Some(load) => Some(load),
            None => return Err(MeasureError::InvalidArgument("no web server opened".into())),
        },
        Some(Endpoint::Irtt { .. }) => {
            return Err(MeasureError::InvalidArgument(
                "an irtt server carries no load".into(),
            ))
        }
    };
    for (role, end) in [("load", ends.load.as_ref()), ("probes", Some(&ends.probe))] {
        if let Some(end) = end.filter(|e| !matches!(e, Endpoint::Unbloat { .. })) {
            notes.push(format!("{role}: {} at {}", end.kind(), end.host()));
        }
    }
    Ok(Opened {
        session,
        load,
        probes,
        target: probe_addr.ip(),
        notes,
    })
}

/// The measured data of a run in progress.
struct Run<'a> {
    plan: &'a TestPlan,
    opened: Opened,
    epoch: Instant,
    series: Vec<StreamSeries>,
    last_bytes: Vec<u64>,
    last_sample: Instant,
    last_activity: Instant,
    last_replies: u64,
    load_running: bool,
}

fn run_inner(plan: &TestPlan, progress: &mut dyn Progress) -> Result<Results, TestFailure> {
    // The wall clock of the samples' t = 0: read beside `epoch`, not after the far end has
    // answered (which takes up to a second), so that another clock's record of the same run
    // (the lab's queues, a packet capture) lines up with the samples.
    let epoch = Instant::now();
    let started_at_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let opened = open(plan, epoch)?;
    let info = meta::collect(opened.target);
    let mut notes = info.notes.clone();
    notes.extend(opened.notes.iter().cloned());
    notes.extend(opened.probes.notes());
    let locating = plan
        .locate
        .then(|| Locating::start(plan, &info, opened.target, epoch, &mut notes));
    let mut run = Run {
        plan,
        opened,
        epoch,
        series: Vec::new(),
        last_bytes: Vec::new(),
        last_sample: epoch,
        last_activity: epoch,
        last_replies: 0,
        load_running: false,
    };
    let mut failure = timeline(&mut run, &mut notes, progress).err();
    if run.load_running {
        run.stop_load(&mut notes, &mut failure);
    }
    // Late replies: a second, or three probe intervals at low rates.
    let grace = (plan.probe_interval * 3).max(Duration::from_secs(1));
    let idle_end_ns = plan.idle_before.as_nanos() as u64;
    let Run { opened, series, .. } = run;
    let Opened {
        mut session,
        probes,
        ..
    } = opened;
    // The gateway's probes stop with the far end's, and share their wait for late replies.
    if let Some(g) = locating.as_ref().and_then(|l| l.gateway.as_ref()) {
        g.stop_sending();
    }
    let mut probes = probes.finish(grace, idle_end_ns);
    let mut backlog = vec![];
    if let Some(l) = locating {
        let (gateway, samples) = l.finish(idle_end_ns, &mut notes);
        probes.extend(gateway);
        backlog = samples;
    }
    if failure.is_none() {
        if let Some(session) = session.as_mut() {
            match session.finish() {
                Ok(more) => notes.extend(more),
                Err(e) => failure = Some(e),
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
        streams: series,
        probes,
        backlog,
    };
    match failure {
        None => Ok(results),
        Some(error) => Err(TestFailure {
            error,
            partial: Some(Box::new(results)),
        }),
    }
}

/// What locates the queue beside the far end's probes: the gateway's ICMP echo and this
/// machine's egress backlog. Each is left out with a note when it cannot run; neither fails a
/// test.
struct Locating {
    gateway: Option<Prober>,
    backlog: Option<crate::backlog::Sampler>,
}

impl Locating {
    fn start(
        plan: &TestPlan,
        info: &meta::HostInfo,
        target: IpAddr,
        epoch: Instant,
        notes: &mut Vec<String>,
    ) -> Locating {
        let gateway = match info.gateway {
            None => {
                notes.push(format!(
                    "locate: no gateway on the route to {target} (on this link, or the route unread): the first hop is not told apart"
                ));
                None
            }
            Some(IpAddr::V6(v6)) if v6.is_unicast_link_local() => {
                notes.push(format!(
                    "locate: the gateway {v6} is link-local, which is not probed yet: the first hop is not told apart"
                ));
                None
            }
            Some(gw) if gw == target => None,
            Some(gw) => match Prober::start_gateway(gw, plan.probe_interval, epoch) {
                Ok(p) => {
                    // What it fell back to (echo without one-way times), said once.
                    let said: Vec<String> = p
                        .notes
                        .iter()
                        .filter(|n| !notes.contains(n))
                        .cloned()
                        .collect();
                    notes.extend(said);
                    Some(p)
                }
                Err(e) => {
                    notes.push(format!("locate: the gateway {gw} is not probed: {e}"));
                    None
                }
            },
        };
        let backlog = info.egress_iface.as_deref().and_then(|dev| {
            crate::backlog::Sampler::start(dev, epoch)
                .map_err(|e| notes.push(format!("locate: {dev}'s backlog is not read: {e}")))
                .ok()
        });
        Locating { gateway, backlog }
    }

    /// Ends both; the gateway's prober already stopped sending and waited out its late replies.
    fn finish(
        self,
        idle_end_ns: u64,
        notes: &mut Vec<String>,
    ) -> (
        Vec<unbloat_report::ProbeSeries>,
        Vec<unbloat_report::model::BacklogSample>,
    ) {
        let series = self
            .gateway
            .map(|g| g.finish(Duration::ZERO, idle_end_ns))
            .unwrap_or_default();
        let samples = match self.backlog {
            Some(b) => {
                let (samples, ended) = b.finish();
                notes.extend(ended);
                samples
            }
            None => vec![],
        };
        (series, samples)
    }
}

/// The three phases; returns the error that ended the run early, if any.
fn timeline(
    run: &mut Run,
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
        progress,
    )?;

    let probes = &run.opened.probes;
    let (udp_sent, udp_answered) = probes.counts(ProbeKind::Udp);
    if udp_sent > 0 && udp_answered == 0 {
        return Err(MeasureError::ProbesLost {
            kind: "UDP",
            sent: udp_sent,
            target: format!("UDP probes to {}", run.opened.target),
        });
    }
    let (icmp_sent, icmp_answered) = probes.counts(ProbeKind::Icmp);
    if icmp_sent > 0 && icmp_answered == 0 {
        notes.push(format!(
            "every ICMP echo of the idle baseline was lost ({icmp_sent} sent): ICMP is probably \
             filtered on the path; the ICMP series is all losses"
        ));
    }
    if let Some(load) = run.opened.load.as_mut() {
        run.load_running = true;
        load.start()?;
    }
    run.last_sample = Instant::now();
    let loaded = run.ticks(load_start, load_end, Phase::Loaded, total, progress);
    if run.load_running {
        let mut failure = loaded.err();
        run.stop_load(notes, &mut failure);
        if let Some(e) = failure {
            return Err(e);
        }
    } else {
        loaded?;
    }
    run.ticks(load_end, total, Phase::IdleAfter, total, progress)
}

impl Run<'_> {
    /// Stops the load at once and ends its session with the far end; a failure to end it is
    /// the run's failure unless the run had already failed.
    fn stop_load(&mut self, notes: &mut Vec<String>, failure: &mut Option<MeasureError>) {
        self.load_running = false;
        let Some(load) = self.opened.load.as_mut() else {
            return;
        };
        load.stop();
        match load.finish() {
            Ok(more) => notes.extend(more),
            Err(e) if failure.is_none() => *failure = Some(e),
            Err(e) => notes.push(format!("ending the load's session: {e}")),
        }
    }

    /// Ticks every sample interval from `from` to `to` (times since the epoch): samples the
    /// streams, updates the progress, watches for a dead link or a far end gone.
    fn ticks(
        &mut self,
        from: Duration,
        to: Duration,
        phase: Phase,
        total: Duration,
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
            let replies = self.opened.probes.replies();
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
                latency_ms: self.opened.probes.latest_rtt_ms(),
            });
            if let Some(why) = self.opened.load.as_ref().and_then(|l| l.error()) {
                if self.load_running {
                    return Err(MeasureError::StreamBroke(why));
                }
            }
            if let Some(why) = self.opened.session.as_ref().and_then(Session::gone) {
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

    /// One goodput sample per stream; returns the total (down, up) bit/s of this interval. A
    /// stream the far end added since the last sample gets zeros for the samples before it, so
    /// that every series has a sample at the same times.
    fn sample(&mut self) -> (f64, f64) {
        let now = Instant::now();
        let dt = now.duration_since(self.last_sample).as_secs_f64();
        self.last_sample = now;
        let t = now.duration_since(self.epoch).as_secs_f64();
        let (mut down, mut up) = (0.0, 0.0);
        // Only the load phase has goodput: a far end's counters after the stop are not the link's.
        let Some(load) = self.opened.load.as_ref().filter(|_| self.load_running) else {
            return (down, up);
        };
        let bytes = load.bytes();
        if bytes.len() > self.series.len() {
            let earlier: Vec<f64> = self
                .series
                .first()
                .map(|s| s.samples.iter().map(|x| x.t).collect())
                .unwrap_or_default();
            for info in load.streams().into_iter().skip(self.series.len()) {
                self.series.push(StreamSeries {
                    name: info.name,
                    direction: info.direction,
                    dscp: info.dscp,
                    samples: earlier
                        .iter()
                        .map(|&t| ThroughputSample { t, bps: 0.0 })
                        .collect(),
                    total_bytes: 0,
                });
                self.last_bytes.push(0);
            }
        }
        for (i, &b) in bytes.iter().enumerate().take(self.series.len()) {
            let delta = b.saturating_sub(self.last_bytes[i]);
            self.last_bytes[i] = b.max(self.last_bytes[i]);
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

/// irtt's probes: one irtt session per UDP class, for the whole run and a margin.
fn irtt_probes(
    plan: &TestPlan,
    classes: &[ProbePlan],
    server: SocketAddr,
    epoch: Instant,
) -> Result<Box<dyn Probes>, MeasureError> {
    let total = plan.idle_before + plan.load + plan.idle_after;
    Ok(Box::new(Prober::start_irtt(
        classes,
        server,
        plan.probe_interval,
        epoch,
        total,
        plan.connect_timeout,
    )?))
}

/// iperf3's load, for the load phase.
fn iperf3_load(plan: &TestPlan, server: SocketAddr) -> Result<Box<dyn Load>, MeasureError> {
    Ok(Box::new(crate::iperf3::Iperf3Load::new(
        server,
        &plan.profile.streams,
        plan.load,
        plan.connect_timeout,
    )?))
}

/// What a web server far end gives: its load and its probes (crate::http's `FarEnd`).
#[cfg(not(feature = "http"))]
type WebFarEnd = (Box<dyn Load>, Box<dyn Probes>);

/// A build without the feature `http` (a router's small build, docs/install.md) has no web
/// server far end: it says so before anything runs.
#[cfg(not(feature = "http"))]
fn http_open(_: &TestPlan, end: &Endpoint, _: Instant) -> Result<WebFarEnd, MeasureError> {
    Err(MeasureError::InvalidArgument(format!(
        "{}: this unbloat was built without web server far ends (the feature `http`, left out \
         of a router's small build): use unbloat://, irtt:// or iperf3://, or a full build",
        end.host()
    )))
}

/// A web server's load and probes, one session for both: the endpoints from the URLs given or
/// from the server's config, checked by one small GET before the run.
#[cfg(feature = "http")]
fn http_open(
    plan: &TestPlan,
    end: &Endpoint,
    epoch: Instant,
) -> Result<crate::http::FarEnd, MeasureError> {
    use crate::http::{HttpOptions, HttpTarget};
    let Endpoint::Http { config_url, .. } = end else {
        return Err(MeasureError::InvalidArgument("not a web server".into()));
    };
    let choice = &plan.far_ends.http;
    let defaults = HttpOptions::default();
    let opts = HttpOptions {
        ca_file: choice.ca_file.clone(),
        max_connections: choice.max_connections.unwrap_or(defaults.max_connections),
        connect_timeout: plan.connect_timeout,
        probe_interval: plan.probe_interval,
        ..defaults
    };
    let target = match &choice.urls {
        Some([small, large, upload]) => {
            let target = HttpTarget::from_urls(small, large, upload)?;
            // The load goes to the host the user named as the server, and nowhere else.
            if target.small.host() != end.host() {
                return Err(MeasureError::InvalidArgument(format!(
                    "--small-url {small}: not on {}, the server named",
                    end.host()
                )));
            }
            target
        }
        None => crate::http::discover(config_url, &opts)?,
    };
    crate::http::open(&target, &plan.profile.streams, &opts, epoch)
}
