//! irtt's test parameters (params.go): what a client asks for in its open request and what the
//! server grants in its open reply.
//!
//! On the wire each parameter is a type (a uvarint) followed by a value: a zig-zag varint for
//! numbers, a uvarint length and that many bytes for the server fill. A value of zero is not
//! sent at all (params.go `bytes()`), so "absent" and "zero" are the same thing; this
//! representation uses `None` and the enums' `None` variants for it.
//!
//! What callers can rely on: [`Params::parse`] accepts exactly what irtt's `parseParams` accepts
//! (unknown types are skipped, as irtt does), refuses the same invalid values, and also refuses
//! numbers no real server sends (a length over 65535, a DSCP over 255), so every parsed value
//! fits its type. It never panics, whatever the bytes.

use std::time::Duration;

/// params.go: `const paramsMaxLen = 128`; irtt's encoder has no room for more.
pub const PARAMS_MAX_LEN: usize = 128;
/// defaults.go: `const maxServerFillLen = 32`.
pub const MAX_SERVER_FILL_LEN: usize = 32;

// params.go: `pProtocolVersion = iota + 1`, then in this order.
const P_PROTOCOL_VERSION: u64 = 1;
const P_DURATION: u64 = 2;
const P_INTERVAL: u64 = 3;
const P_LENGTH: u64 = 4;
const P_RECEIVED_STATS: u64 = 5;
const P_STAMP_AT: u64 = 6;
const P_CLOCK: u64 = 7;
const P_DSCP: u64 = 8;
const P_SERVER_FILL: u64 = 9;

/// encoding/binary: `MaxVarintLen64`.
const MAX_VARINT_LEN: usize = 10;

/// What the server counts of the client's packets and returns in each reply (rstats.go).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReceivedStats {
    #[default]
    None = 0,
    /// How many requests the server received so far (4 bytes).
    Count = 1,
    /// Which of the last 64 sequence numbers arrived (8 bytes).
    Window = 2,
    Both = 3,
}

impl ReceivedStats {
    pub fn count(self) -> bool {
        matches!(self, ReceivedStats::Count | ReceivedStats::Both)
    }
    pub fn window(self) -> bool {
        matches!(self, ReceivedStats::Window | ReceivedStats::Both)
    }
    fn from_int(v: i64) -> Option<Self> {
        Some(match v {
            0 => ReceivedStats::None,
            1 => ReceivedStats::Count,
            2 => ReceivedStats::Window,
            3 => ReceivedStats::Both,
            _ => return None,
        })
    }
}

/// Where the server stamps the time (time.go `StampAt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StampAt {
    #[default]
    None = 0,
    Send = 1,
    Receive = 2,
    /// Receive and send: the server's holding time can be taken out of the round trip.
    Both = 3,
    /// One stamp halfway between receive and send (`--allow-stamp=single` servers give this
    /// instead of `Both`).
    Midpoint = 4,
}

