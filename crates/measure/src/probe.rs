//! Latency probes: UDP to the server's responder and ICMP echo, sent on a fixed schedule.
//!
//! What callers can rely on:
//! - Each class sends at `interval` on absolute deadlines (`start + k * interval`, classes
//!   staggered evenly), never sleep-after-send, so a slow send does not shift later probes; how
//!   late each probe left is recorded as its send lag.
//! - Every probe sent appears in the results, answered or not (`rtt_ms: None` = lost), in send
//!   order. A reply is matched by test id, class and sequence, and must echo the send stamp, so
//!   stray or stale datagrams are ignored.
//! - One-way delays come from relating the two clocks on the fastest idle-baseline round trip
//!   ([`relate_clocks`]); without idle replies they stay `None`.
//! - ICMP uses an unprivileged ICMP socket (`SOCK_DGRAM`, allowed by
//!   `net.ipv4.ping_group_range`) when it can, a raw socket otherwise (root); when neither is
//!   possible the class is skipped with a note, never an error.
//!
//! - A UDP probe's round trip leaves out the time the server held it (between its receive and
//!   send stamps), as irtt's does: the server's scheduling is not the path's delay.
//! - The UDP far end is `unbloat serve`'s responder ([`Prober::start`]) or a stock irtt server
//!   ([`Prober::start_irtt`], one irtt session per UDP class, see [`crate::irtt`]); the results
//!   are the same either way. Against irtt, a reply is matched by the session's token and the
//!   sequence number, and a class whose sender stalled skips the probes it missed rather than
//!   send more than 5 at once, which the server would drop as too fast (sconn.go).
//!
//! Threads: one sender for all classes, one receiver per socket. Receive times are the kernel's
//! arrival stamps (see [`unbloat_icmp::rxtime`]), so a receiver that waited for a CPU does not add its
//! wait to the round trip.

use crate::atomic64::AtomicU64;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use unbloat_icmp::echo::{IcmpSocket, ICMP_HEADER, ICMP_PAYLOAD};
use unbloat_icmp::rxtime;
use unbloat_icmp::timestamp::{self, TimestampSocket};
use unbloat_report::model::Hop;
use unbloat_report::{ProbeKind, ProbeSample, ProbeSeries};

use crate::irtt::{self, packet::MAX_ECHO_LEN, session::SERVER_PACKET_BURST};
use crate::profile::ProbePlan;
use crate::protocol::{ProbeReply, ProbeRequest, PROBE_MAX_LEN};
use crate::{sockopt, MeasureError};

/// The gateway's probe class, as results and tables name it.
pub const GATEWAY_PROBE: &str = "gateway ICMP";

/// One probe as sent and (maybe) answered. Times are ns since the run's epoch (client clock),
/// server stamps on the server's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Record {
    pub deadline_ns: u64,
    pub sent_ns: u64,
    pub recv_ns: Option<u64>,
    pub server_recv_ns: Option<u64>,
    pub server_send_ns: Option<u64>,
}

impl Record {
    /// Receive minus send, less the server's holding time when it stamped both. The stamps come
    /// from the peer: a hold longer than the round trip itself (a broken or lying server) is
    /// ignored, rather than allowed to make the round trip zero.
    fn rtt_ns(&self) -> Option<u64> {
        let round_trip = self.recv_ns?.saturating_sub(self.sent_ns);
        let hold = match (self.server_recv_ns, self.server_send_ns) {
            (Some(r), Some(s)) => s.checked_sub(r).filter(|&h| h <= round_trip),
            _ => None,
        };
        Some(round_trip - hold.unwrap_or(0))
    }
}

struct Class {
    plan: ProbePlan,
    records: Mutex<Vec<Record>>,
    replies: AtomicU64,
    /// Probes not sent: an irtt class skips those a stalled sender missed.
    skipped: AtomicU64,
    /// ICMP timestamps: the replies carry the host's own stamps, related to ours per class.
    stamped: bool,
}

/// How a UDP class reaches its far end.
enum UdpEnd {
    /// `unbloat serve`'s responder.
    Unbloat(UdpSocket),
    /// A stock irtt server, the session open.
    Irtt(UdpSocket, Arc<irtt::Session>),
}

enum Sender {
    Udp(Arc<UdpSocket>),
    Irtt(Arc<UdpSocket>, Arc<irtt::Session>),
    Icmp(Arc<IcmpSocket>),
    /// ICMP timestamp requests, with the Unix time of the run's epoch in ns (the originate
    /// stamp is the send time in ms since midnight UT).
    IcmpTs(Arc<TimestampSocket>, u64),
}

