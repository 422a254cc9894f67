//! iperf3's control protocol as data: the cookie, the state bytes, the length-prefixed JSON
//! messages (test parameters, results). Pure; no sockets here.
//!
//! Heads up! This follows iperf3's own source (github.com/esnet/iperf, read at 3.21 and checked
//! against 3.12, the Debian/Ubuntu one); the file each constant comes from is named next to it.
//! Everything a server sends is checked here before the I/O layer acts on it: an unknown state
//! byte, a JSON length above the bound, a body that is not JSON or lacks a field is an error
//! value, never a panic or an allocation of the announced size.

use serde_json::{json, Map, Value};

/// iperf.h: `#define COOKIE_SIZE 37 /* size of an ascii uuid */`: 36 characters and a NUL.
pub const COOKIE_SIZE: usize = 37;
/// iperf_util.c `make_cookie`: the characters a cookie is drawn from.
const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// iperf.h: `#define MAX_PARAMS_JSON_STRING 8 * 1024`, the most a server reads of our parameters.
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
/// The most of the server's results we read. iperf3 itself reads them unbounded
/// (`JSON_read(fd, 0)`); without `get_server_output` they are ~250 bytes a stream, and at most
/// 2 x 128 streams (iperf.h `MAX_STREAMS 128`, both ways) that is ~64 KiB.
pub const MAX_RESULTS_JSON: usize = 256 * 1024;
/// iperf.h `#define MAX_STREAMS 128`: the server refuses more `parallel` streams.
pub const MAX_STREAMS: usize = 128;
/// iperf.h `#define MAX_TIME 86400`: the longest `time` a server accepts (seconds).
pub const MAX_TIME_S: u64 = 86_400;

/// The cookie that names a test: on the control connection and first on every data connection.
pub type Cookie = [u8; COOKIE_SIZE];

/// A cookie from 36 random bytes (only the low 5 bits of each are used, as `make_cookie`).
pub fn cookie(random: &[u8; COOKIE_SIZE - 1]) -> Cookie {
    let mut c = [0u8; COOKIE_SIZE];
    for (out, r) in c.iter_mut().zip(random) {
        *out = COOKIE_CHARS[usize::from(r & 31)];
    }
    // c[36] stays NUL: the server compares with strncmp, which stops there.
    c
}

/// The control connection's state bytes (iperf_api.h, "states"); a signed char on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    /// `ACCESS_DENIED (-1)`: the server runs another test (or the cookie was wrong).
    AccessDenied,
    /// `SERVER_ERROR (-2)`, followed by two 32-bit big-endian numbers: iperf3's error code and
    /// the server's errno.
    ServerError,
}

impl State {
    /// iperf_api.h: `#define TEST_START 1` ... `#define IPERF_DONE 16`, `ACCESS_DENIED (-1)`,
    /// `SERVER_ERROR (-2)`. 3, 5..8 are defined "not used" and are not accepted.
    const TABLE: [(State, i8); 13] = [
        (State::TestStart, 1),
        (State::TestRunning, 2),
        (State::TestEnd, 4),
        (State::ParamExchange, 9),
        (State::CreateStreams, 10),
        (State::ServerTerminate, 11),
        (State::ClientTerminate, 12),
        (State::ExchangeResults, 13),
        (State::DisplayResults, 14),
        (State::IperfStart, 15),
        (State::IperfDone, 16),
        (State::AccessDenied, -1),
        (State::ServerError, -2),
    ];

    /// The state a byte names, if any.
    pub fn from_byte(b: u8) -> Option<State> {
        let v = b as i8;
        State::TABLE.iter().find(|(_, n)| *n == v).map(|(s, _)| *s)
    }

