//! A household behind one router (issue 40): what classification buys a game and a video call
//! beside bulk transfers, against best effort and the field's usual setup.
//!
//! ```text
//!  a: game, call, web [eth0]--[lana0                  ]
//!                             [   ROUTER        wan0  ]--[cpe0  MODEM  isp0]--[eth0  SERVER]
//!  b: bulk            [eth0]--[lanb0  (masquerade)    ]   HTB at the link +   netem 20 ms
//!                                                          1000-packet FIFOs
//! ```
//!
//! The network is [`crate::hosts::Net`]'s. Host a plays a game (64-byte UDP packets at 60 Hz
//! each way, to port 3074), holds a video call (1.5 Mbit/s each way in 20 ms frames of three
//! 1250-byte UDP packets, port 3478; 0.5 Mbit/s on a 1 Mbit/s upload) and browses (a 100 kB TCP fetch every second). Host b
//! downloads with 16 TCP streams and uploads with 4 (iperf3). The UDP apps run 3 s idle first
//! (each direction's base one-way delay), then the bulk load starts; their packets carry their
//! send time, and every namespace reads the one kernel's clock, so each one-way delay is exact.
//!
//! Per direction of each UDP app ([`Way`]): the steady state's induced delay (the load's first
//! 3 s left out, the idle median subtracted) at p50 and p99, its jitter (mean difference of
//! consecutive delays, RFC 3550's idea without its smoothing), its loss, and the start-up peak.
//! The web's fetch times and the bulk's goodput beside them.
//!
//! Setups ([`Setup`]), each applied to the router's `wan0` at 95 % of the link as its user would:
//! nothing; `unbloat start` with only the rates (per-host fair, one tin); the same with
//! `--classify video-calls --classify gaming`; and the real sqm-scripts' layer_cake with
//! diffserv4 on the upload and the firewall rules its users write to mark the game EF and the
//! call AF41 on the way out (OpenWrt's fw4 `set_dscp` rules, here in nftables). sqm's download
//! keeps its defaults: one tin (`besteffort wash`), as nothing restores a mark there. To take
//! classification's cost apart, by name only: each preset alone, and both with one way's cake
//! turned to one tin afterwards (`tc qdisc change ... cake besteffort`); and the automatic
//! classes alone (`--classify auto`).

use crate::hosts::{kbit, quantile, HostsError, Net, Tools};
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use unbloat_shaper::model::Diffserv;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::Rate;

/// The link's rates: the modem's bottleneck each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub name: &'static str,
    pub down: Rate,
    pub up: Rate,
    /// The call's 1250-byte packets per 20 ms frame, each way: 3 (1.5 Mbit/s) where the upload
    /// holds it, 1 (0.5 Mbit/s, what a call adapts to) on an upload of 1 Mbit/s, which 1.5 Mbit/s
    /// alone would overflow whatever the shaper does.
    pub call_packets: usize,
}

/// The issue's two links: a fast one and a slow one.
pub const LINKS: [Link; 2] = [
    Link {
        name: "20/5",
        down: Rate::from_mbit(20),
        up: Rate::from_mbit(5),
        call_packets: 3,
    },
    Link {
        name: "8/1",
        down: Rate::from_mbit(8),
        up: Rate::from_mbit(1),
        call_packets: 1,
    },
];

/// What the router's WAN gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    None,
    /// `unbloat start wan0 --down D --up U`: per-host fair, one tin.
    Besteffort,
    /// The same with `--classify video-calls --classify gaming`.
    Classify,
    /// `--diffserv diffserv4` without rules: cake's four tins with nothing sorted into them,
    /// to tell what the tins cost from what the rules buy.
    Diffserv4,
    /// The real sqm-scripts' layer_cake (`EGRESS_CAKE_OPTS="diffserv4 nat"`) and nftables rules
    /// that mark the game EF and the call AF41 on the upload.
    SqmLayerCake,
    /// `classify` with the upload's cake turned to one tin afterwards: the rules' tins on the
    /// download only, to tell which way's tins cost what.
    ClassifyDown,
    /// `classify` with the download's cake (the IFB) turned to one tin: the tins on the upload
    /// only.
    ClassifyUp,
    /// `--classify gaming` alone: what a gamer turns on.
    Gaming,
    /// `--classify video-calls` alone: what a home worker turns on.
    VideoCalls,
    /// `--classify auto` alone: the automatic classes, no rules.
    Auto,
}