/// What a UDP receiver made of one datagram.
struct Answer {
    seq: u32,
    /// The send stamp the reply echoes (unbloat's), checked against the record.
    echoed_send_ns: Option<u64>,
    /// The server's receive and send stamps, on its clock.
    server: Option<(u64, u64)>,
}

/// A running set of probe classes.
pub struct Prober {
    classes: Vec<Arc<Class>>,
    interval: Duration,
    stop_send: Arc<AtomicBool>,
    stop_recv: Arc<AtomicBool>,
    sender: Option<JoinHandle<()>>,
    receivers: Vec<JoinHandle<()>>,
    latest_rtt_us: Arc<AtomicU64>,
    /// The irtt sessions to close at the end, with their class's name.
    irtt: Vec<(Arc<UdpSocket>, Arc<irtt::Session>, String)>,
    /// Remarks for the results' metadata (e.g. ICMP skipped and why).
    pub notes: Vec<String>,
    /// Whose answers these are: the far end's, or the gateway's ([`Prober::start_gateway`]).
    hop: Hop,
}

fn now_ns(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Prober {
    /// A prober with no class and no thread yet: the threads each launch starts are added to it,
    /// so that an early return's Drop stops them.
    fn idle(interval: Duration, notes: Vec<String>, hop: Hop) -> Prober {
        Prober {
            classes: Vec::new(),
            interval,
            stop_send: Arc::new(AtomicBool::new(false)),
            stop_recv: Arc::new(AtomicBool::new(false)),
            sender: None,
            receivers: Vec::new(),
            latest_rtt_us: Arc::new(AtomicU64::new(0)),
            irtt: Vec::new(),
            notes,
            hop,
        }
    }

    /// Opens a socket per class and starts probing `server` (UDP classes go to `udp_target`,
    /// ICMP to its address) at `interval`, times relative to `epoch`.
    pub fn start(
        plans: &[ProbePlan],
        udp_target: SocketAddr,
        test_id: u64,
        interval: Duration,
        epoch: Instant,
    ) -> Result<Prober, MeasureError> {
        check_kinds(plans)?;
        let udp = udp_plans(plans)
            .map(|plan| udp_socket(udp_target, plan.dscp).map(UdpEnd::Unbloat))
            .collect::<Result<Vec<_>, _>>()?;
        launch(
            plans,
            udp_target.ip(),
            udp,
            test_id,
            interval,
            epoch,
            Vec::new(),
        )
    }

    /// Like [`Prober::start`], with a stock irtt server as the UDP far end: one irtt session per
    /// UDP class (each with its class's DSCP), opened within `open_timeout` each, asking for
    /// `session` (how long the probes will run) and a margin. ICMP goes to the server's address
    /// as always. Every class probes at the slowest interval a session granted (a server's
    /// `-i` may raise it), noted in [`Prober::notes`] with what else the server granted.
    ///
    /// Errors: the server never answered, refused a parameter, demands an HMAC key or answered
    /// something else ([`MeasureError::FarEnd`]); it is unreachable. Sessions already open are
    /// closed then.
    pub fn start_irtt(
        plans: &[ProbePlan],
        server: SocketAddr,
        interval: Duration,
        epoch: Instant,
        session: Duration,
        open_timeout: Duration,
    ) -> Result<Prober, MeasureError> {
        check_kinds(plans)?;
        let mut opened: Vec<(UdpSocket, Arc<irtt::Session>)> = Vec::new();
        for plan in udp_plans(plans) {
            let ask = irtt::Ask {
                session,
                interval,
                dscp: plan.dscp,
            };
            let one = udp_socket(server, plan.dscp).and_then(|sock| {
                let s = irtt::Session::open(&sock, server, &ask, open_timeout)?;
                Ok((sock, Arc::new(s)))
            });
            match one {
                Ok(pair) => opened.push(pair),
                Err(e) => {
                    for (sock, s) in &opened {
                        s.close(sock);
                    }
                    return Err(e);
                }
            }
        }
        // One interval for every class, so that their series stay comparable.
        let granted = opened
            .iter()
            .map(|(_, s)| s.interval)
            .fold(interval, Duration::max);
        let names = udp_plans(plans).map(|p| p.name.as_str());
        let classes: Vec<_> = names.zip(opened.iter().map(|(_, s)| &**s)).collect();
        let notes = irtt::session::notes(server, &classes, interval, granted);
        let udp = opened
            .into_iter()
            .map(|(sock, s)| UdpEnd::Irtt(sock, s))
            .collect();
        launch(plans, server.ip(), udp, icmp_id(), granted, epoch, notes)
    }

    /// ICMP echo to this machine's gateway, beside the far end's probes at the same interval:
    /// the first hop's delay, which `unbloat_report::locate` sets against the far end's. Its
    /// own id, so its replies are never taken for the far end's ICMP class.
    pub fn start_gateway(
        gateway: IpAddr,
        interval: Duration,
        epoch: Instant,
    ) -> Result<Prober, MeasureError> {
        let plan = ProbePlan {
            name: GATEWAY_PROBE.into(),
            kind: ProbeKind::Icmp,
            dscp: 0,
        };
        let no_stamps = match gateway {
            IpAddr::V4(v4) => match TimestampSocket::open(v4) {
                Ok(sock) => return launch_stamped(plan, sock, interval, epoch),
                Err(why) => why,
            },
            IpAddr::V6(_) => "ICMPv6 has no timestamps".into(),
        };
        let mut prober = launch(&[plan], gateway, vec![], icmp_id(), interval, epoch, vec![])?;
        if prober.classes.is_empty() {
            let why = prober.notes.join("; ");
            return Err(MeasureError::InvalidArgument(why));
        }
        prober.notes.push(format!(
            "locate: the gateway's one-way delays need ICMP timestamps ({no_stamps}): its round trip only"
        ));
        prober.hop = Hop::Gateway;
        Ok(prober)
    }

    /// The latest round trip of the primary class (the first UDP one), for progress display.
    pub fn latest_rtt_ms(&self) -> Option<f64> {
        match self.latest_rtt_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(us as f64 / 1000.0),
        }
    }

    /// Probes sent and answered so far for each kind: (sent, answered).
    pub fn counts(&self, kind: ProbeKind) -> (usize, u64) {
        self.classes
            .iter()
            .filter(|c| c.plan.kind == kind)
            .fold((0, 0), |(s, a), c| {
                (
                    s + lock(&c.records).len(),
                    a + c.replies.load(Ordering::Relaxed),
                )
            })
    }

    /// Total replies over all classes (to notice a dead link).
    pub fn replies(&self) -> u64 {
        self.classes
            .iter()
            .map(|c| c.replies.load(Ordering::Relaxed))
            .sum()
    }

    /// Stops sending; the replies on their way are still received until [`Prober::finish`].
    pub fn stop_sending(&self) {
        self.stop_send.store(true, Ordering::Relaxed);
    }

    /// Sends each irtt session's close request (once).
    fn close_irtt(&mut self) {
        for (sock, session, _) in self.irtt.drain(..) {
            session.close(&sock);
        }
    }

    /// Stops sending, waits `grace` for late replies, stops receiving, closes the irtt sessions
    /// and returns every class's series. One-way delays use the clock relation from probes sent before `idle_end_ns`.
    pub fn finish(mut self, grace: Duration, idle_end_ns: u64) -> Vec<ProbeSeries> {
        self.stop_send.store(true, Ordering::Relaxed);
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        thread::sleep(grace);
        self.stop_recv.store(true, Ordering::Relaxed);
        for h in self.receivers.drain(..) {
            let _ = h.join();
        }
        self.close_irtt();
        let idle_offset = |c: &Class| {
            let idle: Vec<Record> = lock(&c.records)
                .iter()
                .filter(|r| r.sent_ns < idle_end_ns)
                .copied()
                .collect();
            relate_clocks(&idle)
        };
        let udp_records: Vec<Record> = self
            .classes
            .iter()
            .filter(|c| c.plan.kind == ProbeKind::Udp)
            .flat_map(|c| lock(&c.records).clone())
            .filter(|r| r.sent_ns < idle_end_ns)
            .collect();
        let offset = relate_clocks(&udp_records);
        let interval_ms = self.interval.as_secs_f64() * 1000.0;
        self.classes
            .iter()
            .map(|c| {
                // Before the records' lock: idle_offset takes it too.
                let use_offset = if c.stamped {
                    idle_offset(c)
                } else if c.plan.kind == ProbeKind::Udp {
                    offset
                } else {
                    None
                };
                let records = lock(&c.records);
                ProbeSeries {
                    name: c.plan.name.clone(),
                    kind: c.plan.kind,
                    dscp: c.plan.dscp,
                    interval_ms,
                    hop: self.hop,
                    samples: records.iter().map(|r| to_sample(r, use_offset)).collect(),
                }
            })
            .collect()
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop_send.store(true, Ordering::Relaxed);
        self.stop_recv.store(true, Ordering::Relaxed);
        self.close_irtt();
    }
}

