//! The control connection to an `iperf3 -s`, client side: connecting, state bytes, JSON
//! messages, every read bounded.
//!
//! What callers can rely on: every read here ends by a deadline however the server spaces its
//! bytes ([`crate::protocol::Deadline`]); ACCESS_DENIED becomes [`MeasureError::FarEndBusy`];
//! SERVER_ERROR, a state out of turn, a byte that is no state, a close or a stall become
//! [`MeasureError::FarEnd`] saying which, and in which step.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::codes::server_error_text;
use super::wire::{self, State, WireError};
use crate::protocol::Deadline;
use crate::server::is_timeout;
use crate::MeasureError;

/// Connects a TCP socket to an iperf3 server, marked with `dscp` before the SYN leaves, as
/// unbloat's own streams connect ([`crate::load::connect`]); nothing listening is said in
/// iperf3's terms.
pub(crate) fn connect(
    addr: SocketAddr,
    timeout: Duration,
    dscp: u8,
) -> Result<TcpStream, MeasureError> {
    crate::load::connect(addr, timeout, dscp).map_err(|e| match e {
        MeasureError::ConnectionRefused { addr } => MeasureError::far_end(
            addr,
            "connection refused: nothing listens there (is `iperf3 -s` running on that port?)",
        ),
        e => e,
    })
}

/// The control connection of one test.
pub(crate) struct Control {
    pub conn: TcpStream,
    pub addr: SocketAddr,
    pub timeout: Duration,
}

impl Control {
    /// Connects and sends the cookie (iperf_client_api.c `iperf_connect`).
    pub fn open(
        addr: SocketAddr,
        timeout: Duration,
        cookie: &wire::Cookie,
    ) -> Result<Control, MeasureError> {
        let conn = connect(addr, timeout, 0)?;
        // As iperf3: state bytes go out at once, not after the next ACK (Nagle).
        conn.set_nodelay(true)
            .map_err(|e| MeasureError::io("TCP_NODELAY", e))?;
        let mut c = Control {
            conn,
            addr,
            timeout,
        };
        c.write(cookie, "sending the cookie")?;
        Ok(c)
    }

    pub fn fail(&self, why: impl AsRef<str>) -> MeasureError {
        MeasureError::far_end(self.addr, why)
    }

    pub fn write(&mut self, bytes: &[u8], step: &str) -> Result<(), MeasureError> {
        self.conn.write_all(bytes).map_err(|e| {
            self.fail(format!(
                "the iperf3 server's control connection failed while {step}: {e}"
            ))
        })
    }

    pub fn send_state(&mut self, s: State, step: &str) -> Result<(), MeasureError> {
        self.write(&[s.byte()], step)
    }

    pub fn send_json(&mut self, v: &Value, step: &str) -> Result<(), MeasureError> {
        self.write(&wire::frame_json(v), step)
    }

    fn read_exact(&mut self, buf: &mut [u8], by: Instant, step: &str) -> Result<(), MeasureError> {
        let r = Deadline::new(&self.conn, by).read_exact(buf);
        r.map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => self.fail(format!(
                "the iperf3 server closed the control connection while {step}"
            )),
            _ if is_timeout(&e) => self.fail(format!(
                "the iperf3 server sent nothing for {:.1} s while {step} (is it an iperf3 \
                 server?)",
                self.timeout.as_secs_f64()
            )),
            _ => self.fail(format!(
                "the iperf3 server's control connection failed while {step}: {e}"
            )),
        })
    }

    /// Reads the next state byte, which must arrive by `by`; ACCESS_DENIED and SERVER_ERROR
    /// (with its codes, read by the same deadline) are errors.
    pub fn read_state(&mut self, by: Instant, step: &str) -> Result<State, MeasureError> {
        let mut b = [0u8; 1];
        self.read_exact(&mut b, by, step)?;
        match State::from_byte(b[0]) {
            Some(State::AccessDenied) => Err(MeasureError::FarEndBusy {
                server: self.addr.to_string(),
                why: "the iperf3 server is running another test".into(),
            }),
            Some(State::ServerError) => {
                let mut codes = [0u8; 8];
                self.read_exact(&mut codes, by, "reading the server's error code")?;
                Err(self.fail(server_error(codes, step)))
            }
            Some(s) => Ok(s),
            None => Err(self.fail(format!(
                "the server answered byte {} while {step}, which is no iperf3 state (is it an \
                 iperf3 server?)",
                b[0]
            ))),
        }
    }

    /// Reads a state byte that must be `want`.
    pub fn expect(&mut self, want: State, by: Instant, step: &str) -> Result<(), MeasureError> {
        match self.read_state(by, step)? {
            s if s == want => Ok(()),
            State::ServerTerminate => Err(self.fail(format!(
                "the iperf3 server was shut down while {step} (SERVER_TERMINATE)"
            ))),
            other => Err(self.fail(format!(
                "the iperf3 server sent {} while {step}, where iperf3 sends {}",
                other.name(),
                want.name()
            ))),
        }
    }

    /// Reads a length-prefixed JSON message of at most `max` bytes, whole by `by`.
    pub fn read_json(
        &mut self,
        max: usize,
        by: Instant,
        step: &str,
    ) -> Result<Value, MeasureError> {
        let mut prefix = [0u8; 4];
        self.read_exact(&mut prefix, by, step)?;
        let len = wire::json_length(prefix, max).map_err(|e| self.wire_error(e, step))?;
        let mut body = vec![0u8; len];
        self.read_exact(&mut body, by, step)?;
        wire::parse_json(&body).map_err(|e| self.wire_error(e, step))
    }

    pub fn wire_error(&self, e: WireError, step: &str) -> MeasureError {
        self.fail(format!("the iperf3 server {e} while {step}"))
    }
}

/// SERVER_ERROR's codes (two big-endian int32s, iperf_server_api.c `cleanup_server`) in words.
pub(crate) fn server_error(codes: [u8; 8], step: &str) -> String {
    let i_errno = i32::from_be_bytes([codes[0], codes[1], codes[2], codes[3]]);
    let errno = i32::from_be_bytes([codes[4], codes[5], codes[6], codes[7]]);
    format!(
        "the iperf3 server reported an error while {step}: {}",
        server_error_text(i_errno, errno)
    )
}