impl Setup {
    /// What a bench runs unless told: the two diagnostic halves are left out.
    pub const DEFAULT: [Setup; 5] = [
        Setup::None,
        Setup::Besteffort,
        Setup::Classify,
        Setup::Diffserv4,
        Setup::SqmLayerCake,
    ];

    pub const ALL: [Setup; 10] = [
        Setup::None,
        Setup::Besteffort,
        Setup::Classify,
        Setup::Diffserv4,
        Setup::SqmLayerCake,
        Setup::ClassifyDown,
        Setup::ClassifyUp,
        Setup::Gaming,
        Setup::VideoCalls,
        Setup::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Setup::None => "none",
            Setup::Besteffort => "besteffort",
            Setup::Classify => "classify",
            Setup::Diffserv4 => "diffserv4",
            Setup::SqmLayerCake => "sqm-layer-cake",
            Setup::ClassifyDown => "classify-down",
            Setup::ClassifyUp => "classify-up",
            Setup::Gaming => "gaming",
            Setup::VideoCalls => "video-calls",
            Setup::Auto => "auto",
        }
    }

    pub fn by_name(s: &str) -> Option<Setup> {
        Setup::ALL.into_iter().find(|x| x.name() == s)
    }

    /// What `unbloat start` is given beside the rates; None for the setups that are not
    /// unbloat's. The two halves start as `classify` does and change one way's cake after.
    pub fn options(self) -> Option<ShapeOptions> {
        let classify = |rules: &[&str]| ShapeOptions {
            classify: Some(rules.iter().map(|r| r.to_string()).collect()),
            ..ShapeOptions::default()
        };
        match self {
            Setup::None | Setup::SqmLayerCake => None,
            Setup::Besteffort => Some(ShapeOptions::default()),
            Setup::Diffserv4 => Some(ShapeOptions {
                diffserv: Some(Diffserv::Diffserv4),
                ..ShapeOptions::default()
            }),
            Setup::Gaming => Some(classify(&["gaming"])),
            Setup::VideoCalls => Some(classify(&["video-calls"])),
            Setup::Auto => Some(classify(&["auto"])),
            Setup::Classify | Setup::ClassifyDown | Setup::ClassifyUp => {
                Some(classify(&["video-calls", "gaming"]))
            }
        }
    }
}

/// A UDP app: `per_tick` packets of `len` bytes every `tick`, each way.
#[derive(Debug, Clone, Copy)]
struct Stream {
    port: u16,
    len: usize,
    per_tick: usize,
    tick: Duration,
}

/// 60 Hz of 64-byte updates, as a fast-paced game sends.
const GAME: Stream = Stream {
    port: 3074,
    len: 64,
    per_tick: 1,
    tick: Duration::from_micros(16_667),
};
/// 1.5 Mbit/s in 20 ms frames: three 1250-byte packets each ([`Link::call_packets`]).
const CALL: Stream = Stream {
    port: 3478,
    len: 1250,
    per_tick: 3,
    tick: Duration::from_millis(20),
};
/// The web's fetch, every [`WEB_EVERY`].
const WEB_BYTES: usize = 100_000;
const WEB_PORT: u16 = 8080;
const WEB_EVERY: Duration = Duration::from_secs(1);
/// Idle before the load, and the load's start-up left out of the steady state.
const IDLE_S: f64 = 3.0;
const STARTUP_S: f64 = 3.0;
/// A call's packet later than this is as good as lost to its jitter buffer.
pub const CALL_LATE_MS: f64 = 150.0;