impl crate::farend::Probes for Prober {
    fn counts(&self, kind: ProbeKind) -> (usize, u64) {
        Prober::counts(self, kind)
    }
    fn replies(&self) -> u64 {
        Prober::replies(self)
    }
    fn latest_rtt_ms(&self) -> Option<f64> {
        Prober::latest_rtt_ms(self)
    }
    fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        // Known only as the run goes: a server's -d limit ending a session early, stalls.
        notes.extend(
            self.irtt
                .iter()
                .filter_map(|(_, s, name)| s.early_end(name)),
        );
        for c in &self.classes {
            let skipped = c.skipped.load(Ordering::Relaxed);
            if skipped > 0 {
                notes.push(format!(
                    "{}: {skipped} probes not sent: the sender stalled for over {} intervals, \
                     and an irtt server drops more than {SERVER_PACKET_BURST} late ones at once",
                    c.plan.name,
                    SERVER_PACKET_BURST - 1
                ));
            }
        }
        notes
    }
    fn finish(self: Box<Self>, grace: Duration, idle_end_ns: u64) -> Vec<ProbeSeries> {
        Prober::finish(*self, grace, idle_end_ns)
    }
}

fn check_kinds(plans: &[ProbePlan]) -> Result<(), MeasureError> {
    match plans
        .iter()
        .find(|p| !matches!(p.kind, ProbeKind::Udp | ProbeKind::Icmp))
    {
        // A web server's probes are the HTTP far end's, never this prober's.
        Some(p) => Err(MeasureError::InvalidArgument(format!(
            "{:?} probes need a web server far end",
            p.kind
        ))),
        None => Ok(()),
    }
}

