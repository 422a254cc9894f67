//! `unbloat serve`: the far end of a test.
//!
//! What callers can rely on:
//! - Bounded: at most [`ServeOptions::max_tests`] tests at once (the next client is told
//!   [`ServerMsg::Busy`]), at most `max_tests_per_client` of them from one client (an IPv4
//!   address or IPv6 /64, see [`crate::serve_policy`]), at most `max_streams` streams and
//!   `max_session` length per test (a request beyond is [`ServerMsg::Refused`] with the limit
//!   in the reason), a cap on open connections, and caps per client and per IPv6 /56 on
//!   connections and tests (issue 53: [`ServeOptions::connection_caps`],
//!   [`serve_policy::tests_per_group`]), so no client or prefix can take the server from the
//!   others. A test's streams and slot end at its
//!   session deadline even if the client vanishes without a word, and its slot is free again
//!   before the client reads the final report (so its next test is not refused).
//! - The DSCP marks of what the server sends are the operator's choice ([`DscpPolicy`]): by
//!   default the standard classes a test needs; a test asking for another is refused.
//! - Hostile or malformed input (bad hello, unknown frames, oversized lengths, silence, UDP
//!   garbage) ends that connection or drops that datagram; the server keeps serving others.
//!   The whole handshake (hello and first frame) must arrive within
//!   [`ServeOptions::handshake_deadline`] of the accept, however the bytes are spaced, so a
//!   silent or dribbling client holds a connection slot for at most that long.
//! - At the connection cap a new connection is closed at once; a client that retries gets in
//!   as soon as a slot frees, at the latest when the handshake deadline ends a hostile hold.
//! - The UDP responder answers only probes of a running test, from the address that opened it,
//!   with a reply exactly as long as the request (never an amplifier), marked with the DSCP the
//!   request says it carried when the policy allows it, best effort otherwise.
//! - One line per test on stderr (when `log` is on): who, what, how much, how it ended.
//!
//! Design: one thread per TCP connection (a test has at most a few dozen) and one UDP thread;
//! plain blocking sockets with timeouts. Timestamps are nanoseconds since the server started;
//! a probe's receive stamp is the kernel's arrival time (see [`unbloat_icmp::rxtime`]).

use crate::atomic64::AtomicU64;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use unbloat_icmp::rxtime;
use unbloat_report::Direction;

use crate::protocol::{
    self, ClientMsg, Deadline, ProbeReply, ProbeRequest, ProtocolError, ServerMsg, StreamSpec,
    TestRequest, MAX_WIRE_STREAMS, PROBE_MAX_LEN, PROTOCOL_VERSION,
};
use crate::serve_policy::{self, DscpPolicy, DEFAULT_MAX_SESSION, DEFAULT_TESTS_PER_CLIENT};
use crate::{parse_duration, sockopt, MeasureError};

/// The port `unbloat serve` listens on by default, TCP and UDP.
pub const DEFAULT_PORT: u16 = 4420;
/// Size of one write or read on a load stream: large, so the load costs few system calls.
pub const BULK_BUFFER: usize = 128 * 1024;
/// A receiving load stream's reader wakes when this much has arrived (or its read times out),
/// not for every packet: at 80 Mbit/s that is about 150 reads a second instead of 7,000, which
/// a single emulated CPU (the lab in User-Mode Linux) otherwise spends all its time on.
pub const BULK_LOWAT: usize = 64 * 1024;
/// How long a connection has, from its accept, to send its hello and its first frame (a test
/// request or a stream attach). One deadline for the whole handshake, not a timeout per read: a
/// client dribbling a byte every few seconds would otherwise hold its connection forever, and a
/// few dozen such clients every connection the server allows. A real client needs two round
/// trips on a link that is idle or carries at most another test's load; 5 s covers that even
/// with seconds of bufferbloat, the thing this program measures.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// The most tests `--max-tests` may allow at once. Each test may hold `max_streams + 1`
/// connections, each a thread: 256 tests of 255 streams is about 66,000 threads, already far
/// beyond what one server host can load; the bound keeps the connection cap's arithmetic exact.
pub const MAX_TESTS_LIMIT: usize = 256;
/// Connections beyond the tests' own (max_tests * (max_streams + 1)): room for clients that are
/// still in their handshake or are about to be told the server is busy.
const SPARE_CONNECTIONS: usize = 16;
/// Connections one client may hold beyond its tests' own: a handshake or two under way.
const SPARE_PER_CLIENT: usize = 4;