    pub fn byte(self) -> u8 {
        State::TABLE
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, n)| *n as u8)
            .unwrap_or(0)
    }

    /// iperf3's own name for it, for messages.
    pub fn name(self) -> &'static str {
        match self {
            State::TestStart => "TEST_START",
            State::TestRunning => "TEST_RUNNING",
            State::TestEnd => "TEST_END",
            State::ParamExchange => "PARAM_EXCHANGE",
            State::CreateStreams => "CREATE_STREAMS",
            State::ServerTerminate => "SERVER_TERMINATE",
            State::ClientTerminate => "CLIENT_TERMINATE",
            State::ExchangeResults => "EXCHANGE_RESULTS",
            State::DisplayResults => "DISPLAY_RESULTS",
            State::IperfStart => "IPERF_START",
            State::IperfDone => "IPERF_DONE",
            State::AccessDenied => "ACCESS_DENIED",
            State::ServerError => "SERVER_ERROR",
        }
    }
}

/// Who sends: iperf3's `-R` and `--bidir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The client sends (uploads).
    Normal,
    /// The server sends (`reverse`: downloads).
    Reverse,
    /// Both send, `parallel` streams each way (`bidirectional`).
    Bidirectional,
}

/// What the client asks for (iperf_api.c `send_parameters`; the server's checks are in
/// `get_parameters`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub mode: Mode,
    /// Streams per direction, 1..=[`MAX_STREAMS`].
    pub parallel: usize,
    /// Test length in whole seconds, 1..=[`MAX_TIME_S`].
    pub time_s: u64,
    /// Bytes per read/write on the server (`len`, iperf3's `-l`).
    pub len: usize,
    /// The TOS byte the server marks its data sockets with (DSCP << 2); 0 sends none.
    pub tos: u8,
    /// Sent as `client_version`, which servers only log.
    pub client_version: String,
}

impl Params {
    pub fn to_json(&self) -> Value {
        let mut j = Map::new();
        j.insert("tcp".into(), Value::Bool(true));
        j.insert("omit".into(), json!(0));
        j.insert("time".into(), json!(self.time_s));
        // "num" and "blockcount" 0: the test ends on time (our TEST_END), not on a byte count.
        j.insert("num".into(), json!(0));
        j.insert("blockcount".into(), json!(0));
        j.insert("parallel".into(), json!(self.parallel));
        match self.mode {
            Mode::Normal => {}
            Mode::Reverse => {
                j.insert("reverse".into(), Value::Bool(true));
            }
            Mode::Bidirectional => {
                j.insert("bidirectional".into(), Value::Bool(true));
            }
        }
        j.insert("len".into(), json!(self.len));
        // send_parameters: `if (test->settings->tos) cJSON_AddNumberToObject(j, "TOS", ...)`.
        if self.tos != 0 {
            j.insert("TOS".into(), json!(self.tos));
        }
        j.insert("client_version".into(), json!(self.client_version));
        Value::Object(j)
    }
}

/// iperf_api.c `iperf_add_stream`: the first stream is id 1, the n-th (n >= 2) is id n + 1 ("this
/// would ideally be set to 1, however this will not be changed ... would break multi-stream tests
/// between old and new iperf3 versions"). Both sides number streams in connection order.
pub fn stream_id(index: usize) -> u64 {
    if index == 0 {
        1
    } else {
        index as u64 + 2
    }
}

/// A malformed message from the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("announced {len} bytes of JSON, more than the {max} bytes iperf3 ever sends here")]
    TooLong { len: u64, max: usize },
    #[error("announced an empty JSON message")]
    Empty,
    #[error("sent a JSON message that does not parse: {0}")]
    BadJson(String),
    #[error("sent results without {0}")]
    Missing(&'static str),
}

/// JSON_write: a 4-byte big-endian length, then the unformatted JSON, no NUL.
pub fn frame_json(value: &Value) -> Vec<u8> {
    let body = value.to_string();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body.as_bytes());
    out
}

/// The body length a JSON_read prefix announces, if it is within `max` (JSON_read refuses 0).
pub fn json_length(prefix: [u8; 4], max: usize) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(prefix);
    if len == 0 {
        return Err(WireError::Empty);
    }
    match usize::try_from(len) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(WireError::TooLong {
            len: u64::from(len),
            max,
        }),
    }
}

