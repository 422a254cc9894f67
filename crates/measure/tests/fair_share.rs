//! Issue 36 item 8: one client cannot hold a public `unbloat serve`. A client address (an IPv6
//! /64) runs one test at a time, every test is short by default, and the DSCP marks of what the
//! server sends are the standard classes a test needs, not whatever a client asks for.
//!
//! Two client addresses on one machine: 127.0.0.1 and a socket bound to 127.0.0.2.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{plan, quiet, Running};
use socket2::{Domain, Socket, Type};
use unbloat_measure::protocol::{self, ClientMsg, ServerMsg, TestRequest};
use unbloat_measure::{MeasureError, NoProgress, ServeOptions};

#[test]
fn a_second_test_from_one_address_is_refused_while_another_address_is_served() {
    let server = Running::start(quiet("0.0.0.0:0"));
    let port = server.addr.port();
    let first = std::thread::spawn(move || {
        let p = plan(&format!("127.0.0.1:{port}"), "download", None, 0.5, 3.0);
        unbloat_measure::run_plan(&p, &mut NoProgress)
    });
    // The first test holds its slot from its accept on.
    std::thread::sleep(Duration::from_millis(1000));
    let again = plan(&format!("127.0.0.1:{port}"), "ping", None, 0.5, 0.5);
    let err = unbloat_measure::run_plan(&again, &mut NoProgress).expect_err("refused");
    let text = err.to_string();
    assert!(
        matches!(&err.error, MeasureError::Refused { reason } if reason.contains("127.0.0.1")
            && reason.contains("one test at a time")),
        "{text}"
    );
    // Another address (the client picks no source address, so by hand) is served meanwhile.
    let mut other = from_address("127.0.0.2", port);
    let req = TestRequest {
        test_id: 0x0202,
        load_ms: 1000,
        session_ms: 2000,
        streams: vec![],
    };
    protocol::write_frame(&mut other, &ClientMsg::Request(req).encode()).expect("request");
    let answer = protocol::read_frame(&mut other).expect("answer");
    match ServerMsg::decode(&answer).expect("decode") {
        ServerMsg::Accept { .. } => {}
        refused => panic!("127.0.0.2 was not served: {refused:?}"),
    }
    protocol::write_frame(&mut other, &ClientMsg::Finish.encode()).expect("finish");
    let report = protocol::read_frame(&mut other).expect("report");
    assert!(matches!(
        ServerMsg::decode(&report),
        Ok(ServerMsg::Report { .. })
    ));
    let first = first.join().expect("first client");
    assert!(first.is_ok(), "the first test runs on: {:?}", first.err());
    // Its slot is free again as soon as it ended: the next test from it is served.
    let after = plan(&format!("127.0.0.1:{port}"), "ping", None, 0.5, 0.5);
    let after = unbloat_measure::run_plan(&after, &mut NoProgress);
    assert!(after.is_ok(), "{:?}", after.err());
}

/// A control connection from `source` to the server on 127.0.0.1, past the hellos.
fn from_address(source: &str, port: u16) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    let bind: SocketAddr = format!("{source}:0").parse().expect("addr");
    socket.bind(&bind.into()).expect("bind the source");
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    socket.connect(&to.into()).expect("connect");
    let mut c: TcpStream = socket.into();
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.write_all(&protocol::encode_hello(protocol::PROTOCOL_VERSION))
        .expect("hello");
    assert_eq!(
        protocol::read_hello(&mut c).expect("server hello"),
        protocol::PROTOCOL_VERSION
    );
    c
}

#[test]
fn a_default_server_allows_short_tests_and_standard_marks_only() {
    let server = Running::start(quiet("127.0.0.1:0"));
    let remote = server.addr.to_string();
    // The old default allowed ten minutes: 200 s of load ran. A stranger's test is now short.
    let mut long = plan(&remote, "ping", None, 0.5, 0.5);
    long.load = Duration::from_secs(200);
    let err = unbloat_measure::run_plan(&long, &mut NoProgress).expect_err("too long");
    assert!(
        matches!(&err.error, MeasureError::Refused { reason } if reason.contains("at most 120 s")),
        "{err}"
    );
    // Network control (CS6) on a download: refused, naming the flag that would allow it.
    let mut cs6 = plan(&remote, "download", None, 0.5, 0.5);
    cs6.profile.streams[0].dscp = 48;
    let err = unbloat_measure::run_plan(&cs6, &mut NoProgress).expect_err("CS6");
    assert!(
        matches!(&err.error, MeasureError::Refused { reason } if reason.contains("CS6")
            && reason.contains("--dscp any")),
        "{err}"
    );
    // RRUL's own marks (BE, CS1, CS5, EF) are served.
    let rrul = unbloat_measure::run_plan(&plan(&remote, "rrul", None, 0.5, 0.5), &mut NoProgress);
    assert!(rrul.is_ok(), "{:?}", rrul.err());
    drop(server);
    // The operator may allow any mark.
    let any = Running::start(ServeOptions {
        dscp: unbloat_measure::DscpPolicy::Any,
        ..quiet("127.0.0.1:0")
    });
    let mut cs6 = plan(&any.addr.to_string(), "download", None, 0.5, 0.5);
    cs6.profile.streams[0].dscp = 48;
    let served = unbloat_measure::run_plan(&cs6, &mut NoProgress);
    assert!(served.is_ok(), "{:?}", served.err());
}