/// How a server is bounded and where it listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `None`: `[::]:4420` dual-stack, or `0.0.0.0:4420` where IPv6 is off. Port 0 picks a free
    /// port (the UDP responder then uses the same number).
    pub listen: Option<SocketAddr>,
    /// Tests at once, 1..=[`MAX_TESTS_LIMIT`].
    pub max_tests: usize,
    /// Tests at once from one client (an IPv4 address, an IPv6 /64), 1..=`max_tests`.
    pub max_tests_per_client: usize,
    /// Which DSCP marks the server may put on what it sends.
    pub dscp: DscpPolicy,
    /// Load streams per test, 0..=[`MAX_WIRE_STREAMS`] (0: latency probes only).
    pub max_streams: usize,
    /// The longest session (idle phases included) a client may ask for; not zero.
    pub max_session: Duration,
    /// How long a connection may take, from its accept, to say hello and what it wants: one
    /// deadline for the whole handshake ([`HANDSHAKE_DEADLINE`] by default).
    pub handshake_deadline: Duration,
    /// Write the per-test log lines to stderr.
    pub log: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: None,
            max_tests: 4,
            max_tests_per_client: DEFAULT_TESTS_PER_CLIENT,
            dscp: DscpPolicy::Standard,
            max_streams: 32,
            max_session: DEFAULT_MAX_SESSION,
            handshake_deadline: HANDSHAKE_DEADLINE,
            log: true,
        }
    }
}

/// `unbloat serve`'s options, as the command line gives them (the `unbloat` binary parses them,
/// with [`parse_max_tests`], [`parse_max_streams`] and [`parse_max_duration`], and documents
/// each flag); [`ServeArgs::options`] makes the server's.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// Address and port to listen on (default: every address, port 4420).
    pub listen: Option<SocketAddr>,
    /// How many tests may run at once.
    pub max_tests: usize,
    /// How many of them one client (an IPv4 address, an IPv6 /64) may run at once.
    pub max_tests_per_client: usize,
    /// Which DSCP marks a client may ask for.
    pub dscp: DscpPolicy,
    /// The most load streams one test may open.
    pub max_streams: usize,
    /// The longest test a client may ask for, idle phases included.
    pub max_duration: Duration,
}

/// A count typed on the command line, within `lo..=hi` (the parser names the flag in the error).
fn count_in(text: &str, lo: usize, hi: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number from {lo} to {hi}")),
    }
}

/// `--max-tests` and `--max-tests-per-client`: 1 to [`MAX_TESTS_LIMIT`].
pub fn parse_max_tests(text: &str) -> Result<usize, String> {
    count_in(text, 1, MAX_TESTS_LIMIT)
}

/// `--max-streams`: 0 (latency only) to [`MAX_WIRE_STREAMS`].
pub fn parse_max_streams(text: &str) -> Result<usize, String> {
    count_in(text, 0, MAX_WIRE_STREAMS)
}

/// `--max-duration`: a duration of at least 1 s.
pub fn parse_max_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d < Duration::from_secs(1) => {
            Err("a server that allows no test is no server: give at least 1s".into())
        }
        d => Ok(d),
    }
}

impl ServeOptions {
    /// Why these options cannot make a server, or `None`: the bounds [`ServeArgs`] enforces on
    /// the command line, for callers that build options in code.
    pub fn problem(&self) -> Option<String> {
        if !(1..=MAX_TESTS_LIMIT).contains(&self.max_tests) {
            return Some(format!(
                "max_tests {} is not in 1..={MAX_TESTS_LIMIT}",
                self.max_tests
            ));
        }
        if !(1..=self.max_tests).contains(&self.max_tests_per_client) {
            return Some(format!(
                "max_tests_per_client {} is not in 1..={}",
                self.max_tests_per_client, self.max_tests
            ));
        }
        if self.max_streams > MAX_WIRE_STREAMS {
            return Some(format!(
                "max_streams {} is above {MAX_WIRE_STREAMS}",
                self.max_streams
            ));
        }
        if self.max_session.is_zero() || self.handshake_deadline.is_zero() {
            return Some("max_session and handshake_deadline must be longer than zero".into());
        }
        None
    }

