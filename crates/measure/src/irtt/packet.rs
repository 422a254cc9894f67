//! irtt's packets (packet.go, fbuf.go): the open, echo and close requests a client sends and
//! the replies it gets.
//!
//! Every packet starts with the magic `14 a7 5b` and a flags byte. The fields that follow are
//! present or not; a packet does not say which, the test's parameters do ([`Layout`]). In this
//! order (packet.go `fcaps`), each little-endian:
//!
//! ```text
//! magic 3 | flags 1 | HMAC 16 (if flagged) | conn token 8 | seqno 4
//! | received count 4 | received window 8               (if received stats asked)
//! | receive wall 8 | receive mono 8                     (if stamped at receive)
//! | midpoint wall 8 | midpoint mono 8                   (if stamped at the midpoint)
//! | send wall 8 | send mono 8                           (if stamped at send)
//! | payload up to the test's length
//! ```
//!
//! The open request carries only magic, flags and the [`Params`]; its reply adds the token the
//! session goes by. An echo request carries the token, its sequence number and zeros where the
//! reply's stamps will be, so both directions carry the same bytes (irtt's client does this:
//! "include 0 timestamp in appropriate fields"). The close request is magic, flags, token; the
//! server does not answer it.
//!
//! What callers can rely on: [`parse_reply`] takes any bytes and either returns a reply whose
//! fields are all there, or says why not; it never panics and never reads past the datagram.

use super::params::{Clock, Params, ParamsError, ReceivedStats, StampAt};

/// packet.go: `var magic = []byte{0x14, 0xa7, 0x5b}`.
pub const MAGIC: [u8; 3] = [0x14, 0xa7, 0x5b];
// packet.go: `flOpen flags = 1 << iota`, then flReply, flClose, flHMAC.
pub const FLAG_OPEN: u8 = 0x01;
pub const FLAG_REPLY: u8 = 0x02;
pub const FLAG_CLOSE: u8 = 0x04;
pub const FLAG_HMAC: u8 = 0x08;
const FLAGS_ALL: u8 = FLAG_OPEN | FLAG_REPLY | FLAG_CLOSE | FLAG_HMAC;

/// Magic, flags, token and sequence number: every echo packet has them.
pub const ECHO_HEADER_LEN: usize = 16;
/// The longest echo packet without payload: both received stats, both stamps on both clocks.
pub const MAX_ECHO_LEN: usize = ECHO_HEADER_LEN + 4 + 8 + 4 * 8;
/// Magic, flags and token: the close request, and the start of an open reply.
const TOKEN_END: usize = 12;

/// Why a datagram is not an irtt reply this client can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("{len} bytes is too short for this irtt packet ({need} expected)")]
    Short { len: usize, need: usize },
    #[error("it does not start with irtt's magic bytes 14 a7 5b")]
    BadMagic,
    #[error("it sets flag bits irtt does not have ({0:#04x})")]
    UnknownFlags(u8),
    #[error("the server signs its packets with an HMAC key (irtt server --hmac); unbloat has no key and does not support HMAC")]
    Hmac,
    #[error("it is a request, not a reply")]
    NotReply,
    #[error("an open reply without a session token")]
    ZeroToken,
    #[error("its parameters are invalid: {0}")]
    Params(#[from] ParamsError),
}

/// Which optional fields an echo packet carries, from the session's granted parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub received_stats: ReceivedStats,
    pub stamp_at: StampAt,
    /// No clock: no stamp fields even if `stamp_at` asks for them (packet.go `stampZeroes`).
    pub clock: Option<Clock>,
}

impl Layout {
    pub fn of(p: &Params) -> Layout {
        Layout {
            received_stats: p.received_stats,
            stamp_at: p.stamp_at,
            clock: p.clock,
        }
    }

    fn stamp_len(&self) -> usize {
        self.clock
            .map_or(0, |c| 8 * (usize::from(c.wall()) + usize::from(c.mono())))
    }

