//! Issue 12 through the built binary: `unbloat test` against far ends that are not `unbloat serve`,
//! and against hostile ones. Each hostile far end must end the test with a clear message and the
//! documented exit status (3: the far end refused, broke its protocol, stalled or went away; 2: the
//! command line was wrong), within its time bound, whatever it sends.
//!
//! The real far ends (Debian's `iperf3`, `irtt`) run on loopback; the hostile web servers are a
//! few lines each, below.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Output, Stdio};

use std::time::{Duration, Instant};
use unbloat_testbed::netns::{wait_listening, Reaped};

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

fn unbloat(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(UNBLOAT)
        .arg("test")
        .args(args)
        .output()
        .expect("unbloat runs");
    (out, started.elapsed())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `program` started for the test, killed on drop.
fn start(program: &str, args: &[&str]) -> Reaped {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} must be installed (scripts/install-deps): {e}"));
    Reaped(child)
}

/// A web server that answers every connection with `answer` (called with the stream), in a
/// thread of its own, forever.
fn hostile_web(answer: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer(conn));
        }
    });
    port
}

/// Reads a request's head (to the blank line), at most 64 KiB.
fn read_head(conn: &mut TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
}

/// A TCP listener and a UDP socket on one loopback port, to see whether anything was sent there.
struct Watched {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Watched {
    fn new() -> Watched {
        loop {
            let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
            let port = tcp.local_addr().expect("addr").port();
            if let Ok(udp) = UdpSocket::bind(("127.0.0.1", port)) {
                tcp.set_nonblocking(true).expect("nonblocking");
                udp.set_nonblocking(true).expect("nonblocking");
                return Watched { tcp, udp };
            }
        }
    }

    fn port(&self) -> u16 {
        self.tcp.local_addr().expect("addr").port()
    }

    /// Whether a connection or a datagram has arrived.
    fn reached(&self) -> bool {
        let mut buf = [0u8; 64];
        self.tcp.accept().is_ok() || self.udp.recv_from(&mut buf).is_ok()
    }
}

#[test]
fn command_lines_that_cannot_work_exit_2_before_anything_is_sent() {
    // Every far end below is a watched port: a connection or a datagram there would mean the
    // command line was acted on before it was judged. (Not a time bound: under CI's other lane
    // starting the binary alone can take seconds.)
    let watched = Watched::new();
    let at = |scheme: &str| format!("{scheme}://127.0.0.1:{}", watched.port());
    let (irtt, iperf3, https) = (at("irtt"), at("iperf3"), at("https"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["ftp://example.net"], "unknown scheme"),
        (vec![&irtt], "--load"),
        (vec!["--probe", &iperf3, "--load", &iperf3], "load only"),
        (vec!["--load", &iperf3], "no far end"),
        (vec![&https, "--max-connections", "0"], "--max-connections"),
        (
            vec![&https, "--ca-file", "/nonexistent/ca.pem"],
            "--ca-file",
        ),
        (vec!["irtt://127.0.0.1:0", "--profile", "ping"], "port"),
    ];
    for (args, says) in &cases {
        let (out, _) = unbloat(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains(says),
            "{args:?} should say {says:?}: {}",
            text(&out)
        );
        assert!(!watched.reached(), "{args:?} sent something before failing");
    }
}

#[test]
fn a_busy_iperf3_ends_the_test_with_exit_3_and_says_so() {
    let port = free_port().to_string();
    let _server = start("iperf3", &["-s", "-B", "127.0.0.1", "-p", &port]);
    // Not a connection: iperf3 would take it for a test and reopen its listener after it.
    wait_listening(None, port.parse().expect("port")).expect("iperf3 -s listens");
    // A real iperf3 client holds the server for the whole of our test; one that came in the
    // listener's gap between tests is refused at once, and is started again.
    let mut other = start(
        "iperf3",
        &["-c", "127.0.0.1", "-p", &port, "-t", "20", "-b", "1M"],
    );
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(800));
        if matches!(other.0.try_wait(), Ok(None)) {
            break;
        }
        other = start(
            "iperf3",
            &["-c", "127.0.0.1", "-p", &port, "-t", "20", "-b", "1M"],
        );
    }
    assert!(
        matches!(other.0.try_wait(), Ok(None)),
        "iperf3's own client could not start a test"
    );
    let far = format!("iperf3://127.0.0.1:{port}");
    let (out, took) = unbloat(&[
        &far,
        "--profile",
        "upload",
        "--duration",
        "2s",
        "--idle",
        "3s",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("busy"), "{}", text(&out));
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn hostile_web_servers_end_the_test_with_exit_3_and_a_clear_message() {
    fn stalls(mut conn: TcpStream) {
        read_head(&mut conn);
        std::thread::sleep(Duration::from_secs(60));
    }
    fn redirects_elsewhere(mut conn: TcpStream) {
        read_head(&mut conn);
        let _ = conn.write_all(
            b"HTTP/1.1 302 Found\r\nLocation: http://192.0.2.7/.well-known/nq\r\nContent-Length: 0\r\n\r\n",
        );
        std::thread::sleep(Duration::from_secs(5));
    }
    fn endless_header(mut conn: TcpStream) {
        read_head(&mut conn);
        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nX-Endless: ");
        let chunk = [b'a'; 4096];
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until && conn.write_all(&chunk).is_ok() {}
    }
    fn unavailable(mut conn: TcpStream) {
        read_head(&mut conn);
        let _ = conn.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 60\r\nContent-Length: 0\r\n\r\n",
        );
        std::thread::sleep(Duration::from_secs(5));
    }
    type Case = (fn(TcpStream), &'static [&'static str]);
    let cases: [Case; 4] = [
        (
            stalls,
            &["stall", "timed out", "no answer", "did not answer"],
        ),
        (redirects_elsewhere, &["redirect", "192.0.2.7"]),
        (endless_header, &["response head larger", "header"]),
        (unavailable, &["503", "busy"]),
    ];
    for (answer, says) in cases {
        let port = hostile_web(answer);
        let far = format!("http://127.0.0.1:{port}");
        let (out, took) = unbloat(&[
            &far,
            "--profile",
            "download",
            "--duration",
            "2s",
            "--idle",
            "3s",
            "--connect-timeout",
            "2s",
        ]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(3), "{far}: {t}");
        assert!(
            says.iter().any(|s| t.contains(s)),
            "{far} should say one of {says:?}: {t}"
        );
        assert!(took < Duration::from_secs(30), "{far} took {took:?}");
    }
}