fn udp_plans(plans: &[ProbePlan]) -> impl Iterator<Item = &ProbePlan> {
    plans.iter().filter(|p| p.kind == ProbeKind::Udp)
}

/// The ICMP classes' id against irtt (which has no test id of its own): any value unlikely to
/// be another run's on this host.
fn icmp_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}

/// Opens a receiver per socket and the sender; the sockets are ready (irtt sessions open).
fn launch(
    plans: &[ProbePlan],
    icmp_target: IpAddr,
    udp: Vec<UdpEnd>,
    test_id: u64,
    interval: Duration,
    epoch: Instant,
    notes: Vec<String>,
) -> Result<Prober, MeasureError> {
    // Built first, so that on an early return its Drop stops the threads already started and
    // closes the irtt sessions.
    let mut prober = Prober::idle(interval, notes, Hop::FarEnd);
    let mut senders = Vec::new();
    let mut udp = udp.into_iter();
    let primary = plans
        .iter()
        .position(|p| p.kind == ProbeKind::Udp)
        .unwrap_or(0);
    for (id, plan) in plans.iter().enumerate() {
        let class = Arc::new(Class {
            plan: plan.clone(),
            records: Mutex::new(Vec::new()),
            replies: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            stamped: false,
        });
        let latest = (id == primary).then(|| Arc::clone(&prober.latest_rtt_us));
        let stop = Arc::clone(&prober.stop_recv);
        let c = Arc::clone(&class);
        let end = if plan.kind == ProbeKind::Udp {
            udp.next()
        } else {
            None
        };
        let sender = match (plan.kind, end) {
            (ProbeKind::Udp, Some(UdpEnd::Unbloat(sock))) => {
                let sock = Arc::new(sock);
                let rx = Arc::clone(&sock);
                let class_id = id as u8;
                let parse = move |data: &[u8]| {
                    let reply = ProbeReply::decode(data).ok()?;
                    let req = reply.request;
                    (req.test_id == test_id && req.class == class_id).then_some(Answer {
                        seq: req.seq,
                        echoed_send_ns: Some(req.client_send_ns),
                        server: Some((reply.server_recv_ns, reply.server_send_ns)),
                    })
                };
                prober.receivers.push(spawn("unbloat-probe-rx", move || {
                    udp_receiver(&rx, &c, epoch, &stop, latest.as_deref(), parse)
                })?);
                Sender::Udp(sock)
            }
            (ProbeKind::Udp, Some(UdpEnd::Irtt(sock, session))) => {
                let sock = Arc::new(sock);
                prober
                    .irtt
                    .push((Arc::clone(&sock), Arc::clone(&session), plan.name.clone()));
                let (rx, s) = (Arc::clone(&sock), Arc::clone(&session));
                let parse = move |data: &[u8]| {
                    let echo = s.reply(data, &rx)?;
                    Some(Answer {
                        seq: echo.seq,
                        echoed_send_ns: None,
                        server: echo.server,
                    })
                };
                let rx = Arc::clone(&sock);
                prober.receivers.push(spawn("unbloat-irtt-rx", move || {
                    udp_receiver(&rx, &c, epoch, &stop, latest.as_deref(), parse)
                })?);
                Sender::Irtt(sock, session)
            }
            (ProbeKind::Icmp, _) => match IcmpSocket::open(icmp_target, plan.dscp) {
                Ok(sock) => {
                    if sock.raw {
                        prober.notes.push(
                            "ICMP: unprivileged ICMP sockets are not allowed here \
                             (net.ipv4.ping_group_range); used a raw socket"
                                .into(),
                        );
                    }
                    let sock = Arc::new(sock);
                    let rx = Arc::clone(&sock);
                    prober.receivers.push(spawn("unbloat-icmp-rx", move || {
                        icmp_receiver(&rx, &c, test_id, epoch, &stop, latest.as_deref())
                    })?);
                    Sender::Icmp(sock)
                }
                Err(why) => {
                    prober.notes.push(format!("ICMP probes skipped: {why}"));
                    continue;
                }
            },
            (kind, _) => {
                return Err(MeasureError::InvalidArgument(format!(
                    "no far end for the {kind:?} probes"
                )))
            }
        };
        senders.push((Arc::clone(&class), sender));
        prober.classes.push(class);
    }
    let stop = Arc::clone(&prober.stop_send);
    prober.sender = Some(spawn("unbloat-probe-tx", move || {
        send_loop(&senders, test_id, interval, epoch, &stop)
    })?);
    Ok(prober)
}

