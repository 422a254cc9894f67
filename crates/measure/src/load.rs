//! TCP load streams on the client side, and the connection setup shared with the control
//! connection.
//!
//! What callers can rely on:
//! - A stream is connected, marked with its DSCP before the SYN leaves, and attached to the
//!   test (the server said `Attached`) before [`LoadStream::start`] moves any data.
//! - The load costs little CPU: 128 KiB reads and writes of a buffer filled once, no per-byte
//!   work, and a reader that wakes per 64 KiB arrived rather than per packet (`SO_RCVLOWAT`),
//!   so a run measures the link and not this process.
//! - [`LoadStream::bytes`] is the stream's goodput counter: for downloads the bytes this side's
//!   TCP received in order (`tcpi_bytes_received`), for uploads the bytes the server's TCP
//!   acknowledged (`tcpi_bytes_acked`), i.e. what arrived either way; both are read at any time
//!   without stopping the stream, and neither depends on how the reads are batched.
//! - [`LoadStream::stop`] ends the stream with a reset (SO_LINGER 0), which throws away what
//!   still sits in the send buffer: after the load phase the link must go idle at once, not
//!   drain seconds of buffered upload into the idle tail.

use crate::atomic64::AtomicU64;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use unbloat_report::Direction;

use crate::profile::StreamPlan;
use crate::protocol::{self, ClientMsg, Deadline, ProtocolError, ServerMsg, PROTOCOL_VERSION};
use crate::server::{fill_pattern, is_timeout, BULK_BUFFER, BULK_LOWAT};
use crate::{sockopt, MeasureError};

/// Connects to `addr`, marking the connection with `dscp` from its first packet.
pub(crate) fn connect(
    addr: SocketAddr,
    timeout: Duration,
    dscp: u8,
) -> Result<TcpStream, MeasureError> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| MeasureError::io("opening a TCP socket", e))?;
    sockopt::set_dscp(&sock, dscp, addr.is_ipv6())
        .map_err(|e| MeasureError::io("marking with DSCP", e))?;
    sock.connect_timeout(&addr.into(), timeout)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => MeasureError::ConnectionRefused { addr },
            _ => MeasureError::Unreachable { addr, source: e },
        })?;
    let conn: TcpStream = sock.into();
    conn.set_read_timeout(Some(timeout))
        .map_err(|e| MeasureError::io("socket timeout", e))?;
    conn.set_write_timeout(Some(timeout))
        .map_err(|e| MeasureError::io("socket timeout", e))?;
    Ok(conn)
}

pub(crate) fn protocol_error(addr: SocketAddr, source: ProtocolError) -> MeasureError {
    MeasureError::Protocol { addr, source }
}