    /// The most connections the server holds at once: every test's control and stream
    /// connections, plus [`SPARE_CONNECTIONS`]. Saturates rather than wraps.
    fn max_connections(&self) -> usize {
        self.max_streams
            .saturating_add(1)
            .saturating_mul(self.max_tests)
            .saturating_add(SPARE_CONNECTIONS)
    }

    /// The connections held at once: in all ([`ServeOptions::max_connections`]); by one client,
    /// its tests' connections and [`SPARE_PER_CLIENT`]; by one IPv6 /56, its tests' and twice
    /// that spare. Issue 53: one address opened 300 slow connections and took every one of the
    /// 148 there were, and a test from another address was reset.
    pub fn connection_caps(&self) -> unbloat_system::clients::Caps {
        let per_test = self.max_streams.saturating_add(1);
        let group_tests = serve_policy::tests_per_group(self.max_tests, self.max_tests_per_client);
        unbloat_system::clients::Caps {
            total: self.max_connections(),
            per_client: per_test
                .saturating_mul(self.max_tests_per_client)
                .saturating_add(SPARE_PER_CLIENT),
            per_group: per_test
                .saturating_mul(group_tests)
                .saturating_add(2 * SPARE_PER_CLIENT),
        }
    }
}

impl ServeArgs {
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            listen: self.listen,
            max_tests: self.max_tests,
            // More per client than in all is all: the flag alone may not make a bad server.
            max_tests_per_client: self.max_tests_per_client.min(self.max_tests),
            dscp: self.dscp,
            max_streams: self.max_streams,
            max_session: self.max_duration,
            ..ServeOptions::default()
        }
    }
}

/// Runs `unbloat serve` with the given arguments until the process is stopped.
pub fn run_serve(args: &ServeArgs) -> Result<(), MeasureError> {
    serve(args.options())
}

/// Binds and serves forever (until the process is stopped).
pub fn serve(opts: ServeOptions) -> Result<(), MeasureError> {
    let (server, addr) = Server::bind(opts)?;
    eprintln!("unbloat serve: listening on {addr} (TCP control and load, UDP probes)");
    server.run_until(&AtomicBool::new(false))
}

/// A bound server, not yet serving.
pub struct Server {
    listener: TcpListener,
    udp: UdpSocket,
    shared: Arc<Shared>,
}

struct Shared {
    opts: ServeOptions,
    epoch: Instant,
    probe_port: u16,
    tests: Mutex<HashMap<u64, Arc<ActiveTest>>>,
    /// Connections held, per client and prefix.
    connections: unbloat_system::clients::Shared,
    stop: AtomicBool,
}

/// A running test, shared by its control connection, its stream connections and the UDP thread.
struct ActiveTest {
    peer: IpAddr,
    streams: Vec<StreamSpec>,
    attached: Mutex<Vec<bool>>,
    bytes: Vec<AtomicU64>,
    probes: AtomicU64,
    deadline: Instant,
    ended: AtomicBool,
}

