//! [`Iperf3Load`]: the load of `unbloat test` against a stock `iperf3 -s`.
//!
//! The exchange, as iperf3's own client runs it (iperf_client_api.c): cookie; the server says
//! PARAM_EXCHANGE; our parameters; CREATE_STREAMS; the data connections, each opening with the
//! cookie; TEST_START, TEST_RUNNING; the load; our TEST_END; EXCHANGE_RESULTS and both sides'
//! results; DISPLAY_RESULTS; our IPERF_DONE.
//!
//! Why [`Load::stop`] sends TEST_END before it resets the data connections: iperf3 up to 3.15
//! (one thread, select loop; 3.12 is what Debian 12 and Ubuntu 22.04 ship) treats a stream that
//! fails while the test runs as a server error (IESTREAMREAD/IESTREAMWRITE) and ends the test
//! without results. So stop() stops moving data at once, sends TEST_END, and resets the data
//! connections only once the server's kernel has acknowledged TEST_END (the control socket's
//! unacknowledged bytes, SIOCOUTQ, are 0), or the server has answered, or after [`STOP_WAIT`].
//! Acknowledged, TEST_END waits in the server's socket before any reset is sent, and iperf3's
//! select loop reads the control socket before the streams. Sending it first is not enough on
//! a bloated link: a full FIFO that drops TEST_END admits the resets behind it a moment later,
//! and they arrive before TEST_END's retransmission (the lab's unshaped run saw it as the
//! server resetting the control connection before EXCHANGE_RESULTS).

use crate::atomic64::AtomicU64;
use std::hash::{BuildHasher, RandomState};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use unbloat_report::Direction;

use super::control::{server_error, Control};
use super::stream::DataStream;
use super::wire::{self, Mode, Params, State, StreamBytes};
use crate::farend::{Load, StreamInfo};
use crate::profile::StreamPlan;
use crate::protocol::Deadline;
use crate::server::BULK_BUFFER;
use crate::MeasureError;

/// Asked of the server on top of the load's length (`time` is what the server reads as the
/// test's length; our TEST_END ends it). The server's own timer ends a test with
/// IESERVERTESTDURATIONEXPIRED at `time + omit + 40 s` (iperf_server_api.c
/// `create_server_timers`: `max_rtt = 4; state_transitions = 10`), which already covers a late
/// stop; the margin covers start-up and the sampling schedule for a server that keeps to `time`
/// more closely, and stays small because `--server-max-duration` refuses `time` above its limit.
pub const TIME_MARGIN: Duration = Duration::from_secs(2);
/// The longest stop() waits for the server to take TEST_END before resetting the streams: a
/// 1.5 s FIFO each way and a retransmission fit in it; a server that has gone costs no more.
pub const STOP_WAIT: Duration = Duration::from_secs(5);

struct Session {
    control: Control,
    /// In plan order; `ids[i]` is stream i's iperf3 id.
    streams: Vec<DataStream>,
    ids: Vec<u64>,
    started: Instant,
    /// How long data moved, for the results we send.
    ran: Duration,
    /// Whether TEST_END went out, or why not.
    test_end: Result<(), String>,
}

/// The load streams of one iperf3 test. Nothing touches the network before [`Load::start`].
pub struct Iperf3Load {
    server: SocketAddr,
    plan: Vec<StreamPlan>,
    params: Params,
    /// The DSCP the server marks downloads with (one TOS for all of them).
    download_dscp: Option<u8>,
    timeout: Duration,
    notes: Vec<String>,
    stop: Arc<AtomicBool>,
    session: Option<Session>,
    stopped: bool,
    /// Every stream's count when the session ended, for bytes() after finish().
    last: Vec<u64>,
}

