//! The server over real sockets on 127.0.0.1: its limits, keep-alive, and what it refuses.

use super::*;
use std::io::{Read, Write};

/// `/slow` answers after 1.5 s; anything else echoes its method, path and body. A POST without
/// `x-ok` is refused before its body is read, as the page refuses a change without its token.
struct Echo;

impl Handler for Echo {
    fn early(&self, head: &Request) -> Option<Response> {
        (head.method == "POST" && head.header("x-ok").is_none())
            .then(|| Response::text(401, "no x-ok"))
    }

    fn answer(&self, r: Request) -> Response {
        if r.path == "/slow" {
            std::thread::sleep(Duration::from_millis(1500));
            return Response::text(200, "done");
        }
        let body = String::from_utf8_lossy(&r.body);
        Response::text(200, format!("{} {} {body}", r.method, r.path))
    }
}

const SHORT: Limits = Limits {
    connections: 4,
    header_timeout: Duration::from_millis(800),
    idle_timeout: Duration::from_millis(500),
    max_body: 100,
};

fn start(limits: Limits) -> SocketAddr {
    spawn_with("127.0.0.1:0".parse().unwrap(), Arc::new(Echo), limits).unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Everything until the server closes.
fn exchange(addr: SocketAddr, sent: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(sent).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Whether the server closed `s` within `wait` (an end of file or a reset).
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// A request that takes longer than the idle timeout is answered: only idleness with nothing
/// being answered closes a connection.
#[test]
fn a_slow_answer_is_not_idleness() {
    let out = exchange(
        start(SHORT),
        b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("\r\n\r\ndone"),
        "{out:?}"
    );
}

/// A client that sends its request head a byte at a time, each well within the idle timeout,
/// is closed once the head is late.
#[test]
fn a_request_head_dribbled_in_is_cut_off() {
    let mut s = connect(start(SHORT));
    let t0 = Instant::now();
    let mut closed = None;
    for b in b"GET /x HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        .iter()
        .cycle()
    {
        if s.write_all(&[*b]).is_err() || closed_within(&mut s, Duration::from_millis(100)) {
            closed = Some(t0.elapsed());
            break;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    let closed = closed.expect("a dribbling client kept its connection 5 s");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

/// Requests sent back to back on one connection are answered in order; HEAD gets the length
/// without the body; an early refusal of a request without a body keeps the connection;
/// `Connection: close` ends it.
#[test]
fn keep_alive_answers_requests_in_order() {
    let out = exchange(
        start(SHORT),
        b"GET /a HTTP/1.1\r\n\r\nHEAD /b?q=1 HTTP/1.1\r\n\r\nPOST /d HTTP/1.1\r\n\r\n\
          POST /c HTTP/1.1\r\nx-ok: 1\r\ncontent-length: 3\r\nconnection: close\r\n\r\nxyz",
    );
    let answers: Vec<&str> = out.split("HTTP/1.1 ").skip(1).collect();
    assert_eq!(answers.len(), 4, "{out:?}");
    assert!(answers[0].ends_with("\r\n\r\nGET /a "), "{out:?}");
    assert!(answers[1].contains("content-length: 8\r\n"), "{out:?}");
    assert!(
        answers[1].ends_with("\r\n\r\n"),
        "HEAD with a body: {out:?}"
    );
    assert!(answers[2].starts_with("401 "), "{out:?}");
    assert!(!answers[2].contains("connection: close"), "{out:?}");
    assert!(answers[3].contains("connection: close"), "{out:?}");
    assert!(answers[3].ends_with("\r\n\r\nPOST /c xyz"), "{out:?}");
}

/// The early answer (as the token's 401) and the body limit's 413 reach a client that has
/// already sent its body, not a reset; `Expect: 100-continue` gets its interim answer.
#[test]
fn refusals_are_read_by_the_client_and_expect_continue_is_answered() {
    let addr = start(SHORT);
    let big = "#".repeat(50_000);
    let refused = exchange(
        addr,
        format!(
            "POST /c HTTP/1.1\r\ncontent-length: {}\r\n\r\n{big}",
            big.len()
        )
        .as_bytes(),
    );
    assert!(refused.starts_with("HTTP/1.1 401 "), "{refused:.200}");
    let over = exchange(
        addr,
        format!(
            "POST /c HTTP/1.1\r\nx-ok: 1\r\ncontent-length: {}\r\n\r\n{big}",
            big.len()
        )
        .as_bytes(),
    );
    assert!(over.starts_with("HTTP/1.1 413 "), "{over:.200}");
    assert!(over.contains("over 100 bytes"), "{over:.200}");

    let mut s = connect(addr);
    s.write_all(b"POST /c HTTP/1.1\r\nx-ok: 1\r\nexpect: 100-continue\r\ncontent-length: 2\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"ok").unwrap();
    let mut rest = String::new();
    s.read_to_string(&mut rest).unwrap();
    assert!(rest.ends_with("POST /c ok"), "{rest:?}");
}

/// What this server does not take is refused with a status that says so, and closed.
#[test]
fn chunked_bodies_and_broken_heads_are_refused() {
    let addr = start(SHORT);
    let chunked = exchange(
        addr,
        b"POST /c HTTP/1.1\r\nx-ok: 1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    );
    assert!(chunked.starts_with("HTTP/1.1 501 "), "{chunked:?}");
    let broken = exchange(addr, b"GET /a HTTP/1.1\r\nno colon here\r\n\r\n");
    assert!(broken.starts_with("HTTP/1.1 400 "), "{broken:?}");
    let long = format!("GET /a HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(MAX_HEAD));
    assert!(exchange(addr, long.as_bytes()).starts_with("HTTP/1.1 431 "));
}

/// Issue 36, item 9: ~1,100 idle connections used to take every descriptor the daemon had.
/// Past the cap a connection is closed at once; an idle one is closed after the timeout; the
/// server still answers afterwards.
#[test]
fn idle_connections_are_capped_and_timed_out() {
    let addr = spawn("127.0.0.1:0".parse().unwrap(), Arc::new(Echo)).unwrap();
    let (cap, idle) = (LIMITS.connections, LIMITS.idle_timeout);
    let mut held: Vec<TcpStream> = (0..cap)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Each taken by the server before the next one comes.
    std::thread::sleep(Duration::from_millis(300));
    let mut over = TcpStream::connect(addr).unwrap();
    assert!(
        closed_within(&mut over, Duration::from_secs(2)),
        "a connection past the cap of {cap} was kept open"
    );
    let t0 = Instant::now();
    for s in &mut held {
        let left = (idle + Duration::from_secs(3)).saturating_sub(t0.elapsed());
        assert!(
            closed_within(s, left.max(Duration::from_millis(10))),
            "an idle connection outlived {idle:?}"
        );
    }
    let answer = exchange(addr, b"GET /after HTTP/1.1\r\nconnection: close\r\n\r\n");
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "no answer after the flood: {answer:?}"
    );
}
