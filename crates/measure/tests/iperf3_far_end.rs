//! The iperf3 far end against the real `iperf3 -s` (/usr/bin/iperf3) on loopback, IPv4 and
//! IPv6: uploads, downloads and both move data, the server sees each test end cleanly (its own
//! JSON and exit status say so) and serves the next one; a busy server is FarEndBusy. Then
//! hand-made hostile servers (the only stand-ins for iperf3 here): each must end in a clear
//! error within the timeout, never a hang or a panic. The last test compares our goodput with
//! iperf3's own client through a 20 Mbit/s HTB router (needs root).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread::{self, sleep, JoinHandle};
use std::time::{Duration, Instant};

use unbloat_measure::farend::Load;
use unbloat_measure::iperf3::Iperf3Load;
use unbloat_measure::profile::StreamPlan;
use unbloat_measure::MeasureError;
use unbloat_report::Direction;
use unbloat_testbed::kernel::slot::{self, Share, Slot};

const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
const TIMEOUT: Duration = Duration::from_secs(3);

/// A real `iperf3 -s` on a free port; killed on drop.
struct Iperf3Server {
    child: Child,
    addr: SocketAddr,
    /// Its transfers run at loopback's speed: no `alone` test's guest runs beside them.
    _slot: Option<Slot>,
}

impl Iperf3Server {
    /// `extra`: e.g. `-1` (one test, then exit) and `-J` (a JSON report on stdout).
    fn start(ip: IpAddr, extra: &[&str]) -> Iperf3Server {
        let _slot = slot::take(Share::Shared, "iperf3 on loopback");
        let port = TcpListener::bind((ip, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("iperf3")
            .args(["-s", "-B", &ip.to_string(), "-p", &port.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 runs (apt-get install iperf3)");
        // Owned at once, so that a panic below still kills and reaps it.
        let server = Iperf3Server {
            child,
            addr: SocketAddr::new(ip, port),
            _slot,
        };
        let filter = format!("sport = :{port}");
        for _ in 0..50 {
            let out = Command::new("ss")
                .args(["-Hltn", &filter])
                .output()
                .expect("ss");
            if !out.stdout.is_empty() {
                return server;
            }
            sleep(Duration::from_millis(100));
        }
        panic!("iperf3 -s never listened on {port}");
    }

    /// For a server started with `-1 -J`: waits for it to exit on its own (it does after one
    /// complete test) and returns its exit status and JSON report.
    fn report(mut self) -> (bool, serde_json::Value) {
        let end = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                Instant::now() < end,
                "iperf3 -s -1 did not exit after the test"
            );
            sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read");
        let json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        (status.success(), json)
    }
}

impl Drop for Iperf3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn plan(ups: &[u8], downs: &[u8]) -> Vec<StreamPlan> {
    let up = ups.iter().map(|&d| (Direction::Up, d));
    let down = downs.iter().map(|&d| (Direction::Down, d));
    up.chain(down)
        .enumerate()
        .map(|(i, (direction, dscp))| StreamPlan {
            name: format!("s{i}"),
            direction,
            dscp,
        })
        .collect()
}

/// Runs a load for ~2 s, checking that every stream's goodput grows, and returns its final
/// byte counts and finish() notes.
fn run(addr: SocketAddr, streams: &[StreamPlan]) -> (Vec<u64>, Vec<String>) {
    let mut load = Iperf3Load::new(addr, streams, Duration::from_secs(2), TIMEOUT).expect("new");
    // Between tests `iperf3 -s` closes its listener and opens a new one (cleanup_server, then
    // iperf_server_listen): a connection in that gap is refused, or reset if it was queued on
    // the old listener, as iperf3's own client's is.
    let end = Instant::now() + Duration::from_secs(2);
    while let Err(e) = load.start() {
        let text = e.to_string();
        let gap = text.contains("refused") || text.contains("reset by peer");
        assert!(gap && Instant::now() < end, "start: {e:?}");
        sleep(Duration::from_millis(50));
    }
    sleep(Duration::from_millis(700));
    let early = load.bytes();
    sleep(Duration::from_millis(1300));
    let late = load.bytes();
    assert_eq!(load.error(), None);
    assert_eq!(late.len(), streams.len());
    for (i, (a, b)) in early.iter().zip(&late).enumerate() {
        assert!(*a > 0, "stream {i} moved nothing in 0.7 s");
        assert!(b > a, "stream {i} stopped moving: {a} then {b}");
    }
    let t = Instant::now();
    load.stop();
    // Threads wake within 200 ms; the server answers TEST_END at once on loopback.
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "stop() took {:?}",
        t.elapsed()
    );
    let last = load.bytes();
    let notes = load.finish().expect("finish");
    assert_eq!(load.bytes(), last, "the final counts stay after finish()");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("iperf3 server's own count")),
        "{notes:?}"
    );
    (last, notes)
}