impl Iperf3Load {
    /// Checks the plan against what iperf3 can run: uploads only (normal mode), downloads only
    /// (reverse) or as many each way (bidirectional), at most 128 per direction.
    pub fn new(
        server: SocketAddr,
        streams: &[StreamPlan],
        duration: Duration,
        connect_timeout: Duration,
    ) -> Result<Iperf3Load, MeasureError> {
        let invalid = |s: String| Err(MeasureError::InvalidArgument(s));
        let ups = streams
            .iter()
            .filter(|s| s.direction == Direction::Up)
            .count();
        let downs = streams.len() - ups;
        let (mode, parallel) = match (ups, downs) {
            (0, 0) => return invalid("an iperf3 load needs at least one stream".into()),
            (n, 0) => (Mode::Normal, n),
            (0, n) => (Mode::Reverse, n),
            (u, d) if u == d => (Mode::Bidirectional, u),
            (u, d) => {
                return invalid(format!(
                    "iperf3 runs as many streams each way in a bidirectional test; this profile \
                     has {u} uploads and {d} downloads"
                ))
            }
        };
        if parallel > wire::MAX_STREAMS {
            return invalid(format!(
                "{parallel} streams per direction: an iperf3 server accepts at most {}",
                wire::MAX_STREAMS
            ));
        }
        if connect_timeout.is_zero() {
            return invalid("the connect timeout must be above zero".into());
        }
        let time_s = (duration + TIME_MARGIN).as_secs_f64().ceil() as u64;
        if time_s > wire::MAX_TIME_S {
            return invalid(format!(
                "an iperf3 server runs tests of at most {} s",
                wire::MAX_TIME_S
            ));
        }
        let mut notes = Vec::new();
        let downloads: Vec<u8> = streams
            .iter()
            .filter(|s| s.direction == Direction::Down)
            .map(|s| s.dscp & 0x3f)
            .collect();
        let download_dscp = downloads.first().copied();
        if let Some(first) = download_dscp {
            if downloads.iter().any(|&d| d != first) {
                notes.push(format!(
                    "an iperf3 server marks every download stream with one TOS: the profile's \
                     download DSCPs {downloads:?} were all sent as DSCP {first}"
                ));
            }
        }
        let params = Params {
            mode,
            parallel,
            time_s,
            len: BULK_BUFFER,
            tos: download_dscp.unwrap_or(0) << 2,
            client_version: format!("unbloat {}", env!("CARGO_PKG_VERSION")),
        };
        Ok(Iperf3Load {
            server,
            plan: streams.to_vec(),
            params,
            download_dscp,
            timeout: connect_timeout,
            notes,
            stop: Arc::new(AtomicBool::new(false)),
            session: None,
            stopped: false,
            last: vec![0; streams.len()],
        })
    }

    /// Plan indexes in the order the data connections are made. In a bidirectional test the
    /// server takes the first `parallel` connections as the ones it receives on
    /// (iperf_server_api.c: `if (rec_streams_accepted != streams_to_rec) flag = 0`), and
    /// iperf3's client connects its senders first.
    fn connect_order(&self) -> Vec<usize> {
        let of = |d: Direction| (0..self.plan.len()).filter(move |&i| self.plan[i].direction == d);
        of(Direction::Up).chain(of(Direction::Down)).collect()
    }

    fn run_start(&mut self) -> Result<Session, MeasureError> {
        let cookie = wire::cookie(&random_bytes());
        let t = self.timeout;
        let mut control = Control::open(self.server, t, &cookie)?;
        control.expect(
            State::ParamExchange,
            Instant::now() + t,
            "waiting for the server to take the test (PARAM_EXCHANGE)",
        )?;
        control.send_json(&self.params.to_json(), "sending the test parameters")?;
        control.expect(
            State::CreateStreams,
            Instant::now() + t,
            "waiting for the server to accept the parameters (CREATE_STREAMS)",
        )?;
        let mut opened: Vec<Option<DataStream>> = self.plan.iter().map(|_| None).collect();
        let mut ids = vec![0; self.plan.len()];
        for (n, i) in self.connect_order().into_iter().enumerate() {
            let p = &self.plan[i];
            opened[i] = Some(DataStream::open(
                self.server,
                t,
                p.dscp,
                p.direction,
                &cookie,
            )?);
            ids[i] = wire::stream_id(n);
        }
        let streams: Vec<DataStream> = opened.into_iter().flatten().collect();
        control.expect(
            State::TestStart,
            Instant::now() + t,
            "waiting for the test to start (TEST_START)",
        )?;
        control.expect(
            State::TestRunning,
            Instant::now() + t,
            "waiting for the test to run (TEST_RUNNING)",
        )?;
        Ok(Session {
            control,
            streams,
            ids,
            started: Instant::now(),
            ran: Duration::ZERO,
            test_end: Ok(()),
        })
    }

