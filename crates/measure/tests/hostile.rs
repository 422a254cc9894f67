//! Malformed and hostile input against a running in-process server, and the client's errors:
//! after each abuse the server must still serve a good client.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{plan, quiet, Running};
use unbloat_measure::protocol::{
    self, ClientMsg, ProbeRequest, ServerMsg, StreamSpec, TestRequest, PROBE_REQUEST_LEN,
};
use unbloat_measure::{MeasureError, NoProgress, ServeOptions};
use unbloat_report::Direction;

fn v4(server: &Running) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], server.addr.port()))
}

/// A short ping run must still succeed against `server`.
fn still_serves(server: &Running) {
    let p = plan(&v4(server).to_string(), "ping", None, 0.5, 0.3);
    let results =
        unbloat_measure::run_plan(&p, &mut NoProgress).expect("a good client is still served");
    let udp = &results.probes[0];
    assert!(
        udp.samples.iter().filter(|s| s.rtt_ms.is_some()).count() >= 5,
        "{udp:?}"
    );
}

fn connect(server: &Running) -> TcpStream {
    let c = TcpStream::connect(v4(server)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c
}

/// Reads until the server closes; true if it did within the read timeout.
fn closed_by_server(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn hello_ok(c: &mut TcpStream) {
    c.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
        .expect("hello");
    assert_eq!(
        protocol::read_hello(c).expect("server hello"),
        protocol::PROTOCOL_VERSION
    );
}

#[test]
fn garbage_hello_ends_only_that_connection() {
    let server = Running::loopback();
    let mut c = connect(&server);
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    assert!(closed_by_server(&mut c));
    still_serves(&server);
}

#[test]
fn wrong_version_is_told_to_both_sides() {
    let server = Running::loopback();
    let mut c = connect(&server);
    c.write_all(&protocol::encode_hello(99)).expect("hello");
    // The server still says which version it speaks, then closes.
    assert_eq!(
        protocol::read_hello(&mut c).expect("server hello"),
        protocol::PROTOCOL_VERSION
    );
    assert!(closed_by_server(&mut c));
    still_serves(&server);

    // A server of another version: the client's error names both versions.
    let fake = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = fake.local_addr().expect("addr");
    let t = std::thread::spawn(move || {
        let (mut s, _) = fake.accept().expect("accept");
        let _ = protocol::read_hello(&mut s);
        s.write_all(&protocol::encode_hello(2)).expect("hello");
    });
    let err = unbloat_measure::run_plan(
        &plan(&addr.to_string(), "ping", None, 0.5, 0.2),
        &mut NoProgress,
    )
    .expect_err("version mismatch");
    t.join().expect("fake server");
    assert!(
        matches!(
            err.error,
            MeasureError::WrongVersion {
                server: 2,
                client: 1
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("server speaks unbloat protocol 2, this client speaks 1"),
        "{err}"
    );
    assert!(err.partial.is_none());
}

#[test]
fn oversized_and_unknown_frames_end_only_that_connection() {
    let server = Running::loopback();
    let mut c = connect(&server);
    hello_ok(&mut c);
    c.write_all(&u32::MAX.to_be_bytes()).expect("length");
    assert!(closed_by_server(&mut c));

    let mut c = connect(&server);
    hello_ok(&mut c);
    protocol::write_frame(&mut c, &[200, 1, 2, 3]).expect("frame");
    assert!(closed_by_server(&mut c));

    // A frame cut in the middle, then the client hangs up.
    let mut c = connect(&server);
    hello_ok(&mut c);
    c.write_all(&[0, 0, 0, 40, 1, 2]).expect("partial");
    drop(c);
    still_serves(&server);
}

#[test]
fn too_many_streams_or_too_long_is_refused_with_the_limit() {
    let server = Running::start(ServeOptions {
        max_streams: 4,
        ..quiet("[::]:0")
    });
    let mut c = connect(&server);
    hello_ok(&mut c);
    let req = TestRequest {
        test_id: 7,
        load_ms: 1000,
        session_ms: 2000,
        streams: vec![
            StreamSpec {
                direction: Direction::Down,
                dscp: 0
            };
            5
        ],
    };
    protocol::write_frame(&mut c, &ClientMsg::Request(req).encode()).expect("request");
    match ServerMsg::decode(&protocol::read_frame(&mut c).expect("answer")).expect("decode") {
        ServerMsg::Refused { reason } => assert!(reason.contains("at most 4"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Through the client: a profile with 8 streams gets the reason as its error.
    let err = unbloat_measure::run_plan(
        &plan(&v4(&server).to_string(), "rrul", None, 0.5, 0.5),
        &mut NoProgress,
    )
    .expect_err("refused");
    assert!(
        matches!(&err.error, MeasureError::Refused { reason } if reason.contains("at most 4")),
        "{err}"
    );
    still_serves(&server);
}

#[test]
fn attach_to_an_unknown_test_is_refused() {
    let server = Running::loopback();
    let mut c = connect(&server);
    hello_ok(&mut c);
    protocol::write_frame(
        &mut c,
        &ClientMsg::Attach {
            test_id: 42,
            stream: 0,
        }
        .encode(),
    )
    .expect("attach");
    match ServerMsg::decode(&protocol::read_frame(&mut c).expect("answer")).expect("decode") {
        ServerMsg::Refused { reason } => assert!(reason.contains("no such test"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    still_serves(&server);
}

#[test]
fn silent_client_is_dropped_after_the_handshake_timeout() {
    let server = Running::start(ServeOptions {
        handshake_deadline: Duration::from_millis(800),
        ..quiet("[::]:0")
    });
    let mut silent = connect(&server);
    let start = Instant::now();
    still_serves(&server);
    assert!(closed_by_server(&mut silent));
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(4),
        "silent client held for {waited:?}"
    );
}

#[test]
fn udp_flood_gets_no_answer_and_changes_nothing() {
    let server = Running::loopback();
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.connect(v4(&server)).expect("connect");
    let mut x: u32 = 12345;
    for i in 0..5000usize {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let len = (x as usize) % 1600;
        let mut pkt: Vec<u8> = (0..len).map(|j| (x >> (j % 24)) as u8).collect();
        if i % 3 == 0 && len >= PROBE_REQUEST_LEN {
            // Well-formed probes of a test that is not running.
            let req = ProbeRequest {
                class: 0,
                dscp: 0,
                test_id: u64::from(x),
                seq: i as u32,
                client_send_ns: 0,
            };
            req.encode_into(&mut pkt);
        }
        let _ = udp.send(&pkt);
    }
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 2048];
    assert!(
        udp.recv(&mut buf).is_err(),
        "the responder answered a probe of no test"
    );
    still_serves(&server);
}

#[test]
fn busy_when_all_test_slots_are_taken() {
    let server = Running::start(ServeOptions {
        max_tests: 1,
        ..quiet("[::]:0")
    });
    let mut holder = connect(&server);
    hello_ok(&mut holder);
    let req = TestRequest {
        test_id: 1,
        load_ms: 1000,
        session_ms: 20_000,
        streams: vec![],
    };
    protocol::write_frame(&mut holder, &ClientMsg::Request(req).encode()).expect("request");
    let answer =
        ServerMsg::decode(&protocol::read_frame(&mut holder).expect("answer")).expect("decode");
    assert!(matches!(answer, ServerMsg::Accept { .. }), "{answer:?}");

    let err = unbloat_measure::run_plan(
        &plan(&v4(&server).to_string(), "ping", None, 0.5, 0.2),
        &mut NoProgress,
    )
    .expect_err("busy");
    assert!(
        matches!(
            err.error,
            MeasureError::Busy {
                active: 1,
                limit: 1
            }
        ),
        "{err}"
    );

    // Finishing the first test frees the slot.
    protocol::write_frame(&mut holder, &ClientMsg::Finish.encode()).expect("finish");
    let report =
        ServerMsg::decode(&protocol::read_frame(&mut holder).expect("report")).expect("decode");
    assert!(matches!(report, ServerMsg::Report { .. }), "{report:?}");
    drop(holder);
    still_serves(&server);
}

#[test]
fn nothing_listening_is_connection_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let err = unbloat_measure::run_plan(
        &plan(&format!("127.0.0.1:{port}"), "ping", None, 0.5, 0.2),
        &mut NoProgress,
    )
    .expect_err("refused");
    assert!(
        matches!(err.error, MeasureError::ConnectionRefused { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("unbloat serve"), "{err}");
}

#[test]
fn every_udp_probe_lost_is_a_firewall_error_with_partial_results() {
    // A control server that accepts the test but whose probe port answers nothing.
    let fake = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = fake.local_addr().expect("addr");
    let black_hole = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let probe_port = black_hole.local_addr().expect("addr").port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = fake.accept().expect("accept");
        let _ = protocol::read_hello(&mut s);
        s.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
            .expect("hello");
        let _ = protocol::read_frame(&mut s);
        protocol::write_frame(&mut s, &ServerMsg::Accept { probe_port }.encode()).expect("accept");
        let _ = s.read(&mut [0u8; 64]);
    });
    let err = unbloat_measure::run_plan(
        &plan(&addr.to_string(), "ping", None, 1.0, 0.5),
        &mut NoProgress,
    )
    .expect_err("probes lost");
    drop(black_hole);
    t.join().expect("fake server");
    assert!(
        matches!(err.error, MeasureError::ProbesLost { kind: "UDP", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("firewall"), "{err}");
    let partial = err.partial.expect("partial results");
    assert!(partial.metadata.partial);
    assert!(partial
        .metadata
        .partial_reason
        .as_deref()
        .unwrap_or("")
        .contains("firewall"));
    let udp = &partial.probes[0];
    assert!(
        udp.samples.len() >= 5 && udp.samples.iter().all(|s| s.rtt_ms.is_none()),
        "{udp:?}"
    );
}

/// Bug: the server's handshake timeout was per read, so a client sending its handshake one byte
/// every half second held its connection for as long as it liked, and 50 of them held every
/// connection a `--max-tests 1` server allows: a real test was kept out indefinitely. Now the
/// whole handshake has one deadline; the real client's test must start within it (plus a
/// margin) and the server must go on serving.
#[test]
fn dribbling_clients_hold_the_server_no_longer_than_the_handshake_deadline() {
    use unbloat_measure::server::HANDSHAKE_DEADLINE;
    // max_tests 1, max_streams 8: a cap of 1 * 9 + 16 = 25 connections, fewer than the 50.
    let server = Running::start(ServeOptions {
        max_tests: 1,
        max_streams: 8,
        ..quiet("[::]:0")
    });
    // A hello, then a frame that announces 4096 bytes and never ends: a dribbler never runs out.
    let mut script = protocol::encode_hello(protocol::PROTOCOL_VERSION).to_vec();
    script.extend_from_slice(&(protocol::MAX_FRAME as u32).to_be_bytes());
    script.resize(script.len() + protocol::MAX_FRAME, 0);
    let flood_start = std::time::SystemTime::now();
    let started = Instant::now();
    let mut dribblers: Vec<TcpStream> = (0..50)
        .filter_map(|_| TcpStream::connect(v4(&server)).ok())
        .collect();
    assert_eq!(dribblers.len(), 50, "loopback connects");
    for c in &dribblers {
        c.set_nonblocking(true).expect("nonblocking");
    }
    // One byte per connection every 400 ms (well inside any per-read timeout), for at most
    // deadline + 8 s; a connection the server closed fails its write and is dropped from the
    // round. Bounded: 50 connections, a few hundred one-byte writes each at most.
    let bound = HANDSHAKE_DEADLINE + Duration::from_secs(8);
    let dribble = std::thread::spawn(move || {
        let mut pos = 0;
        let mut closed_at = Vec::new();
        while started.elapsed() < bound && !dribblers.is_empty() {
            dribblers.retain_mut(|c| {
                let mut sink = [0u8; 64];
                let eof = matches!(c.read(&mut sink), Ok(0))
                    || matches!(c.read(&mut sink), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock);
                let alive = !eof && c.write(&script[pos % script.len()..][..1]).is_ok();
                if !alive {
                    closed_at.push(started.elapsed());
                }
                alive
            });
            pos += 1;
            std::thread::sleep(Duration::from_millis(400));
        }
        (closed_at, dribblers.len())
    });
    // The real client, from just after the flood: closed at once while the server is full, it
    // retries until it is served.
    std::thread::sleep(Duration::from_millis(300));
    let p = plan(&v4(&server).to_string(), "ping", None, 0.5, 0.3);
    let results = loop {
        match unbloat_measure::run_plan(&p, &mut NoProgress) {
            Ok(r) => break r,
            Err(e) if started.elapsed() < bound => {
                eprintln!("real client not served yet: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("the real client was kept out for {bound:?}: {e}"),
        }
    };
    let test_started =
        std::time::UNIX_EPOCH + Duration::from_secs_f64(results.metadata.started_at_unix);
    let waited = test_started
        .duration_since(flood_start)
        .unwrap_or(Duration::ZERO);
    let margin = Duration::from_secs(2);
    assert!(
        waited <= HANDSHAKE_DEADLINE + margin,
        "the real test started {waited:?} after the flood, more than the {HANDSHAKE_DEADLINE:?} \
         handshake deadline + {margin:?}"
    );
    let (closed_at, still_open) = dribble.join().expect("dribbler thread");
    assert_eq!(still_open, 0, "dribblers still connected after {bound:?}");
    let last = closed_at.iter().max().copied().unwrap_or_default();
    assert!(
        last <= HANDSHAKE_DEADLINE + margin,
        "a dribbler was held {last:?}"
    );
    still_serves(&server);
}

/// A fake server on loopback: accepts one connection and hands it to `script`, which plays the
/// server's side; joined by the caller.
fn fake_server(
    script: impl FnOnce(TcpStream) + Send + 'static,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let t = std::thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        script(s);
    });
    (addr, t)
}

/// Writes `bytes` one at a time, `gap` apart, for at most `bound`; stops when the client hangs up.
fn dribble(s: &mut TcpStream, bytes: &[u8], gap: Duration, bound: Duration) {
    let start = Instant::now();
    for b in bytes {
        if start.elapsed() > bound || s.write_all(&[*b]).is_err() {
            return;
        }
        std::thread::sleep(gap);
    }
}

/// Bug: the client's timeout was per read too, so a server (or middlebox) dribbling its
/// answer a byte a second held `unbloat test` for as long as the frame it announced: hours for
/// a 4 KiB refusal. Each exchange now has one deadline, the connect timeout (2 s here).
#[test]
fn a_dribbling_server_is_given_up_on_at_the_connect_timeout() {
    let (addr, t) = fake_server(|mut s| {
        let _ = protocol::read_hello(&mut s);
        // A hello, a byte every 300 ms: well inside a per-read timeout, never done in time.
        let mut answer = protocol::encode_hello(protocol::PROTOCOL_VERSION).to_vec();
        answer.extend_from_slice(&(protocol::MAX_FRAME as u32).to_be_bytes());
        answer.push(12);
        answer.resize(answer.len() + 100, b'x');
        dribble(
            &mut s,
            &answer,
            Duration::from_millis(300),
            Duration::from_secs(10),
        );
    });
    let started = Instant::now();
    let err = unbloat_measure::run_plan(
        &plan(&addr.to_string(), "ping", None, 0.5, 0.2),
        &mut NoProgress,
    )
    .expect_err("given up on");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "held for {took:?}: {err}");
    assert!(err.partial.is_none(), "{err}");
    t.join().expect("fake server");
}

/// Bug: the server's holding time (its send stamp minus its receive stamp) was taken from the
/// reply as sent, and subtracted with saturation: a server claiming a hold longer than the whole
/// round trip made every probe's round trip 0 ms. A hold the round trip cannot contain is
/// ignored: the round trip is then what the client measured.
#[test]
fn a_forged_holding_time_cannot_make_round_trips_zero() {
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let probe_port = udp.local_addr().expect("addr").port();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::clone(&done);
    let responder = std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let started = Instant::now();
        let mut buf = [0u8; 2048];
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && started.elapsed() < Duration::from_secs(10)
        {
            let Ok((n, from)) = udp.recv_from(&mut buf) else {
                continue;
            };
            let Ok(request) = ProbeRequest::decode(&buf[..n]) else {
                continue;
            };
            let reply = protocol::ProbeReply {
                request,
                server_recv_ns: 0,
                server_send_ns: u64::MAX,
            };
            // A millisecond of real delay, so an honest round trip is clearly above zero.
            std::thread::sleep(Duration::from_millis(1));
            if let Some(len) = reply.encode_into(&mut buf[..n]) {
                let _ = udp.send_to(&buf[..len], from);
            }
        }
    });
    let (addr, t) = fake_server(move |mut s| {
        let _ = protocol::read_hello(&mut s);
        s.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
            .expect("hello");
        let _ = protocol::read_frame(&mut s);
        protocol::write_frame(&mut s, &ServerMsg::Accept { probe_port }.encode()).expect("accept");
        let _ = protocol::read_frame(&mut s);
        let report = ServerMsg::Report {
            stream_bytes: vec![],
            probes_answered: 0,
        };
        let _ = protocol::write_frame(&mut s, &report.encode());
    });
    let results = unbloat_measure::run_plan(
        &plan(&addr.to_string(), "ping", None, 0.5, 0.3),
        &mut NoProgress,
    )
    .expect("a run");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().expect("fake server");
    responder.join().expect("responder");
    let rtts: Vec<f64> = results.probes[0]
        .samples
        .iter()
        .filter_map(|s| s.rtt_ms)
        .collect();
    assert!(rtts.len() >= 5, "{rtts:?}");
    assert!(rtts.iter().all(|&r| r >= 0.9), "{rtts:?}");
}

/// A refusal reason comes from the peer: printed as it came, its control characters could
/// rewrite the user's terminal. They are shown escaped, not sent to the terminal.
#[test]
fn a_refusal_reason_cannot_carry_terminal_control_sequences() {
    let (addr, t) = fake_server(|mut s| {
        let _ = protocol::read_hello(&mut s);
        s.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
            .expect("hello");
        let _ = protocol::read_frame(&mut s);
        let reason = "no\x1b[2J\x1b]0;owned\x07\r\nroot# ".to_string();
        protocol::write_frame(&mut s, &ServerMsg::Refused { reason }.encode()).expect("refuse");
    });
    let err = unbloat_measure::run_plan(
        &plan(&addr.to_string(), "ping", None, 0.5, 0.2),
        &mut NoProgress,
    )
    .expect_err("refused");
    t.join().expect("fake server");
    let text = err.to_string();
    assert!(matches!(err.error, MeasureError::Refused { .. }), "{text}");
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(text.contains("no"), "{text}");
}

/// Answers that make no sense at that point (a report for a request, an accept with no probe
/// port, a second hello) end the run with an error naming the server, never a panic or a hang.
#[test]
fn nonsense_answers_end_the_run_with_an_error() {
    let answers: Vec<Vec<u8>> = vec![
        ServerMsg::Report {
            stream_bytes: vec![1; 255],
            probes_answered: u64::MAX,
        }
        .encode(),
        ServerMsg::Attached.encode(),
        ServerMsg::Accept { probe_port: 0 }.encode(),
        ServerMsg::Busy {
            active: u16::MAX,
            limit: 0,
        }
        .encode(),
    ];
    for answer in answers {
        let body = answer.clone();
        let (addr, t) = fake_server(move |mut s| {
            let _ = protocol::read_hello(&mut s);
            s.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
                .expect("hello");
            let _ = protocol::read_frame(&mut s);
            let _ = protocol::write_frame(&mut s, &body);
            let _ = s.read(&mut [0u8; 64]);
        });
        let started = Instant::now();
        let result = unbloat_measure::run_plan(
            &plan(&addr.to_string(), "ping", None, 0.5, 0.2),
            &mut NoProgress,
        );
        let err = result.expect_err("nonsense is an error");
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        drop(err);
        t.join().expect("fake server");
    }
}

/// A connection to `server` from the loopback address `from` (127.0.0.x is a client of its own).
fn connect_from(from: [u8; 4], to: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&SocketAddr::from((from, 0)).into())?;
    s.connect(&to.into())?;
    Ok(s.into())
}

/// Issue 53: with serve on loopback, 127.0.0.3 opened 300 connections and held them, and a test
/// from 127.0.0.1 was then reset. Now one client holds its own share (its test's connections and
/// a few more), the rest are closed at once, and the test from another address runs at once.
#[test]
fn one_address_holding_connections_does_not_keep_another_out() {
    let opts = ServeOptions {
        // Longer than the test: the holder's connections are not cut by the handshake deadline.
        handshake_deadline: Duration::from_secs(60),
        ..quiet("127.0.0.1:0")
    };
    let caps = opts.connection_caps();
    assert!(caps.per_client < 300 && caps.per_client < caps.total);
    let server = Running::start(opts);
    let mut held: Vec<TcpStream> = (0..300)
        .filter_map(|_| connect_from([127, 0, 0, 3], v4(&server)).ok())
        .collect();
    assert_eq!(held.len(), 300, "loopback connects");
    // Those over the cap are closed at once: an end of file, or a reset.
    std::thread::sleep(Duration::from_millis(500));
    held.retain_mut(|c| {
        c.set_nonblocking(true).expect("nonblocking");
        let mut b = [0u8; 1];
        matches!(c.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    });
    assert_eq!(
        held.len(),
        caps.per_client,
        "connections 127.0.0.3 still holds"
    );
    let started = Instant::now();
    still_serves(&server);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the other client waited {:?}",
        started.elapsed()
    );
    // And the holder itself gets no more.
    let mut one_more = connect_from([127, 0, 0, 3], v4(&server)).expect("connect");
    one_more
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    assert!(closed_by_server(&mut one_more), "one more was held");
}