impl ActiveTest {
    fn over(&self, shared: &Shared) -> bool {
        self.ended.load(Ordering::Relaxed)
            || shared.stop.load(Ordering::Relaxed)
            || Instant::now() >= self.deadline
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking session thread must not take the whole server down with a poisoned lock.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn bind_pair(addr: SocketAddr) -> std::io::Result<(TcpListener, UdpSocket)> {
    let domain = Domain::for_address(addr);
    let dual = matches!(addr.ip(), IpAddr::V6(ip) if ip.is_unspecified());
    let tcp = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    if dual {
        tcp.set_only_v6(false)?;
    }
    tcp.set_reuse_address(true)?;
    tcp.bind(&addr.into())?;
    tcp.listen(128)?;
    let tcp: TcpListener = tcp.into();
    let port = tcp.local_addr()?.port();
    let udp = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if dual {
        udp.set_only_v6(false)?;
    }
    udp.bind(&SocketAddr::new(addr.ip(), port).into())?;
    Ok((tcp, udp.into()))
}

impl Server {
    /// Binds the TCP listener and the UDP responder (same port number) and returns the server
    /// with the address it listens on.
    pub fn bind(opts: ServeOptions) -> Result<(Server, SocketAddr), MeasureError> {
        if let Some(why) = opts.problem() {
            return Err(MeasureError::InvalidArgument(why));
        }
        let (listener, udp) = match opts.listen {
            Some(addr) => {
                // With port 0 the UDP port (taken after TCP's) can collide; retry a few times.
                let mut attempt = 0;
                loop {
                    match bind_pair(addr) {
                        Ok(pair) => break pair,
                        Err(e) if addr.port() == 0 && attempt < 5 => {
                            attempt += 1;
                            let _ = e;
                        }
                        Err(source) => return Err(MeasureError::Bind { addr, source }),
                    }
                }
            }
            None => {
                let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), DEFAULT_PORT);
                match bind_pair(v6) {
                    Ok(pair) => pair,
                    Err(_) => {
                        let v4 = SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT));
                        bind_pair(v4).map_err(|source| MeasureError::Bind { addr: v4, source })?
                    }
                }
            }
        };
        let local = listener
            .local_addr()
            .map_err(|e| MeasureError::io("listener address", e))?;
        udp.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| MeasureError::io("UDP socket", e))?;
        // Without kernel stamps the receive times are user space's, as rxtime documents.
        let _ = rxtime::enable(&udp);
        let caps = opts.connection_caps();
        let shared = Arc::new(Shared {
            opts,
            epoch: Instant::now(),
            probe_port: local.port(),
            tests: Mutex::new(HashMap::new()),
            connections: unbloat_system::clients::Shared::new(caps),
            stop: AtomicBool::new(false),
        });
        Ok((
            Server {
                listener,
                udp,
                shared,
            },
            local,
        ))
    }

    /// Serves until `stop` becomes true, then waits for its threads (each ends within about a
    /// second: every blocking call has a timeout) and returns.
    pub fn run_until(self, stop: &AtomicBool) -> Result<(), MeasureError> {
        let udp_shared = Arc::clone(&self.shared);
        let udp = self.udp;
        let udp_thread = thread::Builder::new()
            .name("unbloat-udp".into())
            .spawn(move || udp_responder(&udp, &udp_shared))
            .map_err(|e| MeasureError::io("starting the UDP responder", e))?;
        let mut sessions = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if !wait_readable(&self.listener, 100) {
                continue;
            }
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                // EMFILE, ECONNABORTED, ...: this connection is lost, the server goes on.
                Err(_) => continue,
            };
            sessions.retain(|h: &thread::JoinHandle<()>| !h.is_finished());
            // Over a cap (in all, this client's, its /56's): closed rather than queued. A queue
            // of hostile connections accepted one after the other would each get a fresh
            // deadline, and a real client behind them wait for all of them.
            let held = match self.shared.connections.admit(peer.ip()) {
                Ok(held) => held,
                // Not logged: a flood would fill the log at the flood's rate.
                Err(_) => {
                    drop(conn);
                    continue;
                }
            };
            let shared = Arc::clone(&self.shared);
            // Without a thread, the closure (the connection and its count) is dropped.
            let spawned = thread::Builder::new()
                .name("unbloat-session".into())
                .spawn(move || {
                    let _held = held;
                    handle_connection(conn, peer, &shared);
                });
            if let Ok(h) = spawned {
                sessions.push(h);
            }
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        for h in sessions {
            let _ = h.join();
        }
        let _ = udp_thread.join();
        Ok(())
    }
}

/// A server running on its own thread (tests, benchmarks, the lab); stopped and joined on drop.
pub struct BackgroundServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<Result<(), MeasureError>>>,
}

impl Server {
    /// Runs the server on a new thread until the returned handle is dropped or stopped.
    pub fn spawn(self, addr: SocketAddr) -> Result<BackgroundServer, MeasureError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::Builder::new()
            .name("unbloat-serve".into())
            .spawn(move || self.run_until(&flag))
            .map_err(|e| MeasureError::io("starting the server thread", e))?;
        Ok(BackgroundServer {
            addr,
            stop,
            handle: Some(handle),
        })
    }
}