impl StampAt {
    pub fn receive(self) -> bool {
        matches!(self, StampAt::Receive | StampAt::Both)
    }
    pub fn send(self) -> bool {
        matches!(self, StampAt::Send | StampAt::Both)
    }
    fn from_int(v: i64) -> Option<Self> {
        Some(match v {
            0 => StampAt::None,
            1 => StampAt::Send,
            2 => StampAt::Receive,
            3 => StampAt::Both,
            4 => StampAt::Midpoint,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        // time.go: `var sas = [...]string{"none", "send", "receive", "both", "midpoint"}`
        match self {
            StampAt::None => "none",
            StampAt::Send => "send",
            StampAt::Receive => "receive",
            StampAt::Both => "both",
            StampAt::Midpoint => "midpoint",
        }
    }
}

/// Which of the server's clocks a stamp carries (time.go `Clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Nanoseconds since 1970 (the server's `time.Now().UnixNano()`).
    Wall = 1,
    /// Nanoseconds since the server started; not stepped by NTP.
    Monotonic = 2,
    Both = 3,
}

impl Clock {
    pub fn wall(self) -> bool {
        matches!(self, Clock::Wall | Clock::Both)
    }
    pub fn mono(self) -> bool {
        matches!(self, Clock::Monotonic | Clock::Both)
    }
    fn from_int(v: i64) -> Option<Self> {
        Some(match v {
            1 => Clock::Wall,
            2 => Clock::Monotonic,
            3 => Clock::Both,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Monotonic => "monotonic",
            Clock::Both => "both",
        }
    }
}

/// One test's parameters (params.go `Params`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// version.go: `ProtocolVersion = 1`; must match between client and server.
    pub protocol_version: Option<u32>,
    /// How long the client will send. A server started with `-d` lowers it, and closes the
    /// session that long (plus 2 s) after its first request.
    pub duration: Option<Duration>,
    /// The time between requests. A server started with `-i` (default 10 ms) raises it, and
    /// drops requests that come faster (a token bucket, 5 packets deep).
    pub interval: Option<Duration>,
    /// The requests' and replies' length; `None`: just the headers.
    pub length: Option<u16>,
    pub received_stats: ReceivedStats,
    pub stamp_at: StampAt,
    pub clock: Option<Clock>,
    /// The whole TOS / traffic class byte (DSCP << 2), as irtt's `--dscp` takes it; the server
    /// marks its replies with it when it allows (`--allow-dscp`, default true), else grants 0.
    pub dscp: u8,
    /// Asks the server to fill the replies' payload ("rand", "pattern:..."); empty: its default.
    pub server_fill: String,
}

/// Why a parameter block is not one irtt would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error("the parameters end inside a number")]
    Short,
    #[error("a number in the parameters overflows 64 bits")]
    Overflow,
    #[error("parameter {param} has an invalid value {value}")]
    Value { param: &'static str, value: i64 },
    #[error("the server fill is longer than {MAX_SERVER_FILL_LEN} bytes or not UTF-8")]
    Fill,
}

impl Params {
    /// The encoded parameters, at most [`PARAMS_MAX_LEN`] bytes (the fill is cut at
    /// [`MAX_SERVER_FILL_LEN`] bytes, on a character boundary, as irtt's `putString` cuts it).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PARAMS_MAX_LEN);
        let mut num = |t: u64, v: i64| {
            if v != 0 {
                put_uvarint(&mut out, t);
                put_varint(&mut out, v);
            }
        };
        let ns =
            |d: Option<Duration>| d.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        num(
            P_PROTOCOL_VERSION,
            self.protocol_version.map_or(0, i64::from),
        );
        num(P_DURATION, ns(self.duration));
        num(P_INTERVAL, ns(self.interval));
        num(P_LENGTH, self.length.map_or(0, i64::from));
        num(P_RECEIVED_STATS, self.received_stats as i64);
        num(P_STAMP_AT, self.stamp_at as i64);
        num(P_CLOCK, self.clock.map_or(0, |c| c as i64));
        num(P_DSCP, i64::from(self.dscp));
        if !self.server_fill.is_empty() {
            let mut end = self.server_fill.len().min(MAX_SERVER_FILL_LEN);
            while !self.server_fill.is_char_boundary(end) {
                end -= 1;
            }
            put_uvarint(&mut out, P_SERVER_FILL);
            put_uvarint(&mut out, end as u64);
            out.extend_from_slice(&self.server_fill.as_bytes()[..end]);
        }
        out
    }