    fn cross_check(&self, s: &Session, server: &wire::ServerResults) -> String {
        let mut sums = [(0u64, 0u64); 2];
        for (i, stream) in s.streams.iter().enumerate() {
            let k = usize::from(stream.direction == Direction::Down);
            sums[k].0 += stream.bytes();
            sums[k].1 += server
                .streams
                .iter()
                .filter(|r| r.id == s.ids[i])
                .map(|r| r.bytes)
                .sum::<u64>();
        }
        let mb = |b: u64| b as f64 / 1e6;
        let mut parts = Vec::new();
        if self.params.mode != Mode::Reverse {
            parts.push(format!(
                "received {:.1} MB on the uploads (this side saw {:.1} MB acknowledged)",
                mb(sums[0].1),
                mb(sums[0].0)
            ));
        }
        if self.params.mode != Mode::Normal {
            parts.push(format!(
                "sent {:.1} MB on the downloads (this side received {:.1} MB)",
                mb(sums[1].1),
                mb(sums[1].0)
            ));
        }
        let cc = server
            .congestion
            .as_deref()
            .map(|c| {
                format!(
                    "; its TCP congestion control: {}",
                    crate::protocol::printable(c)
                )
            })
            .unwrap_or_default();
        format!("iperf3 server's own count: {}{cc}", parts.join(", "))
    }

    fn run_finish(&mut self, mut s: Session) -> Result<Vec<String>, MeasureError> {
        let c = &mut s.control;
        if let Err(why) = &s.test_end {
            return Err(c.fail(format!("could not end the iperf3 test: {why}")));
        }
        let by = Instant::now() + self.timeout;
        let step = "waiting for the server to end the test (EXCHANGE_RESULTS)";
        c.expect(State::ExchangeResults, by, step)?;
        let ours: Vec<StreamBytes> = s
            .streams
            .iter()
            .zip(&s.ids)
            .map(|(st, &id)| StreamBytes {
                id,
                bytes: st.moved(),
            })
            .collect();
        let sends = self.params.mode != Mode::Reverse;
        let results = wire::client_results(&ours, sends, s.ran.as_secs_f64());
        c.send_json(&results, "sending our results")?;
        let step = "reading the server's results";
        let v = c.read_json(wire::MAX_RESULTS_JSON, by, step)?;
        let theirs = wire::parse_server_results(&v).map_err(|e| c.wire_error(e, step))?;
        c.expect(
            State::DisplayResults,
            by,
            "waiting for the end of the test (DISPLAY_RESULTS)",
        )?;
        c.send_state(State::IperfDone, "saying goodbye (IPERF_DONE)")?;
        // As iperf3's `iperf_sync_close_socket`: say we are done writing and wait (bounded) for
        // the server to close, so that it has left this test before we return; a client that
        // connects right after would otherwise find it still busy with ours.
        let _ = c.conn.shutdown(std::net::Shutdown::Write);
        let mut sink = [0u8; 128];
        while let Ok(n) = Deadline::new(&c.conn, by).read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        let mut notes = std::mem::take(&mut self.notes);
        notes.push(self.cross_check(&s, &theirs));
        Ok(notes)
    }
}

impl Load for Iperf3Load {
    fn start(&mut self) -> Result<(), MeasureError> {
        if self.session.is_some() || self.stopped {
            return Err(MeasureError::InvalidArgument(
                "an iperf3 load starts once".into(),
            ));
        }
        let mut session = self.run_start()?;
        for st in &mut session.streams {
            st.start(&self.stop)?;
        }
        session.started = Instant::now();
        self.session = Some(session);
        Ok(())
    }

    fn streams(&self) -> Vec<StreamInfo> {
        let mut count = [0usize; 2];
        self.plan
            .iter()
            .map(|p| {
                let down = p.direction == Direction::Down;
                count[usize::from(down)] += 1;
                let word = if down { "download" } else { "upload" };
                StreamInfo {
                    name: format!("iperf3 {word} {}", count[usize::from(down)]),
                    direction: p.direction,
                    // What goes on the wire: the server marks every download alike.
                    dscp: if down {
                        self.download_dscp.unwrap_or(p.dscp)
                    } else {
                        p.dscp
                    },
                }
            })
            .collect()
    }

    fn bytes(&self) -> Vec<u64> {
        match &self.session {
            Some(s) => s.streams.iter().map(DataStream::bytes).collect(),
            None => self.last.clone(),
        }
    }