pub fn parse_json(body: &[u8]) -> Result<Value, WireError> {
    // cJSON stops at a NUL, and some versions send one; accept it as the end.
    let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
    serde_json::from_slice(&body[..end]).map_err(|e| WireError::BadJson(e.to_string()))
}

/// One stream's entry in a results message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamBytes {
    pub id: u64,
    /// What the sender of the message counted on that stream: bytes it sent (as sender) or
    /// received (as receiver).
    pub bytes: u64,
}

/// Our results for the server (iperf_api.c `send_results`; the server's `get_results` needs
/// the cpu_util fields, `sender_has_retransmits`, and per stream id, bytes, retransmits, jitter,
/// errors, packets, and omitted_errors with omitted_packets or neither; an unknown id fails the
/// test with IESTREAMID). `sends`: whether we sent on any stream (else -1 retransmits, as iperf3
/// does in receive-only mode).
pub fn client_results(streams: &[StreamBytes], sends: bool, seconds: f64) -> Value {
    let list: Vec<Value> = streams
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": -1,
                "jitter": 0,
                "errors": 0,
                "omitted_errors": 0,
                "packets": 0,
                "omitted_packets": 0,
                "start_time": 0,
                "end_time": if seconds.is_finite() { seconds.max(0.0) } else { 0.0 },
            })
        })
        .collect();
    json!({
        "cpu_util_total": 0,
        "cpu_util_user": 0,
        "cpu_util_system": 0,
        // 0, not 1: we report no retransmit counts, so the server must not expect them.
        "sender_has_retransmits": if sends { 0 } else { -1 },
        "streams": list,
    })
}

/// What we use of the server's results.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerResults {
    pub streams: Vec<StreamBytes>,
    pub congestion: Option<String>,
}