impl BackgroundServer {
    /// Stops the server and waits for it.
    pub fn stop(&mut self) -> Result<(), MeasureError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(MeasureError::io(
                "server thread",
                std::io::Error::other("panicked"),
            )),
            None => Ok(()),
        }
    }
}

impl Drop for BackgroundServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Waits up to `ms` for a connection to accept.
fn wait_readable(listener: &TcpListener, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    rc > 0 && pfd.revents & libc::POLLIN != 0
}

fn log(shared: &Shared, line: std::fmt::Arguments) {
    if shared.opts.log {
        eprintln!("unbloat serve: {line}");
    }
}

fn handle_connection(mut conn: TcpStream, peer: SocketAddr, shared: &Shared) {
    let deadline = Instant::now() + shared.opts.handshake_deadline;
    // Our hello is 10 bytes into an empty send buffer: its write cannot block for long.
    if conn
        .set_write_timeout(Some(shared.opts.handshake_deadline))
        .is_err()
    {
        return;
    }
    let _ = conn.set_nodelay(true);
    let theirs = match protocol::read_hello(&mut Deadline::new(&conn, deadline)) {
        Ok(v) => v,
        Err(e) => {
            log(shared, format_args!("{peer}: dropped before the test: {e}"));
            return;
        }
    };
    // Always answer with our hello, so a client of another version can say what met.
    if conn
        .write_all(&protocol::encode_hello(PROTOCOL_VERSION))
        .is_err()
    {
        return;
    }
    if theirs != PROTOCOL_VERSION {
        log(
            shared,
            format_args!(
                "{peer}: client speaks unbloat protocol {theirs}, this server speaks \
                 {PROTOCOL_VERSION}; refused"
            ),
        );
        return;
    }
    let msg = protocol::read_frame(&mut Deadline::new(&conn, deadline))
        .and_then(|body| ClientMsg::decode(&body));
    match msg {
        Ok(ClientMsg::Request(req)) => control_session(conn, peer, req, shared),
        Ok(ClientMsg::Attach { test_id, stream }) => {
            stream_session(conn, peer, test_id, stream, shared)
        }
        Ok(ClientMsg::Finish) => log(
            shared,
            format_args!("{peer}: finish without a test; dropped"),
        ),
        Err(e) => log(shared, format_args!("{peer}: dropped before the test: {e}")),
    }
}

fn send(conn: &mut TcpStream, msg: &ServerMsg) -> Result<(), ProtocolError> {
    protocol::write_frame(conn, &msg.encode())
}

/// Why a request is not acceptable, or `None` when it is.
fn check_request(req: &TestRequest, opts: &ServeOptions) -> Option<String> {
    if req.streams.len() > opts.max_streams {
        return Some(format!(
            "{} streams asked, this server allows at most {}",
            req.streams.len(),
            opts.max_streams
        ));
    }
    let session = Duration::from_millis(u64::from(req.session_ms));
    if session > opts.max_session {
        return Some(format!(
            "a {:.0} s test asked, this server allows at most {:.0} s",
            session.as_secs_f64(),
            opts.max_session.as_secs_f64()
        ));
    }
    if req.session_ms == 0 || req.load_ms > req.session_ms {
        return Some(format!(
            "inconsistent timing: load {} ms in a session of {} ms",
            req.load_ms, req.session_ms
        ));
    }
    opts.dscp.refusal(req.streams.iter().map(|s| s.dscp))
}