/// Exchanges hellos; a version mismatch or a peer that is not unbloat is an error here. The
/// server's hello must arrive whole within `timeout`, however it is spaced.
pub(crate) fn handshake(
    conn: &mut TcpStream,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<(), MeasureError> {
    conn.write_all(&protocol::encode_hello(PROTOCOL_VERSION))
        .map_err(|e| protocol_error(addr, e.into()))?;
    match protocol::read_hello(&mut Deadline::new(conn, Instant::now() + timeout)) {
        Ok(v) if v == PROTOCOL_VERSION => Ok(()),
        Ok(server) => Err(MeasureError::WrongVersion {
            server,
            client: PROTOCOL_VERSION,
        }),
        Err(ProtocolError::BadMagic(_)) => Err(MeasureError::NotUnbloat { addr }),
        Err(e) => Err(protocol_error(addr, e)),
    }
}

/// Sends a message and reads the server's answer, which must arrive whole within `timeout`.
pub(crate) fn request(
    conn: &mut TcpStream,
    addr: SocketAddr,
    msg: &ClientMsg,
    timeout: Duration,
) -> Result<ServerMsg, MeasureError> {
    protocol::write_frame(conn, &msg.encode()).map_err(|e| protocol_error(addr, e))?;
    let body = protocol::read_frame(&mut Deadline::new(conn, Instant::now() + timeout))
        .map_err(|e| protocol_error(addr, e))?;
    ServerMsg::decode(&body).map_err(|e| protocol_error(addr, e))
}

/// One TCP load stream of a running test.
pub struct LoadStream {
    pub plan: StreamPlan,
    sock: Arc<TcpStream>,
    /// Bytes read (download) or written (upload) by this side.
    moved: Arc<AtomicU64>,
    error: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl LoadStream {
    /// Connects stream `index` of test `test_id` and waits for the server to attach it.
    pub fn open(
        addr: SocketAddr,
        test_id: u64,
        index: u16,
        plan: &StreamPlan,
        timeout: Duration,
    ) -> Result<LoadStream, MeasureError> {
        let mut conn = connect(addr, timeout, plan.dscp)?;
        handshake(&mut conn, addr, timeout)?;
        match request(
            &mut conn,
            addr,
            &ClientMsg::Attach {
                test_id,
                stream: index,
            },
            timeout,
        )? {
            ServerMsg::Attached => {}
            ServerMsg::Refused { reason } => return Err(MeasureError::refused(&reason)),
            other => {
                let why = format!("expected Attached, got {other:?}");
                return Err(protocol_error(
                    addr,
                    ProtocolError::BadField {
                        field: "reply",
                        why,
                    },
                ));
            }
        }
        // Short timeouts: the data loop checks its stop flag between blocking calls.
        let tick = Some(Duration::from_millis(200));
        conn.set_read_timeout(tick)
            .map_err(|e| MeasureError::io("socket timeout", e))?;
        conn.set_write_timeout(tick)
            .map_err(|e| MeasureError::io("socket timeout", e))?;
        Ok(LoadStream {
            plan: plan.clone(),
            sock: Arc::new(conn),
            moved: Arc::new(AtomicU64::new(0)),
            error: Arc::new(Mutex::new(None)),
            thread: None,
        })
    }

    /// Starts moving data until `stop`.
    pub fn start(&mut self, stop: Arc<AtomicBool>) -> Result<(), MeasureError> {
        let sock = Arc::clone(&self.sock);
        let moved = Arc::clone(&self.moved);
        let error = Arc::clone(&self.error);
        let direction = self.plan.direction;
        let handle = thread::Builder::new()
            .name("unbloat-load".into())
            .spawn(move || {
                let result = match direction {
                    Direction::Up => upload(&sock, &moved, &stop, ""),
                    Direction::Down => download(&sock, &moved, &stop, ""),
                };
                if let Err(e) = result {
                    *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            })
            .map_err(|e| MeasureError::io("starting a load stream", e))?;
        self.thread = Some(handle);
        Ok(())
    }

    /// Goodput bytes so far (see the module doc for what is counted).
    pub fn bytes(&self) -> u64 {
        match self.plan.direction {
            // Fall back to bytes read or written where TCP_INFO lacks the counters (Linux < 4.1).
            Direction::Down => sockopt::tcp_bytes_received(&*self.sock)
                .unwrap_or_else(|_| self.moved.load(Ordering::Relaxed)),
            Direction::Up => sockopt::tcp_bytes_acked(&*self.sock)
                .unwrap_or_else(|_| self.moved.load(Ordering::Relaxed)),
        }
    }

    /// Why the stream failed, if it did.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for the data thread (after its stop flag was set) and resets the connection.
    pub fn stop(mut self) {
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        let _ = socket2::SockRef::from(&*self.sock).set_linger(Some(Duration::ZERO));
    }
}

/// Writes a buffer filled once until `stop`, counting what was written in `moved`. `kind` names
/// the far end in errors ("" for unbloat serve, "iperf3 " for a stock iperf3).
pub(crate) fn upload(
    sock: &TcpStream,
    moved: &AtomicU64,
    stop: &AtomicBool,
    kind: &str,
) -> Result<(), String> {
    let mut buf = vec![0u8; BULK_BUFFER];
    fill_pattern(&mut buf);
    let mut w = sock;
    while !stop.load(Ordering::Relaxed) {
        match w.write(&buf) {
            Ok(0) => return Err(format!("the {kind}server closed the upload stream")),
            Ok(n) => {
                moved.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(format!("{kind}upload stream failed: {e}")),
        }
    }
    Ok(())
}

/// Reads and throws away until `stop`, counting what was read in `moved`; `kind` as for
/// [`upload`].
pub(crate) fn download(
    sock: &TcpStream,
    moved: &AtomicU64,
    stop: &AtomicBool,
    kind: &str,
) -> Result<(), String> {
    let mut buf = vec![0u8; BULK_BUFFER];
    // Best effort: a kernel without SO_RCVLOWAT for TCP only costs more wakeups.
    let _ = sockopt::set_rcvlowat(sock, BULK_LOWAT);
    let mut r = sock;
    while !stop.load(Ordering::Relaxed) {
        match r.read(&mut buf) {
            Ok(0) => return Err(format!("the {kind}server closed the download stream")),
            Ok(n) => {
                moved.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(format!("{kind}download stream failed: {e}")),
        }
    }
    Ok(())
}