/// Reads the server's results as iperf3's `get_results` does: the cpu_util fields and
/// `sender_has_retransmits` must be there, `streams` must be an array of objects with a numeric
/// id and bytes.
pub fn parse_server_results(v: &Value) -> Result<ServerResults, WireError> {
    for field in [
        "cpu_util_total",
        "cpu_util_user",
        "cpu_util_system",
        "sender_has_retransmits",
    ] {
        if !v.get(field).is_some_and(Value::is_number) {
            return Err(WireError::Missing(field));
        }
    }
    let list = v
        .get("streams")
        .and_then(Value::as_array)
        .ok_or(WireError::Missing("streams"))?;
    let number = |s: &Value, f: &'static str| -> Result<u64, WireError> {
        // cJSON prints large counts as doubles ("1.2e+10"); accept those, not negatives.
        let n = s.get(f).ok_or(WireError::Missing(f))?;
        n.as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|x| *x >= 0.0 && x.is_finite())
                    .map(|x| x as u64)
            })
            .ok_or(WireError::Missing(f))
    };
    let streams = list
        .iter()
        .map(|s| {
            Ok(StreamBytes {
                id: number(s, "id")?,
                bytes: number(s, "bytes")?,
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    let congestion = v
        .get("congestion_used")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(32).collect());
    Ok(ServerResults {
        streams,
        congestion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_bytes_are_iperf3s() {
        assert_eq!(State::ParamExchange.byte(), 9);
        assert_eq!(State::CreateStreams.byte(), 10);
        assert_eq!(State::TestStart.byte(), 1);
        assert_eq!(State::TestRunning.byte(), 2);
        assert_eq!(State::TestEnd.byte(), 4);
        assert_eq!(State::ExchangeResults.byte(), 13);
        assert_eq!(State::DisplayResults.byte(), 14);
        assert_eq!(State::IperfDone.byte(), 16);
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        for unused in [0u8, 3, 5, 6, 7, 8, 17, 0x7f, 0x80, 0xfd] {
            assert_eq!(State::from_byte(unused), None, "{unused}");
        }
    }

    #[test]
    fn cookie_is_36_base32_characters_and_a_nul() {
        let c = cookie(&[0xff; 36]);
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|&b| b == b'7'));
        let c = cookie(&std::array::from_fn(|i| i as u8));
        assert_eq!(&c[..4], b"abcd");
    }

    #[test]
    fn params_say_what_iperf3_reads() {
        let p = Params {
            mode: Mode::Bidirectional,
            parallel: 4,
            time_s: 12,
            len: 131_072,
            tos: 0xb8,
            client_version: "unbloat".into(),
        };
        let v = p.to_json();
        assert_eq!(v["tcp"], true);
        assert_eq!(v["time"], 12);
        assert_eq!(v["parallel"], 4);
        assert_eq!(v["bidirectional"], true);
        assert!(v.get("reverse").is_none());
        assert_eq!(v["len"], 131_072);
        assert_eq!(v["TOS"], 0xb8);
        let quiet = Params {
            mode: Mode::Reverse,
            tos: 0,
            ..p
        }
        .to_json();
        assert_eq!(quiet["reverse"], true);
        assert!(quiet.get("TOS").is_none());
        assert!(frame_json(&quiet).len() < MAX_PARAMS_JSON);
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<u64> = (0..4).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5]);
    }

    #[test]
    fn a_two_gigabyte_json_is_an_error_not_an_allocation() {
        assert_eq!(
            json_length(0x8000_0000u32.to_be_bytes(), MAX_RESULTS_JSON),
            Err(WireError::TooLong {
                len: 0x8000_0000,
                max: MAX_RESULTS_JSON
            })
        );
        assert_eq!(json_length([0; 4], 10), Err(WireError::Empty));
        assert_eq!(json_length(10u32.to_be_bytes(), 10), Ok(10));
    }

    #[test]
    fn server_results_as_iperf3_sends_them() {
        // Shaped as send_results writes it (cJSON prints large counts as doubles); the second
        // stream lacks the omitted_* pair, as servers before 3.14 send.
        let text = r#"{"cpu_util_total":1.9,"cpu_util_user":0.1,"cpu_util_system":1.8,"sender_has_retransmits":-1,"congestion_used":"cubic","streams":[{"id":1,"bytes":1234,"retransmits":-1,"jitter":0,"errors":0,"omitted_errors":0,"packets":0,"omitted_packets":0,"start_time":0,"end_time":2.0},{"id":3,"bytes":1.5e10,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.0}]}"#;
        let r = parse_server_results(&parse_json(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            r.streams,
            vec![
                StreamBytes { id: 1, bytes: 1234 },
                StreamBytes {
                    id: 3,
                    bytes: 15_000_000_000
                }
            ]
        );
        assert_eq!(r.congestion.as_deref(), Some("cubic"));
        assert_eq!(
            parse_server_results(&json!({"streams": []})),
            Err(WireError::Missing("cpu_util_total"))
        );
    }

    #[test]
    fn our_results_satisfy_get_results() {
        let v = client_results(&[StreamBytes { id: 1, bytes: 5 }], true, 2.5);
        let back = parse_server_results(&v).unwrap();
        assert_eq!(back.streams, vec![StreamBytes { id: 1, bytes: 5 }]);
        assert_eq!(v["sender_has_retransmits"], 0);
        for f in [
            "retransmits",
            "jitter",
            "errors",
            "packets",
            "omitted_errors",
        ] {
            assert!(v["streams"][0].get(f).is_some(), "{f}");
        }
    }

    proptest! {
        #[test]
        fn every_byte_decodes_or_is_refused(b in any::<u8>()) {
            if let Some(s) = State::from_byte(b) {
                prop_assert_eq!(s.byte(), b);
            }
        }

        #[test]
        fn frames_round_trip(n in 0u64..u64::MAX, s in ".{0,40}") {
            let v = json!({"n": n, "s": s});
            let framed = frame_json(&v);
            let len = json_length([framed[0], framed[1], framed[2], framed[3]], MAX_PARAMS_JSON);
            prop_assert_eq!(len, Ok(framed.len() - 4));
            prop_assert_eq!(parse_json(&framed[4..]), Ok(v));
        }

        #[test]
        fn garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(v) = parse_json(&body) {
                let _ = parse_server_results(&v);
            }
        }
    }
}