/// The gateway's prober on ICMP timestamps: one class, its receiver and its sender.
fn launch_stamped(
    plan: ProbePlan,
    sock: TimestampSocket,
    interval: Duration,
    epoch: Instant,
) -> Result<Prober, MeasureError> {
    let mut prober = Prober::idle(interval, vec![], Hop::Gateway);
    let class = Arc::new(Class {
        plan,
        records: Mutex::new(Vec::new()),
        replies: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
        stamped: true,
    });
    let epoch_unix_ns = unix_ns_at(epoch);
    let sock = Arc::new(sock);
    let (rx, c, stop) = (
        Arc::clone(&sock),
        Arc::clone(&class),
        Arc::clone(&prober.stop_recv),
    );
    prober.receivers.push(spawn("unbloat-gw-rx", move || {
        stamp_receiver(&rx, &c, epoch, epoch_unix_ns, &stop)
    })?);
    let senders = vec![(Arc::clone(&class), Sender::IcmpTs(sock, epoch_unix_ns))];
    prober.classes.push(class);
    let stop = Arc::clone(&prober.stop_send);
    prober.sender = Some(spawn("unbloat-gw-tx", move || {
        send_loop(&senders, 0, interval, epoch, &stop)
    })?);
    Ok(prober)
}

/// The Unix time of `epoch`, ns.
fn unix_ns_at(epoch: Instant) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now.saturating_sub(epoch.elapsed().as_nanos() as u64)
}

/// The originate stamp of a probe sent `sent_ns` after the epoch: ms since midnight UT.
fn originate(epoch_unix_ns: u64, sent_ns: u64) -> u32 {
    timestamp::ms_of_day((epoch_unix_ns + sent_ns) / 1_000_000)
}

