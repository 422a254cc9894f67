//! The wire formats between `unbloat test` and `unbloat serve`: the TCP control protocol and the
//! UDP latency probe.
//!
//! What callers can rely on:
//! - Every decoder takes arbitrary bytes and returns a typed [`ProtocolError`] or a value; none
//!   panics, allocates more than [`MAX_FRAME`] bytes for a frame, or trusts a length it was sent
//!   (property-tested with random input).
//! - `decode(encode(x)) == x` for every message (property-tested).
//! - A probe reply is never larger than the request it answers: [`ProbeReply::encode_into`]
//!   writes into the request's own length, and a request too short to carry a reply is rejected
//!   ([`ProbeError::TooShort`]), so the responder cannot be used as an amplifier.
//!
//! # TCP: hello, then length-prefixed frames
//! Each side first sends a 10-byte hello: the magic `unbloat\0` and its protocol version (u16,
//! big-endian). The client sends first and the server always answers with its own hello, even on
//! a version mismatch, so that *both* sides can say which versions met ("server speaks unbloat
//! protocol 2, this client speaks 1"). Then frames: a u32 big-endian length (at most
//! [`MAX_FRAME`]), a one-byte tag, and the fields in big-endian order.
//!
//! A connection carries either a test's control session ([`ClientMsg::Request`], answered by
//! [`ServerMsg::Accept`], [`ServerMsg::Busy`] or [`ServerMsg::Refused`]; ended by
//! [`ClientMsg::Finish`], answered by [`ServerMsg::Report`]) or one load stream
//! ([`ClientMsg::Attach`], answered by [`ServerMsg::Attached`] or [`ServerMsg::Refused`], then raw
//! bulk data in the stream's direction until one side closes).
//!
//! # UDP: probes
//! ```text
//! offset  size  field
//!  0      4     magic "ubp1"
//!  4      1     kind: 1 request, 2 reply
//!  5      1     class id (which probe series)
//!  6      1     DSCP the request was sent with (the reply is marked the same)
//!  7      1     reserved, 0
//!  8      8     test id
//! 16      4     sequence number within the class
//! 20      8     client send time, ns on the client's clock
//! 28      8     (reply) server receive time, ns on the server's clock
//! 36      8     (reply) server send time, ns on the server's clock
//! 44            end of a reply; a request must be at least this long (padding)
//! ```
//! The two clocks are unrelated; the client relates them afterwards from the fastest idle
//! round trips (see `probe::relate_clocks`), as crusader does.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use unbloat_report::Direction;

/// The least time the final report may take: on a bloated link the Finish and its report wait
/// behind what the load left queued. The lab's dsl-2002 (800 kbit/s, a 1000-packet modem FIFO)
/// holds 17 s of it after an unshaped download; `unbloat tune`'s capacity phase is one, and its
/// report did not arrive within the 5 s connection timeout. The client waits that long for the
/// report, and the server that long past the test for the Finish (an upload's queue holds it
/// back); a peer that is gone closes or resets the connection, which ends the wait at once.
pub const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The first eight bytes of every TCP connection, both ways.
pub const MAGIC: [u8; 8] = *b"unbloat\0";
/// The version of the control protocol this build speaks. Bump it on any change to the frames
/// or to the probe format; peers refuse each other on mismatch instead of guessing.
pub const PROTOCOL_VERSION: u16 = 1;
/// Length of a hello: magic + version.
pub const HELLO_LEN: usize = MAGIC.len() + 2;
/// The largest frame body either side accepts. The biggest legitimate frame is a request with
/// [`MAX_WIRE_STREAMS`] streams (about 530 bytes) or a refusal reason; 4 KiB leaves room and
/// keeps a hostile length prefix from making us allocate much.
pub const MAX_FRAME: usize = 4096;
/// The most streams one request can describe on the wire (the server's own limit is lower).
pub const MAX_WIRE_STREAMS: usize = 255;
/// The longest refusal reason sent or accepted, in bytes.
pub const MAX_REASON: usize = 1024;

