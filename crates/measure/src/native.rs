//! `unbloat serve` as a far end: the test's control session and its load streams, behind the
//! [`Load`] interface every far end gives the timeline.
//!
//! What callers can rely on:
//! - [`Session::open`] connects, exchanges hellos and asks for the test; a busy, refusing or
//!   foreign server is an error here, before any probe is sent.
//! - [`NativeLoad::start`] connects and attaches every stream before any moves data, all at once
//!   (one after the other, eight handshakes would take a second of the load phase on a slow link).
//! - The control connection is watched in every phase ([`Session::gone`]): the server says
//!   nothing on it until the Finish, so anything that ends it means the server is gone.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::farend::{Load, StreamInfo};
use crate::load::{self, LoadStream};
use crate::profile::StreamPlan;
use crate::protocol::{ClientMsg, ProtocolError, ServerMsg, StreamSpec, TestRequest};
use crate::MeasureError;

/// An accepted test on an `unbloat serve`.
pub struct Session {
    pub addr: SocketAddr,
    pub test_id: u64,
    /// Where the server's UDP responder listens for this test.
    pub probe_port: u16,
    control: TcpStream,
    timeout: Duration,
}

impl Session {
    /// Connects to the first address of `host` that answers and asks for a test of `streams`
    /// lasting `load` (the session, idle phases included, lasts `session`).
    pub fn open(
        host: &str,
        port: u16,
        streams: &[StreamPlan],
        load: Duration,
        session: Duration,
        timeout: Duration,
    ) -> Result<Session, MeasureError> {
        let (mut control, addr) = connect_first(host, port, timeout)?;
        load::handshake(&mut control, addr, timeout)?;
        let test_id = random_id();
        let ms = |d: Duration| d.as_millis().min(u128::from(u32::MAX)) as u32;
        let request = ClientMsg::Request(TestRequest {
            test_id,
            load_ms: ms(load),
            session_ms: ms(session),
            streams: streams
                .iter()
                .map(|s| StreamSpec {
                    direction: s.direction,
                    dscp: s.dscp,
                })
                .collect(),
        });
        let probe_port = match load::request(&mut control, addr, &request, timeout)? {
            ServerMsg::Accept { probe_port } => probe_port,
            ServerMsg::Busy { active, limit } => return Err(MeasureError::Busy { active, limit }),
            ServerMsg::Refused { reason } => return Err(MeasureError::refused(&reason)),
            other => return Err(unexpected(addr, "Accept", &other)),
        };
        Ok(Session {
            addr,
            test_id,
            probe_port,
            control,
            timeout,
        })
    }

    /// Why the server is gone (it closed or reset the control connection), or `None`. Never
    /// waits, and leaves the connection's blocking mode alone (a peek with MSG_DONTWAIT).
    pub fn gone(&self) -> Option<String> {
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
        let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT;
        match socket2::SockRef::from(&self.control).recv_with_flags(&mut byte, flags) {
            Ok(0) => Some("it closed the test's control connection".to_string()),
            // Something unasked for: the Finish's answer will say whether it makes sense.
            Ok(_) => None,
            Err(e) if crate::server::is_timeout(&e) => None,
            Err(e) => Some(format!("the test's control connection failed: {e}")),
        }
    }

    /// Sends the Finish and reads the report: the server saw the test to its end. It waits at
    /// least [`crate::protocol::REPORT_WAIT`]: the load's queue stands between the two.
    pub fn finish(&mut self) -> Result<Vec<String>, MeasureError> {
        match load::request(
            &mut self.control,
            self.addr,
            &ClientMsg::Finish,
            self.timeout.max(crate::protocol::REPORT_WAIT),
        ) {
            Ok(ServerMsg::Report { .. }) => Ok(Vec::new()),
            Ok(other) => Ok(vec![format!(
                "server ended the test with {other:?} instead of a report"
            )]),
            Err(e) => Err(MeasureError::ServerGone {
                phase: "the final report",
                why: e.to_string(),
            }),
        }
    }
}

/// The load streams of an accepted test.
pub struct NativeLoad {
    addr: SocketAddr,
    test_id: u64,
    plans: Vec<StreamPlan>,
    timeout: Duration,
    streams: Vec<LoadStream>,
    stop: Arc<AtomicBool>,
}

impl NativeLoad {
    pub fn new(session: &Session, plans: &[StreamPlan]) -> NativeLoad {
        NativeLoad {
            addr: session.addr,
            test_id: session.test_id,
            plans: plans.to_vec(),
            timeout: session.timeout,
            streams: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Load for NativeLoad {
    fn start(&mut self) -> Result<(), MeasureError> {
        let (addr, test_id, timeout) = (self.addr, self.test_id, self.timeout);
        let opened: Vec<Result<LoadStream, MeasureError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .plans
                .iter()
                .enumerate()
                .map(|(i, plan)| {
                    scope.spawn(move || LoadStream::open(addr, test_id, i as u16, plan, timeout))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for stream in opened {
            self.streams.push(stream?);
        }
        for stream in &mut self.streams {
            stream.start(Arc::clone(&self.stop))?;
        }
        Ok(())
    }

    fn streams(&self) -> Vec<StreamInfo> {
        self.streams
            .iter()
            .map(|s| StreamInfo {
                name: s.plan.name.clone(),
                direction: s.plan.direction,
                dscp: s.plan.dscp,
            })
            .collect()
    }

    fn bytes(&self) -> Vec<u64> {
        self.streams.iter().map(LoadStream::bytes).collect()
    }

    fn error(&self) -> Option<String> {
        self.streams
            .iter()
            .find_map(|s| s.error().map(|e| format!("{}: {e}", s.plan.name)))
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in std::mem::take(&mut self.streams) {
            s.stop();
        }
    }

    fn finish(&mut self) -> Result<Vec<String>, MeasureError> {
        // The report is the session's: the control connection outlives the load.
        Ok(Vec::new())
    }
}

/// Connects to the first address of `host` that answers.
pub(crate) fn connect_first(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), MeasureError> {
    let mut last = MeasureError::NoAddress { host: host.into() };
    for addr in resolve(host, port)? {
        match load::connect(addr, timeout, 0) {
            Ok(c) => return Ok((c, addr)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Every address of `host`.
pub(crate) fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, MeasureError> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|source| MeasureError::Resolve {
            host: host.into(),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(MeasureError::NoAddress { host: host.into() });
    }
    Ok(addrs)
}

fn unexpected(addr: SocketAddr, wanted: &str, got: &ServerMsg) -> MeasureError {
    let why = format!("expected {wanted}, got {got:?}");
    load::protocol_error(
        addr,
        ProtocolError::BadField {
            field: "reply",
            why,
        },
    )
}

fn random_id() -> u64 {
    let mut b = [0u8; 8];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    match from_os {
        Ok(()) => u64::from_ne_bytes(b),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            (t as u64) ^ (u64::from(std::process::id()) << 32)
        }
    }
}