/// Reads the gateway's timestamp replies until `stop`: each answers the latest probe with its
/// 16-bit sequence whose originate it echoes; the host's stamps become the record's server
/// times (ns on the Unix clock, the day found from our send time).
fn stamp_receiver(
    sock: &TimestampSocket,
    class: &Class,
    epoch: Instant,
    epoch_unix_ns: u64,
    stop: &AtomicBool,
) {
    raise_priority();
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let Ok(got) = sock.recv(&mut buf) else {
            continue;
        };
        let recv_ns = got.since(epoch).as_nanos() as u64;
        let Some(st) = sock.parse(&buf[..got.len]) else {
            continue;
        };
        let found = {
            let records = lock(&class.records);
            (0..records.len())
                .rev()
                .filter(|k| *k as u16 == st.seq)
                .find(|k| originate(epoch_unix_ns, records[*k].sent_ns) == st.originate)
                .map(|k| (k, records[k].sent_ns))
        };
        let Some((seq, sent_ns)) = found else {
            continue;
        };
        let sent_unix_ms = (epoch_unix_ns + sent_ns) / 1_000_000;
        let at = |stamp: u32| timestamp::to_unix_ms(stamp, sent_unix_ms) * 1_000_000;
        let server = st.receive.zip(st.transmit).map(|(r, t)| (at(r), at(t)));
        note_reply(class, seq as u32, recv_ns, None, server, None);
    }
}

fn spawn<F: FnOnce() + Send + 'static>(name: &str, f: F) -> Result<JoinHandle<()>, MeasureError> {
    thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| MeasureError::io("starting a probe thread", e))
}

/// The offset `server clock - client clock` in ns, from the probe whose round trip minus the
/// server's holding time is smallest: on that one, queues were emptiest and the path is taken
/// to be symmetric, so each way took half (crusader's method). `None` without a usable reply.
pub fn relate_clocks(records: &[Record]) -> Option<i128> {
    records
        .iter()
        .filter_map(|r| {
            let (recv, s_recv, s_send) = (r.recv_ns?, r.server_recv_ns?, r.server_send_ns?);
            let hold = i128::from(s_send) - i128::from(s_recv);
            let path = i128::from(recv) - i128::from(r.sent_ns) - hold;
            (path >= 0).then_some((path, r))
        })
        .min_by_key(|(path, _)| *path)
        .and_then(|(path, r)| {
            Some(i128::from(r.server_recv_ns?) - i128::from(r.sent_ns) - path / 2)
        })
}

/// A record as a results sample; one-way delays when `offset` relates the clocks.
pub fn to_sample(r: &Record, offset: Option<i128>) -> ProbeSample {
    let ms = |ns: i128| ns as f64 / 1e6;
    let owd = |r: &Record| -> Option<(f64, f64)> {
        let off = offset?;
        let up = i128::from(r.server_recv_ns?) - off - i128::from(r.sent_ns);
        let down = i128::from(r.recv_ns?) - (i128::from(r.server_send_ns?) - off);
        Some((ms(up), ms(down)))
    };
    let (owd_up_ms, owd_down_ms) = match owd(r) {
        Some((u, d)) => (Some(u), Some(d)),
        None => (None, None),
    };
    ProbeSample {
        t: r.sent_ns as f64 / 1e9,
        rtt_ms: r.rtt_ns().map(|ns| ns as f64 / 1e6),
        owd_up_ms,
        owd_down_ms,
        send_lag_ms: ms(i128::from(r.sent_ns) - i128::from(r.deadline_ns)).max(0.0),
    }
}

fn udp_socket(target: SocketAddr, dscp: u8) -> Result<UdpSocket, MeasureError> {
    let bind: SocketAddr = if target.is_ipv6() {
        "[::]:0".parse()
    } else {
        "0.0.0.0:0".parse()
    }
    .map_err(|_| MeasureError::InvalidArgument("bind address".into()))?;
    let sock =
        UdpSocket::bind(bind).map_err(|e| MeasureError::io("opening a UDP probe socket", e))?;
    sock.connect(target)
        .map_err(|e| MeasureError::io(format!("UDP probes to {target}"), e))?;
    sockopt::set_dscp(&sock, dscp, target.is_ipv6())
        .map_err(|e| MeasureError::io("marking UDP probes with DSCP", e))?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| MeasureError::io("UDP probe socket", e))?;
    // Without kernel stamps the receive times are user space's, as rxtime documents.
    let _ = rxtime::enable(&sock);
    Ok(sock)
}