/// Magic of a UDP probe packet.
pub const PROBE_MAGIC: [u8; 4] = *b"ubp1";
/// Length of a probe reply, and therefore the minimum length of a request.
pub const PROBE_REPLY_LEN: usize = 44;
/// Length the client pads its requests to: the reply length, so replies equal requests in size.
pub const PROBE_REQUEST_LEN: usize = PROBE_REPLY_LEN;
/// Requests longer than this are dropped (a probe has no reason to be big).
pub const PROBE_MAX_LEN: usize = 1472;

const PROBE_KIND_REQUEST: u8 = 1;
const PROBE_KIND_REPLY: u8 = 2;

/// What can be wrong with bytes received on the control connection.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    #[error("the peer closed the connection")]
    Closed,
    #[error("the peer is not an unbloat endpoint (bad magic bytes {0:02x?})")]
    BadMagic([u8; 8]),
    #[error("frame of {len} bytes is larger than the limit of {max}")]
    FrameTooLarge { len: u32, max: usize },
    #[error("frame ends early")]
    Truncated,
    #[error("frame has {0} unexpected bytes at its end")]
    TrailingBytes(usize),
    #[error("unknown message tag {0}")]
    UnknownTag(u8),
    #[error("invalid field {field}: {why}")]
    BadField { field: &'static str, why: String },
}

/// One load stream as the client asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSpec {
    pub direction: Direction,
    /// DSCP code point 0..=63 the sender marks the stream with.
    pub dscp: u8,
}

/// A test the client asks the server to take part in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRequest {
    /// Random id chosen by the client; names the test in stream attaches and probes.
    pub test_id: u64,
    /// How long the load streams run, ms.
    pub load_ms: u32,
    /// The whole session (idle phases included), ms; the server frees the test after it.
    pub session_ms: u32,
    pub streams: Vec<StreamSpec>,
}

/// Messages from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMsg {
    Request(TestRequest),
    /// This connection is stream `stream` of test `test_id`.
    Attach {
        test_id: u64,
        stream: u16,
    },
    /// The client is done; the server answers with a [`ServerMsg::Report`].
    Finish,
}

/// Messages from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// The test runs; probes go to this UDP port on the server's address.
    Accept { probe_port: u16 },
    /// The server already runs `active` tests of at most `limit`.
    Busy { active: u16, limit: u16 },
    /// The request or attach is not acceptable, with a reason for the user.
    Refused { reason: String },
    /// A stream attach was accepted; bulk data follows.
    Attached,
    /// At the end: per stream, the payload bytes the server received (upload) or sent
    /// (download), and how many probes it answered.
    Report {
        stream_bytes: Vec<u64>,
        probes_answered: u64,
    },
}

/// The 10-byte hello for `version`.
pub fn encode_hello(version: u16) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..].copy_from_slice(&version.to_be_bytes());
    out
}

/// The peer's protocol version from its hello, or [`ProtocolError::BadMagic`].
pub fn decode_hello(bytes: &[u8; HELLO_LEN]) -> Result<u16, ProtocolError> {
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&bytes[..8]);
    if magic != MAGIC {
        return Err(ProtocolError::BadMagic(magic));
    }
    Ok(u16::from_be_bytes([bytes[8], bytes[9]]))
}

/// Reads the peer's hello.
pub fn read_hello(r: &mut impl Read) -> Result<u16, ProtocolError> {
    let mut buf = [0u8; HELLO_LEN];
    read_exact_or_closed(r, &mut buf)?;
    decode_hello(&buf)
}