    /// Parses a parameter block (an open request's or reply's payload).
    pub fn parse(mut b: &[u8]) -> Result<Params, ParamsError> {
        let mut p = Params::default();
        while !b.is_empty() {
            let t = take_uvarint(&mut b)?;
            if t == P_SERVER_FILL {
                let len = take_uvarint(&mut b)?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= MAX_SERVER_FILL_LEN)
                    .ok_or(ParamsError::Fill)?;
                let bytes = b.get(..len).ok_or(ParamsError::Short)?;
                p.server_fill = String::from_utf8(bytes.to_vec()).map_err(|_| ParamsError::Fill)?;
                b = &b[len..];
                continue;
            }
            let v = take_varint(&mut b)?;
            let bad = |param| ParamsError::Value { param, value: v };
            let positive = |param| {
                u64::try_from(v)
                    .ok()
                    .filter(|&n| n > 0)
                    .map(Duration::from_nanos)
                    .ok_or(bad(param))
            };
            // Zero is what irtt's decoder yields for an absent parameter, so a zero sent
            // explicitly means "absent" here too (except where irtt refuses it).
            match t {
                P_PROTOCOL_VERSION => {
                    p.protocol_version = match v {
                        0 => None,
                        v => Some(u32::try_from(v).map_err(|_| bad("protocol version"))?),
                    }
                }
                // params.go: "duration %d is <= 0", "interval %d is <= 0".
                P_DURATION => p.duration = Some(positive("duration")?),
                P_INTERVAL => p.interval = Some(positive("interval")?),
                P_LENGTH => {
                    p.length = match v {
                        0 => None,
                        v => Some(u16::try_from(v).map_err(|_| bad("length"))?),
                    }
                }
                P_RECEIVED_STATS => {
                    p.received_stats = ReceivedStats::from_int(v).ok_or(bad("received stats"))?
                }
                P_STAMP_AT => p.stamp_at = StampAt::from_int(v).ok_or(bad("stamp at"))?,
                P_CLOCK => p.clock = Some(Clock::from_int(v).ok_or(bad("clock"))?),
                P_DSCP => p.dscp = u8::try_from(v).map_err(|_| bad("dscp"))?,
                // params.go: "note: unknown params are silently ignored"
                _ => {}
            }
        }
        Ok(p)
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// encoding/binary `PutVarint`: zig-zag, so small negative numbers stay short.
fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut ux = (v as u64) << 1;
    if v < 0 {
        ux = !ux;
    }
    put_uvarint(out, ux);
}

/// encoding/binary `Uvarint`: at most 10 bytes, the 10th at most 1.
fn take_uvarint(b: &mut &[u8]) -> Result<u64, ParamsError> {
    let mut x = 0u64;
    for (i, &byte) in b.iter().enumerate() {
        if i == MAX_VARINT_LEN {
            return Err(ParamsError::Overflow);
        }
        if byte < 0x80 {
            if i == MAX_VARINT_LEN - 1 && byte > 1 {
                return Err(ParamsError::Overflow);
            }
            *b = &b[i + 1..];
            return Ok(x | u64::from(byte) << (7 * i));
        }
        x |= u64::from(byte & 0x7f) << (7 * i);
    }
    if b.len() >= MAX_VARINT_LEN {
        return Err(ParamsError::Overflow);
    }
    Err(ParamsError::Short)
}