fn json_bytes(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("no {path:?} in {v}"))
        .max(0.0) as u64
}

fn close(a: u64, b: u64, tolerance: f64) -> bool {
    (a as f64 - b as f64).abs() <= tolerance * a.max(b) as f64
}

#[test]
fn upload_moves_data_and_the_server_ends_the_test_cleanly() {
    let server = Iperf3Server::start(V4, &["-1", "-J"]);
    let (ours, _) = run(server.addr, &plan(&[0, 46], &[]));
    let (ok, json) = server.report();
    assert!(ok, "iperf3 -s exited with an error: {json}");
    assert!(json.get("error").is_none(), "{json}");
    let received = json_bytes(&json, &["end", "sum_received", "bytes"]);
    let acked: u64 = ours.iter().sum();
    // The server counts while TEST_RUNNING; we count what its TCP acknowledged until stop().
    assert!(
        close(received, acked, 0.1),
        "server {received}, ours {acked}"
    );
}

#[test]
fn download_over_ipv6_moves_data_and_notes_the_one_tos() {
    let server = Iperf3Server::start(V6, &["-1", "-J"]);
    let streams = plan(&[], &[46, 0]);
    let load = Iperf3Load::new(server.addr, &streams, Duration::from_secs(2), TIMEOUT).unwrap();
    let dscps: Vec<u8> = load.streams().iter().map(|s| s.dscp).collect();
    assert_eq!(
        dscps,
        [46, 46],
        "downloads are marked by the server, all alike"
    );
    drop(load);
    let (ours, notes) = run(server.addr, &streams);
    assert!(notes.iter().any(|n| n.contains("one TOS")), "{notes:?}");
    let (ok, json) = server.report();
    assert!(ok && json.get("error").is_none(), "{json}");
    assert_eq!(json["start"]["test_start"]["reverse"], 1, "{json}");
    assert_eq!(json["start"]["test_start"]["tos"], 46 << 2, "{json}");
    let sent = json_bytes(&json, &["end", "sum_sent", "bytes"]);
    let received: u64 = ours.iter().sum();
    assert!(close(sent, received, 0.1), "server {sent}, ours {received}");
}

#[test]
fn bidirectional_moves_both_ways_and_the_server_serves_the_next_test() {
    let server = Iperf3Server::start(V4, &[]);
    let (ours, notes) = run(server.addr, &plan(&[0, 0], &[0, 0]));
    assert!(ours.iter().all(|&b| b > 0));
    assert!(
        notes
            .iter()
            .any(|n| n.contains("uploads") && n.contains("downloads")),
        "{notes:?}"
    );
    // The same server takes a second test at once: the first ended cleanly on its side.
    run(server.addr, &plan(&[0], &[]));
}

#[test]
fn a_second_test_while_one_runs_is_far_end_busy() {
    let server = Iperf3Server::start(V4, &[]);
    let streams = plan(&[0], &[]);
    let mut first =
        Iperf3Load::new(server.addr, &streams, Duration::from_secs(2), TIMEOUT).unwrap();
    first.start().expect("first test starts");
    let mut second =
        Iperf3Load::new(server.addr, &streams, Duration::from_secs(2), TIMEOUT).unwrap();
    match second.start() {
        Err(MeasureError::FarEndBusy { why, .. }) => assert!(why.contains("another test")),
        other => panic!("expected FarEndBusy, got {other:?}"),
    }
    assert!(MeasureError::FarEndBusy {
        server: String::new(),
        why: String::new()
    }
    .is_far_end());
    first.stop();
    first.finish().expect("the first test still ends cleanly");
}