/// Reads one frame body, refusing lengths above [`MAX_FRAME`] before allocating.
pub fn read_frame(r: &mut impl Read) -> Result<Vec<u8>, ProtocolError> {
    let mut len = [0u8; 4];
    read_exact_or_closed(r, &mut len)?;
    let len = u32::from_be_bytes(len);
    if len as usize > MAX_FRAME {
        return Err(ProtocolError::FrameTooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    let mut body = vec![0u8; len as usize];
    read_exact_or_closed(r, &mut body)?;
    Ok(body)
}

/// Writes one frame (length prefix + body) in a single write.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> Result<(), ProtocolError> {
    if body.len() > MAX_FRAME {
        return Err(ProtocolError::FrameTooLarge {
            len: body.len() as u32,
            max: MAX_FRAME,
        });
    }
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()?;
    Ok(())
}

/// A reader whose every read ends by one fixed instant: a hello or a frame read through it takes
/// at most the time left, however the peer spaces its bytes. A timeout per read would let a peer
/// that sends one byte just before each timeout hold the connection for as long as it liked.
pub struct Deadline<'a> {
    conn: &'a TcpStream,
    at: Instant,
}

impl<'a> Deadline<'a> {
    /// Reads from `conn` until `at`, then fail with [`io::ErrorKind::TimedOut`].
    pub fn new(conn: &'a TcpStream, at: Instant) -> Deadline<'a> {
        Deadline { conn, at }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(deadline_passed());
        }
        // set_read_timeout refuses zero; `left` is not zero here.
        self.conn.set_read_timeout(Some(left))?;
        match (&mut &*self.conn).read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(deadline_passed()),
            other => other,
        }
    }
}

fn deadline_passed() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the whole message did not arrive in time",
    )
}

/// Text from the peer made safe to print: control characters (a terminal's escape sequences,
/// carriage returns) are written as escapes (`\u{1b}`) instead of acting on the terminal.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn read_exact_or_closed(r: &mut impl Read, buf: &mut [u8]) -> Result<(), ProtocolError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => ProtocolError::Closed,
        _ => ProtocolError::Io(e),
    })
}

/// A bounds-checked reader over a frame body.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        let end = self.pos.checked_add(n).ok_or(ProtocolError::Truncated)?;
        let slice = self
            .buf
            .get(self.pos..end)
            .ok_or(ProtocolError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }
    fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ProtocolError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, ProtocolError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, ProtocolError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn finish(self) -> Result<(), ProtocolError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(ProtocolError::TrailingBytes(n)),
        }
    }
}

fn bad(field: &'static str, why: impl Into<String>) -> ProtocolError {
    ProtocolError::BadField {
        field,
        why: why.into(),
    }
}

const TAG_REQUEST: u8 = 1;
const TAG_ATTACH: u8 = 2;
const TAG_FINISH: u8 = 3;
const TAG_ACCEPT: u8 = 10;
const TAG_BUSY: u8 = 11;
const TAG_REFUSED: u8 = 12;
const TAG_ATTACHED: u8 = 13;
const TAG_REPORT: u8 = 14;

const DIR_UP: u8 = 0;
const DIR_DOWN: u8 = 1;