    fn error(&self) -> Option<String> {
        let s = self.session.as_ref()?;
        for (i, st) in s.streams.iter().enumerate() {
            if let Some(e) = st.error() {
                let name = self.streams().get(i).map(|x| x.name.clone());
                return Some(format!("{}: {e}", name.unwrap_or_default()));
            }
        }
        if self.stopped {
            return None;
        }
        control_error(&s.control)
    }

    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.stop.store(true, Ordering::Relaxed);
        let Some(s) = self.session.as_mut() else {
            return;
        };
        s.ran = s.started.elapsed();
        s.test_end = s
            .control
            .send_state(State::TestEnd, "ending the test (TEST_END)")
            .map_err(|e| e.to_string());
        for st in &mut s.streams {
            st.join();
        }
        if s.test_end.is_ok() {
            // See the module doc: let the server take TEST_END before the resets arrive.
            test_end_taken(
                &s.control.conn,
                Instant::now() + STOP_WAIT.min(self.timeout),
            );
        }
        for st in &mut s.streams {
            st.reset();
        }
    }

    fn finish(&mut self) -> Result<Vec<String>, MeasureError> {
        self.stop();
        match self.session.take() {
            Some(s) => {
                self.last = s.streams.iter().map(DataStream::bytes).collect();
                self.run_finish(s)
            }
            None => Ok(std::mem::take(&mut self.notes)),
        }
    }
}

impl Drop for Iperf3Load {
    fn drop(&mut self) {
        // Never leave threads loading the link; dropping the control connection then tells
        // the server the test is over (it logs IECTRLCLOSE and serves the next one).
        self.stop();
    }
}

/// Waits until the server's kernel has acknowledged all we sent on the control connection, the
/// server has said something (or closed it), or `by`.
fn test_end_taken(conn: &std::net::TcpStream, by: Instant) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(conn);
    let sock = socket2::SockRef::from(conn);
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    loop {
        let mut unacked: libc::c_int = 0;
        // SAFETY: SIOCOUTQ on a TCP socket writes one int: the bytes not yet acknowledged.
        let outq = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut unacked) };
        if outq != 0 || unacked == 0 {
            return;
        }
        match sock.recv_with_flags(&mut buf, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
            Err(e) if crate::server::is_timeout(&e) => {}
            _ => return,
        }
        if Instant::now() >= by {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the server said on the control connection during the load, where it should say
/// nothing: a SERVER_ERROR (its test-length timer, IENOMSG), a close, or anything else.
/// Looks without waiting and without consuming.
fn control_error(c: &Control) -> Option<String> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 9];
    let sock = socket2::SockRef::from(&c.conn);
    match sock.recv_with_flags(&mut buf, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => Some("the iperf3 server closed the control connection during the load".into()),
        Ok(n) => {
            // SAFETY: recv initialised the first n bytes.
            let got: Vec<u8> = buf[..n]
                .iter()
                .map(|b| unsafe { b.assume_init() })
                .collect();
            match State::from_byte(got[0]) {
                Some(State::ServerError) if n == 9 => {
                    let codes: [u8; 8] = std::array::from_fn(|i| got[i + 1]);
                    Some(server_error(codes, "the load ran"))
                }
                Some(State::ServerError) => None, // the codes follow in a moment
                Some(s) => Some(format!(
                    "the iperf3 server sent {} during the load",
                    s.name()
                )),
                None => Some(format!(
                    "the iperf3 server sent byte {} during the load, which is no iperf3 state",
                    got[0]
                )),
            }
        }
        Err(e) if crate::server::is_timeout(&e) => None,
        Err(e) => Some(format!("the iperf3 control connection failed: {e}")),
    }
}

/// 36 unpredictable bytes for the cookie, without a dependency: std's per-process random
/// hash keys over the time, the process and a counter.
fn random_bytes() -> [u8; wire::COOKIE_SIZE - 1] {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let state = RandomState::new();
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let mut out = [0u8; wire::COOKIE_SIZE - 1];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let h = state.hash_one((Instant::now(), std::process::id(), call, i));
        chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn stop_goes_on_as_soon_as_the_server_s_kernel_has_test_end() {
        // The server never reads: its kernel's acknowledgement is what counts.
        let (mut c, _server) = pair();
        c.write_all(&[State::TestEnd.byte()]).unwrap();
        let t = Instant::now();
        test_end_taken(&c, t + Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn stop_waits_at_most_its_bound_for_bytes_never_acknowledged() {
        // A peer whose window is full acknowledges nothing more: the bytes past it stay unacked.
        let (mut c, _server) = pair();
        c.set_nonblocking(true).unwrap();
        let chunk = [0u8; 65536];
        while c.write(&chunk).is_ok() {}
        let t = Instant::now();
        test_end_taken(&c, t + Duration::from_millis(300));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }
}