#[test]
fn plans_iperf3_cannot_run_are_refused_before_the_network() {
    // Nothing listens on port 9 of a TEST-NET address; new() must not notice.
    let nowhere: SocketAddr = "192.0.2.1:9".parse().unwrap();
    let d = Duration::from_secs(1);
    assert!(Iperf3Load::new(nowhere, &plan(&[0], &[0]), d, TIMEOUT).is_ok());
    for bad in [plan(&[], &[]), plan(&[0, 0], &[0])] {
        match Iperf3Load::new(nowhere, &bad, d, TIMEOUT) {
            Err(MeasureError::InvalidArgument(why)) => assert!(!why.is_empty()),
            other => panic!("expected InvalidArgument, got {:?}", other.err()),
        }
    }
    let too_many = vec![0; 129];
    assert!(Iperf3Load::new(nowhere, &plan(&too_many, &[]), d, TIMEOUT).is_err());
}

// --- Hostile servers -------------------------------------------------------------------------

const SHORT: Duration = Duration::from_millis(500);

/// A listener on loopback whose first connection `script` handles; returns its address.
fn hostile(script: impl FnOnce(TcpListener) + Send + 'static) -> (SocketAddr, JoinHandle<()>) {
    let l = TcpListener::bind((V4, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    (addr, thread::spawn(move || script(l)))
}

fn accept_cookie(l: &TcpListener) -> TcpStream {
    let (mut c, _) = l.accept().unwrap();
    let mut cookie = [0u8; 37];
    c.read_exact(&mut cookie).unwrap();
    c
}

/// Plays iperf3's server up to TEST_RUNNING for `n` streams; returns control and data.
fn play_until_running(l: &TcpListener, n: usize) -> (TcpStream, Vec<TcpStream>) {
    let mut c = accept_cookie(l);
    c.write_all(&[9]).unwrap(); // PARAM_EXCHANGE
    let mut len = [0u8; 4];
    c.read_exact(&mut len).unwrap();
    let mut params = vec![0u8; u32::from_be_bytes(len) as usize];
    c.read_exact(&mut params).unwrap();
    c.write_all(&[10]).unwrap(); // CREATE_STREAMS
    let data = (0..n).map(|_| accept_cookie(l)).collect();
    c.write_all(&[1, 2]).unwrap(); // TEST_START, TEST_RUNNING
    (c, data)
}

fn start_err(addr: SocketAddr) -> (String, Duration) {
    let mut load = Iperf3Load::new(addr, &plan(&[0], &[]), Duration::from_secs(1), SHORT).unwrap();
    let t = Instant::now();
    let e = load
        .start()
        .expect_err("a hostile server must fail start()");
    assert!(e.is_far_end(), "{e:?}");
    (e.to_string(), t.elapsed())
}

#[test]
fn server_error_is_translated_into_iperf3s_words() {
    let (addr, h) = hostile(|l| {
        let mut c = accept_cookie(&l);
        // SERVER_ERROR, IEMAXSERVERTESTDURATIONEXCEEDED (37), errno 0.
        c.write_all(&[0xfe, 0, 0, 0, 37, 0, 0, 0, 0]).unwrap();
    });
    let (e, _) = start_err(addr);
    assert!(
        e.contains("exceeds the server's maximum permitted limit"),
        "{e}"
    );
    h.join().unwrap();
}

#[test]
fn garbage_instead_of_a_state_is_refused() {
    let (addr, h) = hostile(|l| {
        let mut c = accept_cookie(&l);
        let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    let (e, _) = start_err(addr);
    assert!(e.contains("no iperf3 state"), "{e}");
    h.join().unwrap();
}

#[test]
fn a_server_that_stalls_after_the_cookie_times_out() {
    let (addr, h) = hostile(|l| {
        let c = accept_cookie(&l);
        sleep(Duration::from_secs(3));
        drop(c);
    });
    let (e, took) = start_err(addr);
    assert!(e.contains("sent nothing"), "{e}");
    assert!(took < SHORT + Duration::from_millis(500), "took {took:?}");
    h.join().unwrap();
}

#[test]
fn a_server_that_closes_is_said_to_have_closed() {
    let (addr, h) = hostile(|l| drop(accept_cookie(&l)));
    let (e, _) = start_err(addr);
    assert!(e.contains("closed the control connection"), "{e}");
    h.join().unwrap();
}

#[test]
fn a_two_gigabyte_results_length_is_an_error_not_an_allocation() {
    let (addr, h) = hostile(|l| {
        let (mut c, data) = play_until_running(&l, 1);
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 4, "TEST_END");
        c.write_all(&[13]).unwrap(); // EXCHANGE_RESULTS
        let mut len = [0u8; 4];
        c.read_exact(&mut len).unwrap();
        let mut ours = vec![0u8; u32::from_be_bytes(len) as usize];
        c.read_exact(&mut ours).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&ours).unwrap();
        assert_eq!(v["streams"][0]["id"], 1);
        c.write_all(&0x8000_0000u32.to_be_bytes()).unwrap();
        sleep(Duration::from_millis(500));
        drop(data);
    });
    let mut load = Iperf3Load::new(addr, &plan(&[0], &[]), Duration::from_secs(1), SHORT).unwrap();
    load.start()
        .expect("the hostile server plays along until the results");
    sleep(Duration::from_millis(200));
    load.stop();
    let e = load.finish().expect_err("a 2 GB results length must fail");
    assert!(e.to_string().contains("announced 2147483648 bytes"), "{e}");
    h.join().unwrap();
}

#[test]
fn a_server_error_during_the_load_is_reported_by_error_and_finish() {
    let (addr, h) = hostile(|l| {
        let (mut c, data) = play_until_running(&l, 1);
        sleep(Duration::from_millis(300));
        // SERVER_ERROR, IESERVERTESTDURATIONEXPIRED (160): the server's own timer ran out.
        c.write_all(&[0xfe, 0, 0, 0, 160, 0, 0, 0, 0]).unwrap();
        sleep(Duration::from_secs(2));
        drop(data);
    });
    let mut load = Iperf3Load::new(addr, &plan(&[0], &[]), Duration::from_secs(1), SHORT).unwrap();
    load.start().unwrap();
    let end = Instant::now() + Duration::from_secs(2);
    let error = loop {
        if let Some(e) = load.error() {
            break e;
        }
        assert!(
            Instant::now() < end,
            "error() never noticed the server error"
        );
        sleep(Duration::from_millis(50));
    };
    assert!(error.contains("server test duration expired"), "{error}");
    load.stop();
    let t = Instant::now();
    let e = load.finish().expect_err("the server never ends the test");
    assert!(
        e.to_string().contains("server test duration expired"),
        "{e}"
    );
    assert!(t.elapsed() < SHORT + Duration::from_millis(500));
    h.join().unwrap();
}

#[test]
fn a_server_that_never_answers_test_end_fails_finish_in_time() {
    let (addr, h) = hostile(|l| {
        let (mut c, data) = play_until_running(&l, 1);
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 4, "TEST_END");
        sleep(Duration::from_secs(2));
        drop(data);
    });
    let mut load = Iperf3Load::new(addr, &plan(&[0], &[]), Duration::from_secs(1), SHORT).unwrap();
    load.start().unwrap();
    sleep(Duration::from_millis(200));
    let t = Instant::now();
    load.stop();
    let e = load.finish().expect_err("no EXCHANGE_RESULTS");
    assert!(e.to_string().contains("sent nothing"), "{e}");
    assert!(
        t.elapsed() < 2 * SHORT + Duration::from_millis(500),
        "took {:?}",
        t.elapsed()
    );
    h.join().unwrap();
}
