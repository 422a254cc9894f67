//! One data connection of an iperf3 test: connected, marked and named by the cookie, then
//! moved and counted exactly as [`crate::load`] moves and counts unbloat's own streams.
//!
//! What callers can rely on: 128 KiB writes of a buffer filled once, reads woken per 64 KiB
//! (`SO_RCVLOWAT`), one thread per stream; [`DataStream::bytes`] is `tcpi_bytes_received` for a
//! download and `tcpi_bytes_acked` for an upload, read at any moment; once the stop flag is set
//! nothing the connection does counts as an error (the server closes its end on TEST_END).

use crate::atomic64::AtomicU64;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use unbloat_report::Direction;

use super::control::connect;
use super::wire::Cookie;
use crate::{sockopt, MeasureError};

/// How long a blocked read or write waits before it looks at the stop flag again.
const TICK: Duration = Duration::from_millis(200);

pub(crate) struct DataStream {
    pub direction: Direction,
    /// `None` once stopped: the socket was reset and closed.
    sock: Option<Arc<TcpStream>>,
    /// Bytes this side read (download) or wrote (upload).
    moved: Arc<AtomicU64>,
    error: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
    /// The goodput count when the stream stopped.
    last: u64,
}

impl DataStream {
    /// Connects, marked with `dscp` before the SYN, and names the test with the cookie
    /// (iperf_tcp.c `iperf_tcp_connect` writes it first; the server compares it in
    /// `iperf_tcp_accept`).
    pub fn open(
        addr: SocketAddr,
        timeout: Duration,
        dscp: u8,
        direction: Direction,
        cookie: &Cookie,
    ) -> Result<DataStream, MeasureError> {
        let mut conn = connect(addr, timeout, dscp)?;
        conn.write_all(cookie).map_err(|e| {
            MeasureError::far_end(
                addr,
                format!("a data connection failed while sending the cookie: {e}"),
            )
        })?;
        conn.set_read_timeout(Some(TICK))
            .map_err(|e| MeasureError::io("socket timeout", e))?;
        conn.set_write_timeout(Some(TICK))
            .map_err(|e| MeasureError::io("socket timeout", e))?;
        Ok(DataStream {
            direction,
            sock: Some(Arc::new(conn)),
            moved: Arc::new(AtomicU64::new(0)),
            error: Arc::new(Mutex::new(None)),
            thread: None,
            last: 0,
        })
    }

    /// Starts the stream's thread, which moves data until `stop`.
    pub fn start(&mut self, stop: &Arc<AtomicBool>) -> Result<(), MeasureError> {
        let Some(sock) = self.sock.clone() else {
            return Ok(());
        };
        let (moved, error, stop) = (
            Arc::clone(&self.moved),
            Arc::clone(&self.error),
            Arc::clone(stop),
        );
        let direction = self.direction;
        let handle = thread::Builder::new()
            .name("unbloat-iperf3".into())
            .spawn(move || {
                let result = match direction {
                    Direction::Up => crate::load::upload(&sock, &moved, &stop, "iperf3 "),
                    Direction::Down => crate::load::download(&sock, &moved, &stop, "iperf3 "),
                };
                // After the stop flag the server closing its end is expected, not a failure.
                if let Err(e) = result {
                    if !stop.load(Ordering::Relaxed) {
                        *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
            })
            .map_err(|e| MeasureError::io("starting an iperf3 load stream", e))?;
        self.thread = Some(handle);
        Ok(())
    }

    /// Goodput bytes so far; after [`DataStream::reset`], the count at that moment.
    pub fn bytes(&self) -> u64 {
        let Some(sock) = &self.sock else {
            return self.last;
        };
        let counted = match self.direction {
            Direction::Down => sockopt::tcp_bytes_received(&**sock),
            Direction::Up => sockopt::tcp_bytes_acked(&**sock),
        };
        // Bytes read or written where TCP_INFO lacks the counters (Linux < 4.1).
        counted.unwrap_or_else(|_| self.moved.load(Ordering::Relaxed))
    }

    /// What iperf3 reports for a stream in its results: bytes written (sender) or received.
    pub fn moved(&self) -> u64 {
        match self.direction {
            Direction::Up => self.moved.load(Ordering::Relaxed),
            Direction::Down => self.bytes(),
        }
    }

    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for the thread (its stop flag is set), which wakes within [`TICK`].
    pub fn join(&mut self) {
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }

    /// Resets the connection (SO_LINGER 0 then close): what still sits in the send buffer is
    /// thrown away instead of draining into the idle phase after the load.
    pub fn reset(&mut self) {
        self.join();
        self.last = self.bytes();
        if let Some(sock) = self.sock.take() {
            let _ = socket2::SockRef::from(&*sock).set_linger(Some(Duration::ZERO));
        }
    }
}