/// Sends every class on its own absolute schedule until `stop`.
fn send_loop(
    senders: &[(Arc<Class>, Sender)],
    test_id: u64,
    interval: Duration,
    epoch: Instant,
    stop: &AtomicBool,
) {
    if senders.is_empty() {
        return;
    }
    raise_priority();
    let interval_ns = interval.as_nanos() as u64;
    let start = now_ns(epoch);
    let k = senders.len() as u64;
    // Stagger the classes evenly so their probes do not leave in a burst.
    let mut next: Vec<u64> = (0..k).map(|i| start + i * interval_ns / k).collect();
    let mut buf = [0u8; PROBE_MAX_LEN];
    let mut irtt_buf = [0u8; MAX_ECHO_LEN];
    // After a stall, an irtt class sends at most this many late probes at once; the server's
    // bucket holds SERVER_PACKET_BURST, and it drops the rest as too fast (sconn.go).
    let irtt_late_ns = u64::from(SERVER_PACKET_BURST - 1) * interval_ns;
    while !stop.load(Ordering::Relaxed) {
        let (i, &deadline) = match next.iter().enumerate().min_by_key(|(_, d)| **d) {
            Some(x) => x,
            None => return,
        };
        // Sleep in slices so a stop is noticed within 50 ms even at 1 probe per second.
        loop {
            let now = now_ns(epoch);
            if now >= deadline || stop.load(Ordering::Relaxed) {
                break;
            }
            thread::sleep(Duration::from_nanos((deadline - now).min(50_000_000)));
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let (class, sender) = &senders[i];
        let behind = now_ns(epoch).saturating_sub(deadline);
        if matches!(sender, Sender::Irtt(..)) && behind > irtt_late_ns && interval_ns > 0 {
            // Skip to the latest slot that is due; the ones skipped were never sent.
            let missed = behind / interval_ns;
            class.skipped.fetch_add(missed, Ordering::Relaxed);
            next[i] += missed * interval_ns;
            continue;
        }
        let mut records = lock(&class.records);
        let seq = records.len() as u32;
        let sent_ns = now_ns(epoch);
        records.push(Record {
            deadline_ns: deadline,
            sent_ns,
            ..Record::default()
        });
        drop(records);
        // A failed send (no route right now) is a lost probe, recorded as such.
        match sender {
            Sender::Udp(sock) => {
                let req = ProbeRequest {
                    class: i as u8,
                    dscp: class.plan.dscp,
                    test_id,
                    seq,
                    client_send_ns: sent_ns,
                };
                let n = req.encode_into(&mut buf);
                let _ = sock.send(&buf[..n]);
            }
            Sender::Irtt(sock, session) => {
                let n = session.request(seq, &mut irtt_buf);
                let _ = sock.send(&irtt_buf[..n]);
            }
            Sender::Icmp(sock) => {
                let _ = sock.send_echo(test_id, seq);
            }
            Sender::IcmpTs(sock, epoch_unix_ns) => {
                let _ = sock.send(seq as u16, originate(*epoch_unix_ns, sent_ns));
            }
        }
        next[i] += interval_ns;
    }
}

/// Asks the scheduler to prefer this thread (nice -10) so probes keep their schedule while the
/// load streams keep the CPUs busy. Needs root or CAP_SYS_NICE; without them nothing changes.
fn raise_priority() {
    // SAFETY: gettid and setpriority have no memory-safety preconditions; a failure is ignored.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, -10);
    }
}

fn note_reply(
    class: &Class,
    seq: u32,
    recv_ns: u64,
    echoed_send_ns: Option<u64>,
    server: Option<(u64, u64)>,
    latest: Option<&AtomicU64>,
) {
    let mut records = lock(&class.records);
    let Some(r) = records.get_mut(seq as usize) else {
        return;
    };
    if r.recv_ns.is_some() {
        return; // a duplicate
    }
    if echoed_send_ns.is_some_and(|echoed| echoed != r.sent_ns) {
        return; // stale or forged
    }
    if let Some((s_recv, s_send)) = server {
        r.server_recv_ns = Some(s_recv);
        r.server_send_ns = Some(s_send);
    }
    r.recv_ns = Some(recv_ns);
    class.replies.fetch_add(1, Ordering::Relaxed);
    if let (Some(l), Some(rtt)) = (latest, r.rtt_ns()) {
        l.store((rtt / 1000).max(1), Ordering::Relaxed);
    }
}