fn control_session(mut conn: TcpStream, peer: SocketAddr, req: TestRequest, shared: &Shared) {
    if let Some(reason) = check_request(&req, &shared.opts) {
        log(shared, format_args!("{peer}: test refused: {reason}"));
        let _ = send(&mut conn, &ServerMsg::Refused { reason });
        return;
    }
    // The client's idle phases, the load and some slack for connecting and the final report.
    let session = Duration::from_millis(u64::from(req.session_ms)) + crate::protocol::REPORT_WAIT;
    let test = Arc::new(ActiveTest {
        peer: canonical(peer.ip()),
        streams: req.streams.clone(),
        attached: Mutex::new(vec![false; req.streams.len()]),
        bytes: req.streams.iter().map(|_| AtomicU64::new(0)).collect(),
        probes: AtomicU64::new(0),
        deadline: Instant::now() + session,
        ended: AtomicBool::new(false),
    });
    {
        let mut tests = lock(&shared.tests);
        if tests.len() >= shared.opts.max_tests {
            let count = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
            let (active, limit) = (count(tests.len()), count(shared.opts.max_tests));
            drop(tests);
            log(
                shared,
                format_args!("{peer}: busy ({active} of {limit} tests running)"),
            );
            let _ = send(&mut conn, &ServerMsg::Busy { active, limit });
            return;
        }
        let client = serve_policy::client_key(peer.ip());
        let theirs = tests
            .values()
            .filter(|t| serve_policy::client_key(t.peer) == client)
            .count();
        let group = serve_policy::group_key(peer.ip());
        let group_limit =
            serve_policy::tests_per_group(shared.opts.max_tests, shared.opts.max_tests_per_client);
        let in_group = tests
            .values()
            .filter(|t| group.is_some() && serve_policy::group_key(t.peer) == group)
            .count();
        if theirs < shared.opts.max_tests_per_client && in_group >= group_limit {
            drop(tests);
            let reason = format!(
                "{}/56 already runs {in_group} test(s) here; this server runs at most \
                 {group_limit} at a time per IPv6 /56: try again when one ends",
                group.map(|g| g.to_string()).unwrap_or_default(),
            );
            log(shared, format_args!("{peer}: test refused: {reason}"));
            let _ = send(&mut conn, &ServerMsg::Refused { reason });
            return;
        }
        if theirs >= shared.opts.max_tests_per_client {
            drop(tests);
            let reason = format!(
                "{} already runs {theirs} test(s) here; this server runs one test at a time \
                 per client (at most {}): try again when it ends",
                serve_policy::client_name(client),
                shared.opts.max_tests_per_client
            );
            log(shared, format_args!("{peer}: test refused: {reason}"));
            let _ = send(&mut conn, &ServerMsg::Refused { reason });
            return;
        }
        if tests.contains_key(&req.test_id) {
            drop(tests);
            let reason = "a test with this id is already running".to_string();
            let _ = send(&mut conn, &ServerMsg::Refused { reason });
            return;
        }
        tests.insert(req.test_id, Arc::clone(&test));
    }
    let started = Instant::now();
    let ending = match send(
        &mut conn,
        &ServerMsg::Accept {
            probe_port: shared.probe_port,
        },
    ) {
        Ok(()) => wait_for_finish(&mut conn, req.test_id, &test, shared),
        Err(e) => format!("could not accept: {e}"),
    };
    release(req.test_id, &test, shared);
    let (mut up, mut down) = (0u64, 0u64);
    for (spec, bytes) in test.streams.iter().zip(&test.bytes) {
        match spec.direction {
            Direction::Up => up += bytes.load(Ordering::Relaxed),
            Direction::Down => down += bytes.load(Ordering::Relaxed),
        }
    }
    let n_up = test
        .streams
        .iter()
        .filter(|s| s.direction == Direction::Up)
        .count();
    log(
        shared,
        format_args!(
            "test {:016x} from {peer}: {n_up} up + {} down streams, {:.1} s, received {:.1} MB, \
             sent {:.1} MB, {} probes answered; {ending}",
            req.test_id,
            test.streams.len() - n_up,
            started.elapsed().as_secs_f64(),
            up as f64 / 1e6,
            down as f64 / 1e6,
            test.probes.load(Ordering::Relaxed),
        ),
    );
}

/// Ends a test and frees its slot (its client's too). Twice is harmless.
fn release(test_id: u64, test: &ActiveTest, shared: &Shared) {
    test.ended.store(true, Ordering::Relaxed);
    lock(&shared.tests).remove(&test_id);
}