fn take_varint(b: &mut &[u8]) -> Result<i64, ParamsError> {
    let ux = take_uvarint(b)?;
    let x = (ux >> 1) as i64;
    Ok(if ux & 1 != 0 { !x } else { x })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_match_go_encoding_binary() {
        let mut out = Vec::new();
        put_varint(&mut out, 1);
        put_varint(&mut out, -1);
        put_varint(&mut out, 20_000_000);
        put_uvarint(&mut out, 300);
        // Go: PutVarint(1) = 02, PutVarint(-1) = 01, PutVarint(20ms) = 80 b4 89 13,
        // PutUvarint(300) = ac 02.
        assert_eq!(out, [0x02, 0x01, 0x80, 0xb4, 0x89, 0x13, 0xac, 0x02]);
        let mut b = &out[..];
        assert_eq!(take_varint(&mut b), Ok(1));
        assert_eq!(take_varint(&mut b), Ok(-1));
        assert_eq!(take_varint(&mut b), Ok(20_000_000));
        assert_eq!(take_uvarint(&mut b), Ok(300));
        assert!(b.is_empty());
        // Eleven continuation bytes, or a tenth byte over 1: Go's Uvarint overflows.
        assert_eq!(
            take_uvarint(&mut &[0xff; 11][..]),
            Err(ParamsError::Overflow)
        );
        let mut ten = [0xffu8; 10];
        ten[9] = 2;
        assert_eq!(take_uvarint(&mut &ten[..]), Err(ParamsError::Overflow));
        ten[9] = 1;
        assert_eq!(take_uvarint(&mut &ten[..]), Ok(u64::MAX));
        assert_eq!(take_uvarint(&mut &[0x80][..]), Err(ParamsError::Short));
    }

    /// The open request irtt 0.9.0's own client sent for `-i 20ms -d 60ms --tstamp=midpoint
    /// --clock=monotonic --stats=count`, captured on loopback.
    #[test]
    fn parses_what_the_irtt_client_sends() {
        let bytes = [
            0x01, 0x02, 0x02, 0x80, 0x9c, 0x9c, 0x39, 0x03, 0x80, 0xb4, 0x89, 0x13, 0x05, 0x02,
            0x06, 0x08, 0x07, 0x04,
        ];
        let p = Params::parse(&bytes).expect("irtt's own params");
        assert_eq!(
            p,
            Params {
                protocol_version: Some(1),
                duration: Some(Duration::from_millis(60)),
                interval: Some(Duration::from_millis(20)),
                received_stats: ReceivedStats::Count,
                stamp_at: StampAt::Midpoint,
                clock: Some(Clock::Monotonic),
                ..Params::default()
            }
        );
        assert_eq!(p.encode(), bytes);
    }

    #[test]
    fn refuses_what_irtt_refuses() {
        let one = |t: u64, v: i64| {
            let mut b = Vec::new();
            put_uvarint(&mut b, t);
            put_varint(&mut b, v);
            Params::parse(&b)
        };
        assert!(one(P_DURATION, 0).is_err());
        assert!(one(P_INTERVAL, -5).is_err());
        assert!(one(P_CLOCK, 0).is_err());
        assert!(one(P_STAMP_AT, 5).is_err());
        assert!(one(P_RECEIVED_STATS, 4).is_err());
        assert!(one(P_DSCP, 256).is_err());
        assert!(one(P_LENGTH, 70_000).is_err());
        // Unknown types are skipped, as params.go does.
        assert_eq!(one(42, 7), Ok(Params::default()));
        assert_eq!(
            Params::parse(&[P_SERVER_FILL as u8, 33]),
            Err(ParamsError::Fill)
        );
        assert_eq!(
            Params::parse(&[P_SERVER_FILL as u8, 3, b'a']),
            Err(ParamsError::Short)
        );
    }

    fn any_params() -> impl Strategy<Value = Params> {
        (
            proptest::option::of(1u32..=u32::MAX),
            proptest::option::of(1u64..=i64::MAX as u64),
            proptest::option::of(1u64..=i64::MAX as u64),
            proptest::option::of(1u16..=u16::MAX),
            0i64..=3,
            0i64..=4,
            proptest::option::of(1i64..=3),
            any::<u8>(),
            "[a-z:0-9]{0,32}",
        )
            .prop_map(|(v, d, i, l, rs, at, c, dscp, fill)| Params {
                protocol_version: v,
                duration: d.map(Duration::from_nanos),
                interval: i.map(Duration::from_nanos),
                length: l,
                received_stats: ReceivedStats::from_int(rs).unwrap_or_default(),
                stamp_at: StampAt::from_int(at).unwrap_or_default(),
                clock: c.and_then(Clock::from_int),
                dscp,
                server_fill: fill,
            })
    }

    proptest! {
        #[test]
        fn params_round_trip(p in any_params()) {
            let bytes = p.encode();
            prop_assert!(bytes.len() <= PARAMS_MAX_LEN);
            prop_assert_eq!(Params::parse(&bytes), Ok(p));
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..160)) {
            // Whatever parses re-encodes to something that parses the same.
            if let Ok(p) = Params::parse(&b) {
                prop_assert_eq!(Params::parse(&p.encode()), Ok(p));
            }
        }
    }
}