/// Reads one UDP class's replies until `stop`; `parse` says which probe a datagram answers.
fn udp_receiver(
    sock: &UdpSocket,
    class: &Class,
    epoch: Instant,
    stop: &AtomicBool,
    latest: Option<&AtomicU64>,
    parse: impl Fn(&[u8]) -> Option<Answer>,
) {
    raise_priority();
    let mut buf = [0u8; PROBE_MAX_LEN + 1];
    while !stop.load(Ordering::Relaxed) {
        let got = match rxtime::recv(sock, &mut buf) {
            Ok(got) => got,
            Err(_) => continue,
        };
        let recv_ns = got.since(epoch).as_nanos() as u64;
        if let Some(a) = parse(&buf[..got.len]) {
            note_reply(class, a.seq, recv_ns, a.echoed_send_ns, a.server, latest);
        }
    }
}

/// The IPv4 size of one probe of `kind`, header included; its reply is the same size. What a
/// probe costs on the link (the lab subtracts it from the goodput a link could carry).
pub const fn ipv4_probe_bytes(kind: ProbeKind) -> u64 {
    let payload = match kind {
        ProbeKind::Udp => 8 + crate::protocol::PROBE_REQUEST_LEN,
        ProbeKind::Icmp => ICMP_HEADER + ICMP_PAYLOAD,
        // A SYN with its options; the HTTP probes' sizes vary, these are a typical request's.
        ProbeKind::TcpConnect => 40,
        ProbeKind::TlsHandshake => 20 + 517,
        ProbeKind::HttpNew | ProbeKind::HttpLoaded => 20 + 200,
    };
    20 + payload as u64
}

fn icmp_receiver(
    sock: &IcmpSocket,
    class: &Class,
    test_id: u64,
    epoch: Instant,
    stop: &AtomicBool,
    latest: Option<&AtomicU64>,
) {
    raise_priority();
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let got = match sock.recv(&mut buf) {
            Ok(got) => got,
            Err(_) => continue,
        };
        let recv_ns = got.since(epoch).as_nanos() as u64;
        if let Some((seq, _)) = sock.parse_reply(&buf[..got.len], test_id) {
            note_reply(class, seq, recv_ns, None, None, latest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(sent: u64, up: u64, hold: u64, down: u64, offset: u64) -> Record {
        Record {
            deadline_ns: sent,
            sent_ns: sent,
            recv_ns: Some(sent + up + hold + down),
            server_recv_ns: Some(sent + up + offset),
            server_send_ns: Some(sent + up + hold + offset),
        }
    }

    #[test]
    fn clocks_are_related_on_the_fastest_round_trip() {
        let offset = 5_000_000_000u64;
        // Symmetric 10 ms paths on the fastest probe; queueing on the others.
        let records = [
            answered(0, 10_000_000, 50_000, 10_000_000, offset),
            answered(200_000_000, 30_000_000, 50_000, 10_000_000, offset),
            answered(400_000_000, 10_000_000, 40_000, 25_000_000, offset),
        ];
        let est = relate_clocks(&records).expect("relates");
        assert_eq!(est, i128::from(offset));
        let s = to_sample(&records[1], Some(est));
        assert!((s.owd_up_ms.expect("up") - 30.0).abs() < 1e-9, "{s:?}");
        assert!((s.owd_down_ms.expect("down") - 10.0).abs() < 1e-9, "{s:?}");
        // The 50 us the server held it are not the path's.
        assert!((s.rtt_ms.expect("rtt") - 40.0).abs() < 1e-9);
    }

    #[test]
    fn a_server_that_held_a_probe_does_not_lengthen_its_round_trip() {
        // 10 ms each way; the server's thread waited 80 ms for a CPU before answering.
        let held = answered(0, 10_000_000, 80_000_000, 10_000_000, 7);
        assert_eq!(held.rtt_ns(), Some(20_000_000));
        // ICMP has no server stamps: the round trip is receive minus send.
        let icmp = Record {
            recv_ns: Some(100_000_000),
            sent_ns: 40_000_000,
            ..Record::default()
        };
        assert_eq!(icmp.rtt_ns(), Some(60_000_000));
    }

    #[test]
    fn lost_probes_have_no_rtt_and_no_relation() {
        let lost = Record {
            deadline_ns: 10,
            sent_ns: 1_000_010,
            ..Record::default()
        };
        assert_eq!(relate_clocks(&[lost]), None);
        let s = to_sample(&lost, Some(0));
        assert_eq!((s.rtt_ms, s.owd_up_ms, s.owd_down_ms), (None, None, None));
        assert!((s.send_lag_ms - 1.0).abs() < 1e-9);
    }
}