    /// The echo packet's length without payload.
    pub fn echo_len(&self) -> usize {
        let stats = 4 * usize::from(self.received_stats.count())
            + 8 * usize::from(self.received_stats.window());
        let stamps = match self.stamp_at {
            StampAt::None => 0,
            StampAt::Send | StampAt::Receive | StampAt::Midpoint => 1,
            StampAt::Both => 2,
        };
        ECHO_HEADER_LEN + stats + stamps * self.stamp_len()
    }
}

/// One server time stamp, on the clocks the session asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    /// ns since 1970 on the server's wall clock.
    pub wall: Option<i64>,
    /// ns since the server started (its monotonic clock).
    pub mono: Option<i64>,
}

/// The server's stamps in one echo reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    pub receive: Option<Stamp>,
    pub send: Option<Stamp>,
    pub midpoint: Option<Stamp>,
}

impl Stamps {
    /// The server's receive and send times in ns on one clock: the monotonic one where both
    /// stamps have it (a wall-clock step between them would fake a holding time), else the
    /// wall clock. A midpoint stamp is both. `None` without usable stamps, or when a clock
    /// reads negative (no real server's does).
    pub fn receive_send_ns(&self) -> Option<(u64, u64)> {
        let (r, s) = match (self.receive, self.send, self.midpoint) {
            (Some(r), Some(s), _) => (r, s),
            (_, _, Some(m)) => (m, m),
            _ => return None,
        };
        let pick = |f: fn(&Stamp) -> Option<i64>| {
            let (r, s) = (f(&r)?, f(&s)?);
            Some((u64::try_from(r).ok()?, u64::try_from(s).ok()?))
        };
        pick(|t| t.mono).or_else(|| pick(|t| t.wall))
    }
}

/// The server's answer to an open request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReply {
    /// The session's token; zero only when `closed`.
    pub token: u64,
    /// The server opened and closed at once (irtt: a protocol version mismatch).
    pub closed: bool,
    /// What the server granted; it may have lowered or changed what was asked.
    pub params: Params,
}

/// The server's answer to one echo request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EchoReply {
    pub token: u64,
    pub seq: u32,
    /// The server ended the session with this reply (its `-d` limit was reached).
    pub closed: bool,
    pub received_count: Option<u32>,
    pub received_window: Option<u64>,
    pub stamps: Stamps,
}

/// A reply from an irtt server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Open(OpenReply),
    Echo(EchoReply),
}

/// The open request: asks for a session with `params`.
pub fn open_request(params: &Params) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(FLAG_OPEN);
    out.extend_from_slice(&params.encode());
    out
}

/// The close request for the session `token`.
pub fn close_request(token: u64) -> [u8; TOKEN_END] {
    let mut out = [0u8; TOKEN_END];
    out[..3].copy_from_slice(&MAGIC);
    out[3] = FLAG_CLOSE;
    out[4..12].copy_from_slice(&token.to_le_bytes());
    out
}

/// Echo request `seq` of session `token` into `buf`; returns its length ([`Layout::echo_len`]).
pub fn echo_request(token: u64, seq: u32, layout: &Layout, buf: &mut [u8; MAX_ECHO_LEN]) -> usize {
    let len = layout.echo_len();
    buf.fill(0);
    buf[..3].copy_from_slice(&MAGIC);
    buf[4..12].copy_from_slice(&token.to_le_bytes());
    buf[12..16].copy_from_slice(&seq.to_le_bytes());
    len
}

/// Reads the fields of a datagram in order, never past its end.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], PacketError> {
        let end = self.pos + N;
        let bytes = self.data.get(self.pos..end).ok_or(PacketError::Short {
            len: self.data.len(),
            need: end,
        })?;
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, PacketError> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, PacketError> {
        self.take().map(u64::from_le_bytes)
    }
    fn stamp(&mut self, clock: Option<Clock>) -> Result<Stamp, PacketError> {
        let clock = clock.map_or((false, false), |c| (c.wall(), c.mono()));
        let wall = if clock.0 {
            Some(self.u64()? as i64)
        } else {
            None
        };
        let mono = if clock.1 {
            Some(self.u64()? as i64)
        } else {
            None
        };
        Ok(Stamp { wall, mono })
    }
}