/// One direction of a UDP app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Way {
    /// The idle median one-way delay (the base the others are above).
    pub idle_p50_ms: f64,
    pub induced_p50_ms: f64,
    pub induced_p99_ms: f64,
    /// The largest induced delay in the load's first 3 s.
    pub startup_peak_ms: f64,
    pub jitter_ms: f64,
    /// Share of the steady state's packets never received.
    pub loss: f64,
    /// Share received more than [`CALL_LATE_MS`] above the idle delay.
    pub late: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct App {
    pub up: Way,
    pub down: Way,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Web {
    pub fetches: usize,
    pub failed: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub setup: Setup,
    pub link: String,
    pub load_s: u32,
    pub game: App,
    pub call: App,
    pub web: Web,
    pub bulk_down_bps: f64,
    pub bulk_up_bps: f64,
    /// Packets each cake tin sent (tc's order), upload and download, where cake has tins.
    pub tins_up: Vec<u64>,
    pub tins_down: Vec<u64>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn io(what: &str) -> impl Fn(std::io::Error) -> HostsError + '_ {
    move |e| HostsError::Io(std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Runs `f` in a thread inside `node`'s namespace: its sockets belong there.
fn inside<T: Send + 'static>(
    net: &Net,
    node: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, HostsError> {
    let handle = unbloat_testbed::netns::run_in_named(&net.ns(node), f)
        .map_err(|e| HostsError::Io(std::io::Error::other(e.to_string())))?;
    match handle.join() {
        Ok(r) => r.map_err(io(node)),
        _ => Err(HostsError::Io(std::io::Error::other(format!(
            "the thread in {node} failed"
        )))),
    }
}

/// Packets sent: (seq, sent ns); packets received: (seq, sent ns, received ns).
type Sent = Vec<(u32, u64)>;
type Got = Vec<(u32, u64, u64)>;

/// Sends `s` until `until`, to `to` (or, for a server, to whoever wrote first).
fn pace(sock: &UdpSocket, s: Stream, to: &Mutex<Option<SocketAddr>>, until: Instant) -> Sent {
    let mut sent = vec![];
    let mut buf = vec![0u8; s.len];
    let mut seq = 0u32;
    let mut next = Instant::now();
    while Instant::now() < until {
        let dest = *to.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dest) = dest {
            for _ in 0..s.per_tick {
                let t = now_ns();
                buf[..4].copy_from_slice(&seq.to_be_bytes());
                buf[4..12].copy_from_slice(&t.to_be_bytes());
                if sock.send_to(&buf, dest).is_ok() {
                    sent.push((seq, t));
                }
                seq += 1;
            }
        }
        next += s.tick;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    sent
}

/// Receives until `until`; the first sender's address goes to `peer` when it has none.
fn collect(sock: &UdpSocket, peer: &Mutex<Option<SocketAddr>>, until: Instant) -> Got {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut got = vec![];
    let mut buf = [0u8; 2048];
    while Instant::now() < until {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            let t = now_ns();
            if n >= 12 {
                let seq = u32::from_be_bytes(buf[..4].try_into().unwrap_or_default());
                let sent = u64::from_be_bytes(buf[4..12].try_into().unwrap_or_default());
                got.push((seq, sent, t));
            }
            let mut p = peer.lock().unwrap_or_else(|e| e.into_inner());
            p.get_or_insert(from);
        }
    }
    got
}

/// One UDP app, both ways, until `until`: (upload sent, received at the server), (download
/// sent, received at host a).
type Flows = ((Sent, Got), (Sent, Got));

fn udp_app(
    net: &Net,
    s: Stream,
    until: Instant,
) -> Result<std::thread::JoinHandle<Flows>, HostsError> {
    let server = inside(net, "srv", move || UdpSocket::bind(("0.0.0.0", s.port)))?;
    let client = inside(net, "a", || UdpSocket::bind("0.0.0.0:0"))?;
    let server_at: SocketAddr = ([10, 78, 4, 2], s.port).into();
    Ok(std::thread::spawn(move || {
        let to_server = Arc::new(Mutex::new(Some(server_at)));
        let to_client = Arc::new(Mutex::new(None));
        let (c2, s2) = (client.try_clone(), server.try_clone());
        let (tc, ts) = (to_server.clone(), to_client.clone());
        let grace = until + Duration::from_millis(500);
        let up_rx =
            std::thread::spawn(move || s2.map(|s| collect(&s, &ts, grace)).unwrap_or_default());
        let down_rx = std::thread::spawn(move || {
            let ignored = Mutex::new(Some(server_at));
            c2.map(|c| collect(&c, &ignored, grace)).unwrap_or_default()
        });
        let up_tx = std::thread::spawn(move || pace(&client, s, &tc, until));
        let down_sent = pace(&server, s, &to_client, until);
        let up_sent = up_tx.join().unwrap_or_default();
        (
            (up_sent, up_rx.join().unwrap_or_default()),
            (down_sent, down_rx.join().unwrap_or_default()),
        )
    }))
}

/// One direction's numbers; `load` is the load's (start, end) in ns.
fn way(sent: &Sent, got: &Got, load: (u64, u64)) -> Way {
    let ms = |(_, s, r): &(u32, u64, u64)| r.saturating_sub(*s) as f64 / 1e6;
    let idle: Vec<f64> = got.iter().filter(|g| g.1 < load.0).map(ms).collect();
    let base = quantile(&idle, 0.5).unwrap_or(f64::NAN);
    let steady_from = load.0 + (STARTUP_S * 1e9) as u64;
    let in_steady = |t: u64| t >= steady_from && t < load.1;
    let mut steady: Vec<&(u32, u64, u64)> = got.iter().filter(|g| in_steady(g.1)).collect();
    steady.sort_by_key(|g| g.0);
    let delays: Vec<f64> = steady.iter().map(|g| ms(g) - base).collect();
    let startup = got
        .iter()
        .filter(|g| g.1 >= load.0 && g.1 < steady_from)
        .map(|g| ms(g) - base)
        .fold(0.0, f64::max);
    let jitter = if delays.len() > 1 {
        delays.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / (delays.len() - 1) as f64
    } else {
        f64::NAN
    };
    let sent_steady = sent.iter().filter(|s| in_steady(s.1)).count();
    let received: std::collections::HashSet<u32> = steady.iter().map(|g| g.0).collect();
    let lost = sent
        .iter()
        .filter(|s| in_steady(s.1) && !received.contains(&s.0))
        .count();
    let share = |n: usize| {
        if sent_steady > 0 {
            n as f64 / sent_steady as f64
        } else {
            f64::NAN
        }
    };
    Way {
        idle_p50_ms: base,
        induced_p50_ms: quantile(&delays, 0.5).unwrap_or(f64::NAN),
        induced_p99_ms: quantile(&delays, 0.99).unwrap_or(f64::NAN),
        startup_peak_ms: startup,
        jitter_ms: jitter,
        loss: share(lost),
        late: share(delays.iter().filter(|d| **d > CALL_LATE_MS).count()),
    }
}

fn app(flows: &Flows, load: (u64, u64)) -> App {
    let ((us, ug), (ds, dg)) = flows;
    App {
        up: way(us, ug, load),
        down: way(ds, dg, load),
    }
}

/// The web server: each connection gets [`WEB_BYTES`] and is closed, until `until`.
fn web_server(net: &Net, until: Instant) -> Result<std::thread::JoinHandle<()>, HostsError> {
    let listener = inside(net, "srv", || TcpListener::bind(("0.0.0.0", WEB_PORT)))?;
    listener.set_nonblocking(true).map_err(io("web server"))?;
    Ok(std::thread::spawn(move || {
        let body = vec![b'x'; WEB_BYTES];
        while Instant::now() < until {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    use std::io::Write;
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.write_all(&body);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }))
}

/// Host a's fetches from `from` to `until`, one every [`WEB_EVERY`]: (start ns, ms or None).
fn web_client(
    net: &Net,
    from: Instant,
    until: Instant,
) -> Result<std::thread::JoinHandle<Vec<Option<f64>>>, HostsError> {
    // A socket per fetch, each made in host a's namespace: the thread enters it for good.
    let handle = unbloat_testbed::netns::run_in_named(&net.ns("a"), move || {
        use std::io::Read;
        let mut times = vec![];
        let mut next = from;
        while next < until {
            if let Some(w) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(w);
            }
            next += WEB_EVERY;
            let t0 = Instant::now();
            let addr: SocketAddr = ([10, 78, 4, 2], WEB_PORT).into();
            let done =
                TcpStream::connect_timeout(&addr, Duration::from_secs(5)).and_then(|mut c| {
                    c.set_read_timeout(Some(Duration::from_secs(10)))?;
                    let mut buf = Vec::with_capacity(WEB_BYTES);
                    c.read_to_end(&mut buf)?;
                    Ok(buf.len())
                });
            times.push(match done {
                Ok(n) if n == WEB_BYTES => Some(t0.elapsed().as_secs_f64() * 1e3),
                _ => None,
            });
        }
        times
    })
    .map_err(|e| HostsError::Io(std::io::Error::other(e.to_string())))?;
    Ok(std::thread::spawn(move || {
        handle.join().unwrap_or_default()
    }))
}

/// Applies `setup` on the router: `unbloat start` with the setup's options (for the two halves, one
/// way's cake then turned to one tin), or sqm-scripts with its users' marks.
fn apply(net: &Net, setup: Setup, link: &Link, tools: &Tools) -> Result<(), HostsError> {
    let (down, up) = (kbit(link.down), kbit(link.up));
    if setup == Setup::SqmLayerCake {
        let env = [
            "SCRIPT=layer_cake.qos",
            "QDISC=cake",
            "EGRESS_CAKE_OPTS=diffserv4 nat",
        ];
        net.sqm_start(tools, down, up, &env)?;
        // What an OpenWrt user writes for layer_cake: fw4 rules with `set_dscp`, here as the
        // nftables they become (upload only: nothing marks the download).
        return net.nft("rtr", USER_DSCP_RULES);
    }
    let Some(options) = setup.options() else {
        return Ok(());
    };
    net.unbloat_start(tools, down, up, options)?;
    let one_tin = match setup {
        Setup::ClassifyDown => "wan0",
        Setup::ClassifyUp => "ifb4wan0",
        _ => return Ok(()),
    };
    let one = format!("tc qdisc change dev {one_tin} root cake besteffort");
    net.sh("rtr", &one).map(drop)
}

/// The layer_cake user's marks: the game EF, the call AF41, on the way out.
const USER_DSCP_RULES: &str = "table inet userdscp {
  chain post {
    type filter hook postrouting priority mangle; policy accept;
    oifname \"wan0\" udp dport 3074 ip dscp set ef
    oifname \"wan0\" udp dport 3478 ip dscp set af41
  }
}
";

/// Packets per cake tin at `dev`'s root in the router (empty without cake).
fn tins(net: &Net, dev: &str) -> Vec<u64> {
    let Ok(text) = net.run(
        Some("rtr"),
        &["tc", "-j", "-s", "qdisc", "show", "dev", dev, "root"],
    ) else {
        return vec![];
    };
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
    v[0]["tins"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["sent_packets"].as_u64().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default()
}

fn goodput(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// One run of the household on `link` with `setup`, `load_s` seconds of bulk.
pub fn run(link: &Link, setup: Setup, load_s: u32, tools: &Tools) -> Result<Outcome, HostsError> {
    std::fs::create_dir_all(&tools.work)?;
    let mut net = Net::build(true, Some((link.down, link.up)))?;
    apply(&net, setup, link, tools)?;
    let s1 = net.spawn("srv", &["iperf3", "-s", "-p", "5201"])?;
    let s2 = net.spawn("srv", &["iperf3", "-s", "-p", "5202"])?;
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let load_from = t0 + Duration::from_secs_f64(IDLE_S);
    let load_to = load_from + Duration::from_secs(u64::from(load_s));
    let web_srv = web_server(&net, load_to + Duration::from_secs(2))?;
    let game = udp_app(&net, GAME, load_to)?;
    let call = Stream {
        per_tick: link.call_packets,
        ..CALL
    };
    let call = udp_app(&net, call, load_to)?;
    let web = web_client(&net, load_from, load_to)?;
    std::thread::sleep(load_from.saturating_duration_since(Instant::now()));
    let load_ns = now_ns();
    let t = load_s.to_string();
    let bulk = [("5201", vec!["-R", "-P", "16"]), ("5202", vec!["-P", "4"])];
    let mut clients = vec![];
    for (port, extra) in &bulk {
        let mut argv = vec!["iperf3", "-c", "10.78.4.2", "-p", port, "-t", &t, "-J"];
        argv.extend(extra.iter().copied());
        clients.push(net.spawn("b", &argv)?);
    }
    let (down_json, up_json) = (net.wait(clients[0])?, net.wait(clients[1])?);
    let load = (load_ns, load_ns + u64::from(load_s) * 1_000_000_000);
    let game = game
        .join()
        .map_err(|_| HostsError::Io(std::io::Error::other("the game failed")))?;
    let call = call
        .join()
        .map_err(|_| HostsError::Io(std::io::Error::other("the call failed")))?;
    let fetches = web.join().unwrap_or_default();
    let _ = web_srv.join();
    for s in [s1, s2] {
        net.kill(s);
    }
    let ok: Vec<f64> = fetches.iter().flatten().copied().collect();
    Ok(Outcome {
        setup,
        link: link.name.to_string(),
        load_s,
        game: app(&game, load),
        call: app(&call, load),
        web: Web {
            fetches: fetches.len(),
            failed: fetches.len() - ok.len(),
            p50_ms: quantile(&ok, 0.5).unwrap_or(f64::NAN),
            p90_ms: quantile(&ok, 0.9).unwrap_or(f64::NAN),
        },
        bulk_down_bps: goodput(&down_json),
        bulk_up_bps: goodput(&up_json),
        tins_up: tins(&net, "wan0"),
        tins_down: tins(&net, "ifb4wan0"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_way_leaves_out_the_start_up_and_counts_what_never_came() {
        let s = 1_000_000_000u64;
        // Idle at 10 ms; the first 3 s of load at 200 ms; then 30 ms, one packet lost.
        let mut sent = vec![];
        let mut got = vec![];
        for i in 0..100u32 {
            let t = u64::from(i) * s / 10; // 10 a second for 10 s
            sent.push((i, t));
            let d = if t < 2 * s {
                10
            } else if t < 5 * s {
                200
            } else {
                30
            };
            if i != 70 {
                got.push((i, t, t + d * 1_000_000));
            }
        }
        let w = way(&sent, &got, (2 * s, 10 * s));
        assert_eq!(w.idle_p50_ms, 10.0);
        assert_eq!(w.startup_peak_ms, 190.0);
        assert_eq!(w.induced_p50_ms, 20.0);
        assert_eq!(w.induced_p99_ms, 20.0);
        assert_eq!(w.jitter_ms, 0.0);
        assert!((w.loss - 1.0 / 50.0).abs() < 1e-9, "{}", w.loss);
        assert_eq!(w.late, 0.0);
    }
}