impl ClientMsg {
    /// The frame body of this message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            ClientMsg::Request(req) => {
                out.push(TAG_REQUEST);
                out.extend_from_slice(&req.test_id.to_be_bytes());
                out.extend_from_slice(&req.load_ms.to_be_bytes());
                out.extend_from_slice(&req.session_ms.to_be_bytes());
                // Callers build requests from profiles bounded far below 255 streams; clamp
                // rather than wrap so a bug cannot produce a frame that lies about its count.
                let n = req.streams.len().min(MAX_WIRE_STREAMS);
                out.push(n as u8);
                for s in &req.streams[..n] {
                    out.push(match s.direction {
                        Direction::Up => DIR_UP,
                        Direction::Down => DIR_DOWN,
                    });
                    out.push(s.dscp);
                }
            }
            ClientMsg::Attach { test_id, stream } => {
                out.push(TAG_ATTACH);
                out.extend_from_slice(&test_id.to_be_bytes());
                out.extend_from_slice(&stream.to_be_bytes());
            }
            ClientMsg::Finish => out.push(TAG_FINISH),
        }
        out
    }

    /// Parses a frame body sent by a client.
    pub fn decode(body: &[u8]) -> Result<ClientMsg, ProtocolError> {
        let mut f = Fields::new(body);
        let msg = match f.u8()? {
            TAG_REQUEST => {
                let test_id = f.u64()?;
                let load_ms = f.u32()?;
                let session_ms = f.u32()?;
                let n = f.u8()? as usize;
                let mut streams = Vec::with_capacity(n);
                for _ in 0..n {
                    let direction = match f.u8()? {
                        DIR_UP => Direction::Up,
                        DIR_DOWN => Direction::Down,
                        d => return Err(bad("direction", format!("{d} is neither up nor down"))),
                    };
                    let dscp = f.u8()?;
                    if dscp > 63 {
                        return Err(bad("dscp", format!("{dscp} is above 63")));
                    }
                    streams.push(StreamSpec { direction, dscp });
                }
                ClientMsg::Request(TestRequest {
                    test_id,
                    load_ms,
                    session_ms,
                    streams,
                })
            }
            TAG_ATTACH => ClientMsg::Attach {
                test_id: f.u64()?,
                stream: f.u16()?,
            },
            TAG_FINISH => ClientMsg::Finish,
            tag => return Err(ProtocolError::UnknownTag(tag)),
        };
        f.finish()?;
        Ok(msg)
    }
}

impl ServerMsg {
    /// The frame body of this message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            ServerMsg::Accept { probe_port } => {
                out.push(TAG_ACCEPT);
                out.extend_from_slice(&probe_port.to_be_bytes());
            }
            ServerMsg::Busy { active, limit } => {
                out.push(TAG_BUSY);
                out.extend_from_slice(&active.to_be_bytes());
                out.extend_from_slice(&limit.to_be_bytes());
            }
            ServerMsg::Refused { reason } => {
                out.push(TAG_REFUSED);
                let bytes = truncate_utf8(reason, MAX_REASON).as_bytes();
                out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                out.extend_from_slice(bytes);
            }
            ServerMsg::Attached => out.push(TAG_ATTACHED),
            ServerMsg::Report {
                stream_bytes,
                probes_answered,
            } => {
                out.push(TAG_REPORT);
                let n = stream_bytes.len().min(MAX_WIRE_STREAMS);
                out.push(n as u8);
                for b in &stream_bytes[..n] {
                    out.extend_from_slice(&b.to_be_bytes());
                }
                out.extend_from_slice(&probes_answered.to_be_bytes());
            }
        }
        out
    }

    /// Parses a frame body sent by a server.
    pub fn decode(body: &[u8]) -> Result<ServerMsg, ProtocolError> {
        let mut f = Fields::new(body);
        let msg = match f.u8()? {
            TAG_ACCEPT => ServerMsg::Accept {
                probe_port: f.u16()?,
            },
            TAG_BUSY => ServerMsg::Busy {
                active: f.u16()?,
                limit: f.u16()?,
            },
            TAG_REFUSED => {
                let len = f.u16()? as usize;
                if len > MAX_REASON {
                    return Err(bad(
                        "reason",
                        format!("{len} bytes is longer than {MAX_REASON}"),
                    ));
                }
                let reason = std::str::from_utf8(f.take(len)?)
                    .map_err(|e| bad("reason", e.to_string()))?
                    .to_string();
                ServerMsg::Refused { reason }
            }
            TAG_ATTACHED => ServerMsg::Attached,
            TAG_REPORT => {
                let n = f.u8()? as usize;
                let mut stream_bytes = Vec::with_capacity(n);
                for _ in 0..n {
                    stream_bytes.push(f.u64()?);
                }
                ServerMsg::Report {
                    stream_bytes,
                    probes_answered: f.u64()?,
                }
            }
            tag => return Err(ProtocolError::UnknownTag(tag)),
        };
        f.finish()?;
        Ok(msg)
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Why a UDP datagram is not a probe we answer or accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("datagram of {0} bytes is too short for a probe")]
    TooShort(usize),
    #[error("datagram of {0} bytes is longer than a probe may be")]
    TooLong(usize),
    #[error("not an unbloat probe (bad magic)")]
    BadMagic,
    #[error("probe kind {0} is not what was expected here")]
    WrongKind(u8),
}

