//! The accuracy check of the iperf3 far end: on one path, against one `iperf3 -s`, the goodput
//! [`Iperf3Load`] counts vs the goodput iperf3's own client reports, for the same streams and
//! the same steady-state window.
//!
//! What callers can rely on: both runs leave out the first [`Comparison::skip`] seconds (slow
//! start; iperf3's `-O`) and measure the next [`Comparison::measure`] seconds; ours counts bytes
//! as the timeline does ([`unbloat_measure::farend::Load::bytes`]), iperf3's is its receiver's
//! `end.sum_received`. The server is started on a free port in `server_ns` and killed after.
//! Errors are sentences (the benchmark reports them as "not measured").

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_report::Direction;

use unbloat_measure::farend::Load;
use unbloat_measure::iperf3::Iperf3Load;
use unbloat_measure::profile::StreamPlan;
use unbloat_testbed::netns::{call_in, command_in, wait_listening, Netns, Reaped};

/// What to compare.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub direction: Direction,
    pub streams: usize,
    /// Left out at the start of both runs.
    pub skip: Duration,
    /// The window measured after it; whole seconds (iperf3's `-t`).
    pub measure: Duration,
}

/// Both goodputs, bit/s.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientComparison {
    pub unbloat_bps: f64,
    pub iperf3_bps: f64,
    /// unbloat / iperf3.
    pub ratio: f64,
    /// The finish() notes of our run (the server's own byte counts).
    pub notes: Vec<String>,
}

/// Runs [`Iperf3Load`] and then `iperf3 -c` against a fresh `iperf3 -s` at `server_ip` in
/// `server_ns`, both from `client_ns`, and returns both goodputs.
pub fn compare_with_iperf3_client(
    server_ns: Option<&Netns>,
    client_ns: Option<&Netns>,
    server_ip: IpAddr,
    what: &Comparison,
) -> Result<ClientComparison, String> {
    if what.measure.as_secs() == 0 || what.streams == 0 {
        return Err("compare at least one stream for at least one second".into());
    }
    let port = call_in(server_ns, move || {
        TcpListener::bind((server_ip, 0)).and_then(|l| l.local_addr())
    })?
    .map_err(|e| format!("no free port on {server_ip}: {e}"))?
    .port();
    let port_text = port.to_string();
    let server = command_in(server_ns, &["iperf3", "-s", "-p", &port_text])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 could not start ({e}); install iperf3"))?;
    let _server = Reaped(server);
    wait_listening(server_ns, port).map_err(|e| format!("iperf3 -s: {e}"))?;
    let addr = SocketAddr::new(server_ip, port);
    let (ours, notes) = run_ours(client_ns, addr, what)?;
    let theirs = run_iperf3_client(client_ns, addr, what)?;
    Ok(ClientComparison {
        unbloat_bps: ours,
        iperf3_bps: theirs,
        ratio: ours / theirs,
        notes,
    })
}

/// iperf3's `-t` and `-O` take whole seconds; both runs use the same.
fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs_f64().ceil() as u64)
}

fn run_ours(
    ns: Option<&Netns>,
    addr: SocketAddr,
    what: &Comparison,
) -> Result<(f64, Vec<String>), String> {
    let plan: Vec<StreamPlan> = (0..what.streams)
        .map(|i| StreamPlan {
            name: format!("stream {i}"),
            direction: what.direction,
            dscp: 0,
        })
        .collect();
    let (skip, measure) = (whole_seconds(what.skip), whole_seconds(what.measure));
    let run = move || -> Result<(f64, Vec<String>), String> {
        let mut load = Iperf3Load::new(addr, &plan, skip + measure, Duration::from_secs(3))
            .map_err(|e| e.to_string())?;
        load.start().map_err(|e| e.to_string())?;
        let begin = Instant::now();
        std::thread::sleep(skip);
        let (t0, b0) = (Instant::now(), load.bytes().iter().sum::<u64>());
        std::thread::sleep((begin + skip + measure).saturating_duration_since(Instant::now()));
        let (t1, b1) = (Instant::now(), load.bytes().iter().sum::<u64>());
        let broke = load.error();
        load.stop();
        let notes = load.finish().map_err(|e| e.to_string())?;
        if let Some(e) = broke {
            return Err(format!("our iperf3 load failed: {e}"));
        }
        let secs = (t1 - t0).as_secs_f64();
        Ok((b1.saturating_sub(b0) as f64 * 8.0 / secs, notes))
    };
    call_in(ns, run)?
}

/// iperf3's own client: `-O skip -t measure`, receiver's goodput.
fn run_iperf3_client(
    ns: Option<&Netns>,
    addr: SocketAddr,
    what: &Comparison,
) -> Result<f64, String> {
    let (ip, port) = (addr.ip().to_string(), addr.port().to_string());
    let omit = whole_seconds(what.skip).as_secs().to_string();
    let secs = whole_seconds(what.measure).as_secs().to_string();
    let streams = what.streams.to_string();
    let mut argv = vec![
        "iperf3", "-c", &ip, "-p", &port, "-t", &secs, "-O", &omit, "-P", &streams, "-J",
    ];
    if what.direction == Direction::Down {
        argv.push("-R");
    }
    // The server may still be closing our test; iperf3 then answers "busy" or is refused.
    for _ in 0..10 {
        let out = command_in(ns, &argv)
            .output()
            .map_err(|e| format!("iperf3 client: {e}"))?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("iperf3 printed no JSON: {e}"))?;
        if let Some(err) = json.get("error").and_then(|e| e.as_str()) {
            // Between tests the server closes its listener and opens a new one: a connection
            // is refused, or reset if it was queued on the old one.
            if err.contains("busy") || err.contains("refused") || err.contains("reset") {
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            return Err(format!("iperf3: {err}"));
        }
        return json["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .ok_or_else(|| "iperf3 JSON has no end.sum_received.bits_per_second".to_string());
    }
    Err("the iperf3 server stayed busy after our test".into())
}