/// Parses a datagram from the server. Echo replies are read with the session's `layout`; open
/// replies need none.
pub fn parse_reply(data: &[u8], layout: &Layout) -> Result<Reply, PacketError> {
    let mut r = Reader { data, pos: 0 };
    let head: [u8; 4] = r.take()?;
    if head[..3] != MAGIC {
        return Err(PacketError::BadMagic);
    }
    let flags = head[3];
    if flags & !FLAGS_ALL != 0 {
        return Err(PacketError::UnknownFlags(flags));
    }
    if flags & FLAG_HMAC != 0 {
        return Err(PacketError::Hmac);
    }
    if flags & FLAG_REPLY == 0 {
        return Err(PacketError::NotReply);
    }
    let closed = flags & FLAG_CLOSE != 0;
    let token = r.u64()?;
    if flags & FLAG_OPEN != 0 {
        // conn.go open(): "received invalid zero conn token" unless the reply closes.
        if token == 0 && !closed {
            return Err(PacketError::ZeroToken);
        }
        let params = Params::parse(&data[TOKEN_END..])?;
        return Ok(Reply::Open(OpenReply {
            token,
            closed,
            params,
        }));
    }
    let seq = r.u32()?;
    // irtt 0.9.0 wrote a midpoint stamp instead of two whenever the receive and send stamps
    // were equal (fixed in 0.9.1: "timer resolution not accurate enough to measure server
    // processing time", irtt issue 13). Without payload the length tells which it wrote.
    let mut layout = *layout;
    let as_midpoint = Layout {
        stamp_at: StampAt::Midpoint,
        ..layout
    };
    if layout.stamp_at == StampAt::Both
        && layout.stamp_len() > 0
        && data.len() == as_midpoint.echo_len()
    {
        layout = as_midpoint;
    }
    if data.len() < layout.echo_len() {
        return Err(PacketError::Short {
            len: data.len(),
            need: layout.echo_len(),
        });
    }
    let rs = layout.received_stats;
    let received_count = if rs.count() { Some(r.u32()?) } else { None };
    let received_window = if rs.window() { Some(r.u64()?) } else { None };
    let at = layout.stamp_at;
    let receive = if at.receive() {
        Some(r.stamp(layout.clock)?)
    } else {
        None
    };
    let midpoint = if at == StampAt::Midpoint {
        Some(r.stamp(layout.clock)?)
    } else {
        None
    };
    let send = if at.send() {
        Some(r.stamp(layout.clock)?)
    } else {
        None
    };
    Ok(Reply::Echo(EchoReply {
        token,
        seq,
        closed,
        received_count,
        received_window,
        stamps: Stamps {
            receive,
            send,
            midpoint,
        },
    }))
}

/// What a server sends: an open reply (for tests of this module and of clients).
pub fn encode_open_reply(reply: &OpenReply) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(FLAG_OPEN | FLAG_REPLY | if reply.closed { FLAG_CLOSE } else { 0 });
    out.extend_from_slice(&reply.token.to_le_bytes());
    out.extend_from_slice(&reply.params.encode());
    out
}