/// A probe as the client sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRequest {
    pub class: u8,
    pub dscp: u8,
    pub test_id: u64,
    pub seq: u32,
    pub client_send_ns: u64,
}

/// The server's answer: the request's fields plus its two timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeReply {
    pub request: ProbeRequest,
    pub server_recv_ns: u64,
    pub server_send_ns: u64,
}

fn probe_header(buf: &mut [u8], kind: u8, r: &ProbeRequest) {
    buf[..4].copy_from_slice(&PROBE_MAGIC);
    buf[4] = kind;
    buf[5] = r.class;
    buf[6] = r.dscp;
    buf[7] = 0;
    buf[8..16].copy_from_slice(&r.test_id.to_be_bytes());
    buf[16..20].copy_from_slice(&r.seq.to_be_bytes());
    buf[20..28].copy_from_slice(&r.client_send_ns.to_be_bytes());
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn parse_probe(buf: &[u8], want_kind: u8) -> Result<ProbeRequest, ProbeError> {
    if buf.len() < PROBE_REPLY_LEN {
        return Err(ProbeError::TooShort(buf.len()));
    }
    if buf.len() > PROBE_MAX_LEN {
        return Err(ProbeError::TooLong(buf.len()));
    }
    if buf[..4] != PROBE_MAGIC {
        return Err(ProbeError::BadMagic);
    }
    if buf[4] != want_kind {
        return Err(ProbeError::WrongKind(buf[4]));
    }
    Ok(ProbeRequest {
        class: buf[5],
        dscp: buf[6] & 0x3f,
        test_id: be_u64(&buf[8..]),
        seq: u32::from_be_bytes([buf[16], buf[17], buf[18], buf[19]]),
        client_send_ns: be_u64(&buf[20..]),
    })
}

impl ProbeRequest {
    /// Writes the request into `buf` (padding with zeros) and returns the length used:
    /// [`PROBE_REQUEST_LEN`]. `buf` must be at least that long.
    pub fn encode_into(&self, buf: &mut [u8]) -> usize {
        let out = &mut buf[..PROBE_REQUEST_LEN];
        out.fill(0);
        probe_header(out, PROBE_KIND_REQUEST, self);
        PROBE_REQUEST_LEN
    }

    /// Parses a request. Requests shorter than a reply are refused, so the reply (written over
    /// the request's own length) can never be larger than what was received.
    pub fn decode(buf: &[u8]) -> Result<ProbeRequest, ProbeError> {
        parse_probe(buf, PROBE_KIND_REQUEST)
    }
}

impl ProbeReply {
    /// Writes the reply into `buf`, whose length is that of the request being answered (at least
    /// [`PROBE_REPLY_LEN`]), and returns `buf.len()`: the reply is exactly as long as the request.
    /// Returns `None` when `buf` is too short to carry a reply.
    pub fn encode_into(&self, buf: &mut [u8]) -> Option<usize> {
        if buf.len() < PROBE_REPLY_LEN {
            return None;
        }
        buf.fill(0);
        probe_header(buf, PROBE_KIND_REPLY, &self.request);
        buf[28..36].copy_from_slice(&self.server_recv_ns.to_be_bytes());
        buf[36..44].copy_from_slice(&self.server_send_ns.to_be_bytes());
        Some(buf.len())
    }

    /// Parses a reply.
    pub fn decode(buf: &[u8]) -> Result<ProbeReply, ProbeError> {
        let request = parse_probe(buf, PROBE_KIND_REPLY)?;
        Ok(ProbeReply {
            request,
            server_recv_ns: be_u64(&buf[28..]),
            server_send_ns: be_u64(&buf[36..]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream_spec() -> impl Strategy<Value = StreamSpec> {
        (any::<bool>(), 0u8..64).prop_map(|(up, dscp)| StreamSpec {
            direction: if up { Direction::Up } else { Direction::Down },
            dscp,
        })
    }

    fn client_msg() -> impl Strategy<Value = ClientMsg> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                prop::collection::vec(stream_spec(), 0..40)
            )
                .prop_map(|(test_id, load_ms, session_ms, streams)| {
                    ClientMsg::Request(TestRequest {
                        test_id,
                        load_ms,
                        session_ms,
                        streams,
                    })
                }),
            (any::<u64>(), any::<u16>())
                .prop_map(|(test_id, stream)| ClientMsg::Attach { test_id, stream }),
            Just(ClientMsg::Finish),
        ]
    }

    fn server_msg() -> impl Strategy<Value = ServerMsg> {
        prop_oneof![
            any::<u16>().prop_map(|probe_port| ServerMsg::Accept { probe_port }),
            (any::<u16>(), any::<u16>())
                .prop_map(|(active, limit)| ServerMsg::Busy { active, limit }),
            ".{0,200}".prop_map(|reason| ServerMsg::Refused { reason }),
            Just(ServerMsg::Attached),
            (prop::collection::vec(any::<u64>(), 0..40), any::<u64>()).prop_map(
                |(stream_bytes, probes_answered)| ServerMsg::Report {
                    stream_bytes,
                    probes_answered
                }
            ),
        ]
    }

    fn probe_request() -> impl Strategy<Value = ProbeRequest> {
        (
            any::<u8>(),
            0u8..64,
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
        )
            .prop_map(|(class, dscp, test_id, seq, client_send_ns)| ProbeRequest {
                class,
                dscp,
                test_id,
                seq,
                client_send_ns,
            })
    }

    proptest! {
        #[test]
        fn client_messages_round_trip(msg in client_msg()) {
            prop_assert_eq!(ClientMsg::decode(&msg.encode()).expect("decode"), msg);
        }

        #[test]
        fn server_messages_round_trip(msg in server_msg()) {
            prop_assert_eq!(ServerMsg::decode(&msg.encode()).expect("decode"), msg);
        }

        #[test]
        fn frames_round_trip_through_a_stream(msg in client_msg()) {
            let mut wire = Vec::new();
            write_frame(&mut wire, &msg.encode()).expect("write");
            let body = read_frame(&mut wire.as_slice()).expect("read");
            prop_assert_eq!(ClientMsg::decode(&body).expect("decode"), msg);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = ClientMsg::decode(&bytes);
            let _ = ServerMsg::decode(&bytes);
            let _ = read_frame(&mut bytes.as_slice());
            let _ = ProbeRequest::decode(&bytes);
            let _ = ProbeReply::decode(&bytes);
            if bytes.len() >= HELLO_LEN {
                let mut hello = [0u8; HELLO_LEN];
                hello.copy_from_slice(&bytes[..HELLO_LEN]);
                let _ = decode_hello(&hello);
            }
        }

        #[test]
        fn mutated_messages_never_panic(msg in client_msg(), pos in any::<usize>(), byte in any::<u8>()) {
            let mut body = msg.encode();
            let i = pos % body.len();
            body[i] = byte;
            let _ = ClientMsg::decode(&body);
            body.truncate(i);
            let _ = ClientMsg::decode(&body);
        }

        #[test]
        fn probe_requests_round_trip(req in probe_request()) {
            let mut buf = [0u8; PROBE_MAX_LEN];
            let n = req.encode_into(&mut buf);
            prop_assert_eq!(ProbeRequest::decode(&buf[..n]).expect("decode"), req);
        }

        #[test]
        fn probe_reply_is_never_larger_than_its_request(
            req in probe_request(), len in 0usize..PROBE_MAX_LEN, a in any::<u64>(), b in any::<u64>()
        ) {
            let mut request = vec![0u8; len.max(PROBE_REQUEST_LEN)];
            req.encode_into(&mut request);
            request.truncate(len);
            match ProbeRequest::decode(&request) {
                Ok(parsed) => {
                    let reply = ProbeReply { request: parsed, server_recv_ns: a, server_send_ns: b };
                    let mut out = vec![0u8; request.len()];
                    let n = reply.encode_into(&mut out).expect("a valid request fits a reply");
                    prop_assert!(n <= request.len());
                    prop_assert_eq!(ProbeReply::decode(&out[..n]).expect("decode"), reply);
                }
                Err(e) => prop_assert_eq!(e, ProbeError::TooShort(len)),
            }
        }
    }

    #[test]
    fn hello_detects_magic_and_version() {
        assert_eq!(decode_hello(&encode_hello(7)).expect("hello"), 7);
        let mut bad_hello = encode_hello(1);
        bad_hello[0] = b'X';
        assert!(matches!(
            decode_hello(&bad_hello),
            Err(ProtocolError::BadMagic(_))
        ));
    }

    #[test]
    fn oversized_frame_is_refused_before_reading_it() {
        let wire = (MAX_FRAME as u32 + 1).to_be_bytes();
        let err = read_frame(&mut wire.as_slice()).expect_err("too large");
        assert!(
            matches!(err, ProtocolError::FrameTooLarge { len, .. } if len == MAX_FRAME as u32 + 1)
        );
        let wire = u32::MAX.to_be_bytes();
        assert!(matches!(
            read_frame(&mut wire.as_slice()),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn short_stream_is_closed_not_a_panic() {
        assert!(matches!(
            read_frame(&mut [0u8, 0].as_slice()),
            Err(ProtocolError::Closed)
        ));
        assert!(matches!(
            read_frame(&mut [0u8, 0, 0, 9, 1].as_slice()),
            Err(ProtocolError::Closed)
        ));
    }

    #[test]
    fn request_with_bad_direction_or_dscp_is_refused() {
        let req = ClientMsg::Request(TestRequest {
            test_id: 1,
            load_ms: 1,
            session_ms: 2,
            streams: vec![StreamSpec {
                direction: Direction::Up,
                dscp: 0,
            }],
        });
        let mut body = req.encode();
        let last = body.len() - 1;
        body[last] = 64;
        assert!(matches!(
            ClientMsg::decode(&body),
            Err(ProtocolError::BadField { field: "dscp", .. })
        ));
        body[last] = 0;
        body[last - 1] = 9;
        assert!(matches!(
            ClientMsg::decode(&body),
            Err(ProtocolError::BadField {
                field: "direction",
                ..
            })
        ));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut body = ClientMsg::Finish.encode();
        body.push(0);
        assert!(matches!(
            ClientMsg::decode(&body),
            Err(ProtocolError::TrailingBytes(1))
        ));
    }

    #[test]
    fn long_reason_is_truncated_on_a_char_boundary() {
        let reason = "é".repeat(MAX_REASON);
        let body = ServerMsg::Refused { reason }.encode();
        match ServerMsg::decode(&body).expect("decode") {
            ServerMsg::Refused { reason } => {
                assert!(reason.len() <= MAX_REASON && !reason.is_empty())
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn request_shorter_than_a_reply_is_dropped() {
        let req = ProbeRequest {
            class: 0,
            dscp: 0,
            test_id: 1,
            seq: 2,
            client_send_ns: 3,
        };
        let mut buf = [0u8; PROBE_REQUEST_LEN];
        req.encode_into(&mut buf);
        assert_eq!(
            ProbeRequest::decode(&buf[..28]),
            Err(ProbeError::TooShort(28))
        );
        assert_eq!(ProbeRequest::decode(&buf).map(|r| r.seq), Ok(2));
    }
}