/// Waits for the client's Finish (answering with the report) until the session deadline.
/// Returns how the session ended, for the log line.
fn wait_for_finish(
    conn: &mut TcpStream,
    test_id: u64,
    test: &ActiveTest,
    shared: &Shared,
) -> String {
    // Short read timeouts so that a server shutdown or the deadline is noticed promptly; a
    // timeout between frames is normal, a frame cut in the middle is not (read_frame errors).
    let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
    loop {
        if test.over(shared) {
            return "ended: session deadline passed without a finish".into();
        }
        let mut first = [0u8; 1];
        match conn.peek(&mut first) {
            Ok(0) => return "ended: client closed the connection early".into(),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return format!("ended: control connection failed: {e}"),
        }
        // The frame has begun: all of it within a handshake deadline, however it is dribbled.
        let by = Instant::now() + shared.opts.handshake_deadline;
        return match protocol::read_frame(&mut Deadline::new(conn, by))
            .and_then(|b| ClientMsg::decode(&b))
        {
            Ok(ClientMsg::Finish) => {
                // Free before the client hears the report: its next test may follow at once.
                release(test_id, test, shared);
                let report = ServerMsg::Report {
                    stream_bytes: test
                        .bytes
                        .iter()
                        .map(|b| b.load(Ordering::Relaxed))
                        .collect(),
                    probes_answered: test.probes.load(Ordering::Relaxed),
                };
                match send(conn, &report) {
                    Ok(()) => "finished".into(),
                    Err(e) => format!("finished, but the report was not delivered: {e}"),
                }
            }
            Ok(other) => format!("ended: unexpected message {other:?}"),
            Err(e) => format!("ended: {e}"),
        };
    }
}

/// The longest a download stream waits for its siblings to attach before it sends anyway.
const ATTACH_WAIT: Duration = Duration::from_secs(10);

fn stream_session(
    mut conn: TcpStream,
    peer: SocketAddr,
    test_id: u64,
    index: u16,
    shared: &Shared,
) {
    let test = lock(&shared.tests).get(&test_id).cloned();
    let refusal = match &test {
        None => Some("no such test running".to_string()),
        Some(t) if t.peer != canonical(peer.ip()) => {
            Some("stream from another address than the test".into())
        }
        Some(t) => {
            let mut attached = lock(&t.attached);
            match attached.get_mut(usize::from(index)) {
                None => Some(format!("the test has no stream {index}")),
                Some(true) => Some(format!("stream {index} is already attached")),
                Some(slot) => {
                    *slot = true;
                    None
                }
            }
        }
    };
    let test = match (test, refusal) {
        (Some(t), None) => t,
        (_, Some(reason)) => {
            log(shared, format_args!("{peer}: stream refused: {reason}"));
            let _ = send(&mut conn, &ServerMsg::Refused { reason });
            return;
        }
        (None, None) => return,
    };
    let spec = test.streams[usize::from(index)];
    let counter = &test.bytes[usize::from(index)];
    if send(&mut conn, &ServerMsg::Attached).is_err() {
        return;
    }
    let tick = Some(Duration::from_millis(500));
    if conn.set_read_timeout(tick).is_err() || conn.set_write_timeout(tick).is_err() {
        return;
    }
    let mut buf = vec![0u8; BULK_BUFFER];
    match spec.direction {
        Direction::Down => {
            // The request was refused if the policy did not allow this mark; mark() is the
            // policy's last word all the same.
            let dscp = shared.opts.dscp.mark(spec.dscp);
            let _ = sockopt::set_dscp(&conn, dscp, peer.is_ipv6());
            fill_pattern(&mut buf);
            // Send nothing until every stream of the test is attached: on a slow, deep-buffered
            // link the first stream's data would otherwise queue ahead of the other streams'
            // handshakes and delay them by seconds (the client starts its uploads the same way).
            let waiting = Instant::now();
            while !lock(&test.attached).iter().all(|a| *a)
                && !test.over(shared)
                && waiting.elapsed() < ATTACH_WAIT
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            while !test.over(shared) {
                match conn.write(&buf) {
                    Ok(n) => {
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if is_timeout(&e) => {}
                    Err(_) => break,
                }
            }
        }
        Direction::Up => {
            // Best effort: a kernel without SO_RCVLOWAT for TCP only costs more wakeups.
            let _ = sockopt::set_rcvlowat(&conn, BULK_LOWAT);
            while !test.over(shared) {
                match conn.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if is_timeout(&e) => {}
                    Err(_) => break,
                }
            }
        }
    }
}

pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// Fills a load buffer with bytes that do not compress (a cheap xorshift), once per stream, so
/// no compressing middlebox can inflate the goodput.
pub(crate) fn fill_pattern(buf: &mut [u8]) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn udp_responder(udp: &UdpSocket, shared: &Shared) {
    let mut buf = [0u8; PROBE_MAX_LEN + 1];
    let mut current_dscp: Option<u8> = None;
    let ipv6 = udp.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    while !shared.stop.load(Ordering::Relaxed) {
        let Ok(got) = rxtime::recv(udp, &mut buf) else {
            continue;
        };
        let Some(from) = got.from else {
            continue;
        };
        // The kernel's arrival time: the wait for this thread to run then counts as the hold
        // the client leaves out of the round trip, not as the path's delay.
        let recv_ns = got.since(shared.epoch).as_nanos() as u64;
        // Reads longer than PROBE_MAX_LEN fill the extra byte and are refused as too long.
        let request = match ProbeRequest::decode(&buf[..got.len]) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let test = lock(&shared.tests).get(&request.test_id).cloned();
        let test = match test {
            Some(t) if t.peer == canonical(from.ip()) && !t.over(shared) => t,
            _ => continue,
        };
        let dscp = shared.opts.dscp.mark(request.dscp);
        if current_dscp != Some(dscp) {
            let _ = sockopt::set_dscp(udp, dscp, ipv6);
            current_dscp = Some(dscp);
        }
        let send_ns = shared.epoch.elapsed().as_nanos() as u64;
        let reply = ProbeReply {
            request,
            server_recv_ns: recv_ns,
            server_send_ns: send_ns,
        };
        if let Some(len) = reply.encode_into(&mut buf[..got.len]) {
            if udp.send_to(&buf[..len], from).is_ok() {
                test.probes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(streams: usize, load_ms: u32, session_ms: u32) -> TestRequest {
        TestRequest {
            test_id: 1,
            load_ms,
            session_ms,
            streams: vec![
                StreamSpec {
                    direction: Direction::Up,
                    dscp: 0
                };
                streams
            ],
        }
    }

    #[test]
    fn requests_beyond_the_limits_are_refused_with_the_limit() {
        let opts = ServeOptions {
            max_streams: 8,
            max_session: Duration::from_secs(60),
            ..Default::default()
        };
        assert_eq!(check_request(&req(8, 1000, 60_000), &opts), None);
        let many = check_request(&req(9, 1000, 2000), &opts).expect("too many");
        assert!(many.contains("at most 8"), "{many}");
        let long = check_request(&req(1, 1000, 60_001), &opts).expect("too long");
        assert!(long.contains("at most 60 s"), "{long}");
        assert!(check_request(&req(1, 3000, 2000), &opts).is_some());
        assert!(check_request(&req(0, 0, 0), &opts).is_some());
    }

    /// Bug: a huge `--max-streams` wrapped the connection cap (max_tests * (max_streams + 1) +
    /// 16) to a handful. The flags' largest values make a server (their refusals are the
    /// parser's, tested with it in the `unbloat` binary), and wild options built in code are
    /// refused without wrapping.
    #[test]
    fn the_largest_flags_make_a_server_and_wild_options_do_not_wrap() {
        let most = ServeArgs {
            listen: None,
            max_tests: parse_max_tests("256").expect("the largest"),
            max_tests_per_client: DEFAULT_TESTS_PER_CLIENT,
            dscp: DscpPolicy::Standard,
            max_streams: parse_max_streams("255").expect("the largest"),
            max_duration: parse_max_duration("2m").expect("the default"),
        }
        .options();
        assert_eq!(most.problem(), None);
        assert_eq!(most.max_connections(), 256 * 256 + 16);
        let wild = ServeOptions {
            max_tests: usize::MAX,
            max_streams: usize::MAX,
            ..Default::default()
        };
        assert!(wild.problem().is_some());
        assert_eq!(wild.max_connections(), usize::MAX);
        assert!(matches!(
            Server::bind(wild),
            Err(MeasureError::InvalidArgument(_))
        ));
    }

    #[test]
    fn mapped_addresses_compare_equal_to_ipv4() {
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
        let plain: IpAddr = "10.0.0.1".parse().expect("ip");
        assert_eq!(canonical(mapped), canonical(plain));
    }
}
