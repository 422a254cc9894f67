//! Helpers shared by the integration tests: an in-process server that stops on drop, and
//! short test plans.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use unbloat_measure::profile::Profile;
use unbloat_measure::{ServeOptions, Server, TestPlan};
use unbloat_testbed::kernel::slot::{self, Share, Slot};

/// A server running on its own thread; stopped and joined on drop.
pub struct Running {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// Its transfers run at loopback's speed: no `alone` test's guest runs beside them.
    _slot: Option<Slot>,
}

impl Running {
    pub fn start(opts: ServeOptions) -> Running {
        let _slot = slot::take(Share::Shared, "a loopback server");
        let (server, addr) = Server::bind(opts).expect("bind");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            server.run_until(&flag).expect("server runs");
        });
        Running {
            addr,
            stop,
            handle: Some(handle),
            _slot,
        }
    }

    /// A quiet server on an ephemeral loopback port (IPv4 and IPv6).
    pub fn loopback() -> Running {
        Running::start(quiet("[::]:0"))
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().expect("server thread");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn quiet(listen: &str) -> ServeOptions {
    ServeOptions {
        listen: Some(listen.parse().expect("addr")),
        log: false,
        ..ServeOptions::default()
    }
}

/// A plan against `remote` with the given phases (seconds) and 10 Hz probes.
pub fn plan(remote: &str, profile: &str, streams: Option<usize>, idle: f64, load: f64) -> TestPlan {
    TestPlan {
        remote: remote.to_string(),
        far_ends: unbloat_measure::farend::FarEnds::unbloat(remote).expect("far end"),
        profile: Profile::by_name(profile)
            .expect("profile")
            .resolve(streams)
            .expect("resolve"),
        idle_before: Duration::from_secs_f64(idle),
        load: Duration::from_secs_f64(load),
        idle_after: Duration::from_secs_f64(idle),
        probe_interval: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(2),
        command_line: vec!["test".into()],
        locate: false,
    }
}

/// Mean goodput (bit/s) of all streams of `direction` over samples with t in [from, to).
pub fn mean_goodput(
    results: &unbloat_report::Results,
    direction: unbloat_report::Direction,
    from: f64,
    to: f64,
) -> f64 {
    let streams: Vec<_> = results
        .streams
        .iter()
        .filter(|s| s.direction == direction)
        .collect();
    let mut total = 0.0;
    for s in &streams {
        let window: Vec<f64> = s
            .samples
            .iter()
            .filter(|x| x.t >= from && x.t < to)
            .map(|x| x.bps)
            .collect();
        if !window.is_empty() {
            total += window.iter().sum::<f64>() / window.len() as f64;
        }
    }
    total
}

/// The p-quantile (0..=1) of a list, by nearest rank.
pub fn quantile(mut v: Vec<f64>, p: f64) -> f64 {
    assert!(!v.is_empty(), "quantile of nothing");
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Round trips of probe series `name` sent in [from, to).
pub fn rtts(results: &unbloat_report::Results, name: &str, from: f64, to: f64) -> Vec<f64> {
    let series = results
        .probes
        .iter()
        .find(|p| p.name == name)
        .expect("probe series");
    series
        .samples
        .iter()
        .filter(|s| s.t >= from && s.t < to)
        .filter_map(|s| s.rtt_ms)
        .collect()
}