/// What a server sends: an echo reply laid out as `layout` says; fields the layout has but the
/// reply lacks are zeros.
pub fn encode_echo_reply(reply: &EchoReply, layout: &Layout) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(FLAG_REPLY | if reply.closed { FLAG_CLOSE } else { 0 });
    out.extend_from_slice(&reply.token.to_le_bytes());
    out.extend_from_slice(&reply.seq.to_le_bytes());
    let rs = layout.received_stats;
    if rs.count() {
        out.extend_from_slice(&reply.received_count.unwrap_or(0).to_le_bytes());
    }
    if rs.window() {
        out.extend_from_slice(&reply.received_window.unwrap_or(0).to_le_bytes());
    }
    let clock = layout
        .clock
        .map_or((false, false), |c| (c.wall(), c.mono()));
    let mut stamp = |s: Option<Stamp>| {
        let s = s.unwrap_or_default();
        if clock.0 {
            out.extend_from_slice(&s.wall.unwrap_or(0).to_le_bytes());
        }
        if clock.1 {
            out.extend_from_slice(&s.mono.unwrap_or(0).to_le_bytes());
        }
    };
    let at = layout.stamp_at;
    if at.receive() {
        stamp(reply.stamps.receive);
    }
    if at == StampAt::Midpoint {
        stamp(reply.stamps.midpoint);
    }
    if at.send() {
        stamp(reply.stamps.send);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// A session between irtt 0.9.0's client and server on loopback (`-i 20ms -d 60ms
    /// --tstamp=midpoint --clock=monotonic --stats=count`), captured by a relay.
    #[test]
    fn reads_a_real_irtt_exchange() {
        let open_req = hex("14a75b01010202809c9c390380b48913050206080704");
        let open_reply = hex("14a75b03154b1ec4603910d0010202809c9c390380b48913050206080704");
        let echo_req = hex("14a75b00154b1ec4603910d001000000000000000000000000000000");
        let echo_reply = hex("14a75b02154b1ec4603910d00100000002000000b8288a4300000000");
        let close_req = hex("14a75b04154b1ec4603910d0");

        let unset = Layout::of(&Params::default());
        let Ok(Reply::Open(open)) = parse_reply(&open_reply, &unset) else {
            panic!("open reply");
        };
        assert_eq!(open.token, 0xd010_3960_c41e_4b15);
        assert!(!open.closed);
        assert_eq!(open_request(&open.params), open_req);
        let layout = Layout::of(&open.params);
        assert_eq!(layout.echo_len(), echo_req.len());
        let mut buf = [0u8; MAX_ECHO_LEN];
        let n = echo_request(open.token, 1, &layout, &mut buf);
        assert_eq!(buf[..n], echo_req[..]);
        let Ok(Reply::Echo(echo)) = parse_reply(&echo_reply, &layout) else {
            panic!("echo reply");
        };
        assert_eq!((echo.seq, echo.received_count), (1, Some(2)));
        let mid = 0x438a_28b8;
        assert_eq!(echo.stamps.receive_send_ns(), Some((mid, mid)));
        assert_eq!(close_request(open.token), close_req[..]);
        // The request itself is not a reply.
        assert_eq!(parse_reply(&echo_req, &layout), Err(PacketError::NotReply));
    }

    #[test]
    fn says_why_a_datagram_is_not_a_reply() {
        let layout = Layout::of(&Params::default());
        assert_eq!(
            parse_reply(b"HTTP/1.1 400", &layout),
            Err(PacketError::BadMagic)
        );
        assert!(matches!(
            parse_reply(&[0x14, 0xa7], &layout),
            Err(PacketError::Short { .. })
        ));
        assert_eq!(
            parse_reply(&[0x14, 0xa7, 0x5b, 0x12], &layout),
            Err(PacketError::UnknownFlags(0x12))
        );
        let mut signed = hex("14a75b0b");
        signed.extend_from_slice(&[0; 24]);
        assert_eq!(parse_reply(&signed, &layout), Err(PacketError::Hmac));
        let zero = encode_open_reply(&OpenReply {
            token: 0,
            closed: false,
            params: Params::default(),
        });
        assert_eq!(parse_reply(&zero, &layout), Err(PacketError::ZeroToken));
    }

    #[test]
    fn a_0_9_0_midpoint_stamp_in_place_of_two_is_read_as_a_midpoint() {
        let both = Layout {
            received_stats: ReceivedStats::Both,
            stamp_at: StampAt::Both,
            clock: Some(Clock::Both),
        };
        let mid = Layout {
            stamp_at: StampAt::Midpoint,
            ..both
        };
        let stamp = Stamp {
            wall: Some(1_700_000_000_000_000_000),
            mono: Some(5_000),
        };
        let reply = EchoReply {
            token: 9,
            seq: 3,
            closed: false,
            received_count: Some(4),
            received_window: Some(0xf),
            stamps: Stamps {
                midpoint: Some(stamp),
                ..Stamps::default()
            },
        };
        let bytes = encode_echo_reply(&reply, &mid);
        assert_eq!(parse_reply(&bytes, &both), Ok(Reply::Echo(reply)));
    }

    fn any_layout() -> impl Strategy<Value = Layout> {
        (0usize..4, 0usize..5, 0usize..4).prop_map(|(rs, at, c)| Layout {
            received_stats: [
                ReceivedStats::None,
                ReceivedStats::Count,
                ReceivedStats::Window,
                ReceivedStats::Both,
            ][rs],
            stamp_at: [
                StampAt::None,
                StampAt::Send,
                StampAt::Receive,
                StampAt::Both,
                StampAt::Midpoint,
            ][at],
            clock: [
                None,
                Some(Clock::Wall),
                Some(Clock::Monotonic),
                Some(Clock::Both),
            ][c],
        })
    }

    fn any_stamp(clock: Option<Clock>) -> impl Strategy<Value = Stamp> {
        let (w, m) = clock.map_or((false, false), |c| (c.wall(), c.mono()));
        (any::<i64>(), any::<i64>()).prop_map(move |(wall, mono)| Stamp {
            wall: w.then_some(wall),
            mono: m.then_some(mono),
        })
    }

    fn any_echo() -> impl Strategy<Value = (Layout, EchoReply)> {
        any_layout().prop_flat_map(|l| {
            let at = l.stamp_at;
            (
                Just(l),
                any::<(u64, u32, bool, u32, u64)>(),
                any_stamp(l.clock),
                any_stamp(l.clock),
            )
                .prop_map(move |(l, (token, seq, closed, count, window), a, b)| {
                    let stamps = Stamps {
                        receive: at.receive().then_some(a),
                        send: at.send().then_some(b),
                        midpoint: (at == StampAt::Midpoint).then_some(a),
                    };
                    let rs = l.received_stats;
                    let reply = EchoReply {
                        token,
                        seq,
                        closed,
                        received_count: rs.count().then_some(count),
                        received_window: rs.window().then_some(window),
                        stamps,
                    };
                    (l, reply)
                })
        })
    }

    proptest! {
        #[test]
        fn echo_replies_round_trip((layout, reply) in any_echo(), payload in 0usize..64) {
            let mut bytes = encode_echo_reply(&reply, &layout);
            prop_assert_eq!(bytes.len(), layout.echo_len());
            // A reply padded to the test's length reads the same.
            bytes.resize(bytes.len() + payload, 0x69);
            let got = parse_reply(&bytes, &layout);
            // Unless its length is a 0.9.0 midpoint reply's: see the test above.
            let mid = Layout { stamp_at: StampAt::Midpoint, ..layout };
            if !(layout.stamp_at == StampAt::Both && bytes.len() == mid.echo_len()) {
                prop_assert_eq!(got, Ok(Reply::Echo(reply)));
            }
        }

        #[test]
        fn requests_are_as_long_as_their_replies(layout in any_layout(), token: u64, seq: u32) {
            let mut buf = [0u8; MAX_ECHO_LEN];
            prop_assert_eq!(echo_request(token, seq, &layout, &mut buf), layout.echo_len());
        }

        #[test]
        fn any_datagram_parses_or_fails_without_panicking(
            layout in any_layout(),
            head in proptest::sample::select(vec![vec![], vec![0x14, 0xa7, 0x5b]]),
            flags: u8,
            rest in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let mut data = head;
            data.push(flags);
            data.extend_from_slice(&rest);
            if let Ok(Reply::Echo(e)) = parse_reply(&data, &layout) {
                prop_assert!(data.len() >= ECHO_HEADER_LEN);
                prop_assert_eq!(e.token, u64::from_le_bytes(data[4..12].try_into().unwrap()));
            }
        }
    }
}
