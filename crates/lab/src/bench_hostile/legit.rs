//! The legitimate client, from an address of its own: once a second it asks the attacked
//! server for what a user would (`serve`'s hello; the page; the metrics) and times the whole
//! answer; against `serve` it also runs a real `unbloat test` once, early in the attack.

use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one answer may take before the client counts itself not served.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// What the client asks.
#[derive(Debug, Clone, Copy)]
pub enum Ask {
    /// `unbloat serve`'s hello, answered with its own.
    Hello,
    /// `GET PATH`, answered 200 in full.
    Get(&'static str),
}

/// The client's probes through one attack.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Probes {
    pub asked: u32,
    pub served: u32,
    pub wait_ms_p50: f64,
    pub wait_ms_max: f64,
    /// The first answer that was not a service, and why.
    pub failure: Option<String>,
}

/// One ask: `Ok(time to the whole answer)` or why it was not served.
pub fn ask(to: SocketAddr, what: Ask) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&to, PATIENCE).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(PATIENCE))
        .and_then(|()| s.set_write_timeout(Some(PATIENCE)))
        .map_err(|e| e.to_string())?;
    match what {
        Ask::Hello => {
            use unbloat_measure::protocol::{encode_hello, read_hello, PROTOCOL_VERSION};
            s.write_all(&encode_hello(PROTOCOL_VERSION))
                .map_err(|e| format!("hello: {e}"))?;
            read_hello(&mut s).map_err(|e| format!("server's hello: {e}"))?;
        }
        Ask::Get(path) => {
            write!(s, "GET {path} HTTP/1.0\r\nHost: {to}\r\n\r\n").map_err(|e| e.to_string())?;
            let mut answer = Vec::new();
            s.read_to_end(&mut answer)
                .map_err(|e| format!("reading: {e}"))?;
            let text = String::from_utf8_lossy(&answer);
            let status = text.lines().next().unwrap_or("(nothing)");
            if !status.contains(" 200 ") {
                return Err(status.to_string());
            }
        }
    }
    Ok(t0.elapsed())
}

/// Asks once a second from `delay` until `seconds` after the call.
pub fn probe(to: SocketAddr, what: Ask, delay: Duration, seconds: f64) -> Probes {
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(seconds);
    std::thread::sleep(delay);
    let mut waits = vec![];
    let mut p = Probes::default();
    while Instant::now() + Duration::from_millis(500) < until {
        let at = Instant::now();
        p.asked += 1;
        match ask(to, what) {
            Ok(w) => {
                p.served += 1;
                waits.push(w.as_secs_f64() * 1000.0);
            }
            Err(why) => {
                if p.failure.is_none() {
                    p.failure = Some(why);
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(at.elapsed()));
    }
    waits.sort_by(f64::total_cmp);
    p.wait_ms_p50 = waits.get(waits.len() / 2).copied().unwrap_or(0.0);
    p.wait_ms_max = waits.last().copied().unwrap_or(0.0);
    p
}

/// One real `unbloat test` against `serve`.
#[derive(Debug, Clone, Serialize)]
pub struct TestRun {
    pub ok: bool,
    /// From the process's start to its end, seconds; [`TEST_NOMINAL_S`] of it is the test.
    pub wall_s: f64,
    /// Its last line of stderr when it failed.
    pub error: Option<String>,
}

/// The test's own length: 3 s idle, 2 s of download, 3 s idle.
pub const TEST_NOMINAL_S: f64 = 8.0;

/// Runs `unbloat test` (download, 2 s of load, the shortest idle phases) against `to`, its
/// results written to a scratch directory under `scratch`.
pub fn unbloat_test(exe: &Path, to: SocketAddr, scratch: &Path) -> TestRun {
    let out = scratch.join(format!("test-{}", to.port()));
    let _ = std::fs::remove_dir_all(&out);
    let t0 = Instant::now();
    let result = Command::new(exe)
        .args([
            "test",
            "--profile",
            "download",
            "--duration",
            "2s",
            "--idle",
            "3s",
        ])
        .args(["--no-locate", "--connect-timeout", "10s", "--out"])
        .arg(&out)
        .arg(to.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let wall_s = t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&out);
    let (ok, error) = match result {
        Ok(o) if o.status.success() => (true, None),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("").to_string();
            (false, Some(format!("{}: {last}", o.status)))
        }
        Err(e) => (false, Some(format!("running {}: {e}", exe.display()))),
    };
    TestRun { ok, wall_s, error }
}
