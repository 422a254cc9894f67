//! `bench soak --autorate-trace`'s far side: where wan0 leads, so that the daemon's autorate has
//! a link to measure and a download to shape while the link's capacity follows a real trace.
//!
//! ```text
//!  the soak's namespace (the daemon's)   modem (a bridge)                 net
//!  wan0 10.53.7.1 ── wan0p ┐
//!                  soakbr0 ┤
//!                          └ far0 ════ far0p ┐ br0 ┌ lte0p ════ lte0 10.53.7.2, .10 to .15
//!                                  HTB at the trace's rate,       the download's sender;
//!                                  a FIFO of 1000 packets         the reflectors
//! ```
//!
//! Why this shape:
//! - wan0 is deleted and made again at every iteration, and a veth's peer goes with it: a
//!   bottleneck on wan0p would be rebuilt each time and the trace player's changes would race
//!   the re-creations. It sits one hop further instead, on far0p, which lives as long as the
//!   run: one `tc` process plays the trace on one HTB class throughout ([`TracePlayer`]).
//! - far0p is a hop that forwards (the modem's bridge), not the sender's own device: on the
//!   sending host TCP Small Queues keep a socket's bytes out of the local qdisc, so a FIFO there
//!   never fills (as `unbloat_testbed::netns::Testbed` found); forwarded packets belong to no
//!   socket and queue as in a modem.
//! - wan0p joins a bridge in the soak's namespace, so a re-creation is still one `ip -batch`
//!   there ([`wan0_lines`]), and everything is one /24 with no route to put back. wan0 gets the
//!   same MAC address every time: a new random one would leave net's neighbour entry for
//!   10.53.7.1 pointing at the old one, the probes' answers and the download lost until it
//!   expired, tens of seconds.
//! - The reflectors are net's own addresses: its kernel answers the probes (echo and
//!   timestamp) from behind the bottleneck, so their answers queue behind the download as on a
//!   real link.
//!
//! The load: one TCP download from net to a listener in the soak's namespace for the whole run,
//! connected again when a re-creation broke it. autorate needs one: on an idle link nothing is
//! delayed and its rates only decay back to base. Only the download follows the trace; the
//! upload carries the download's ACKs and the probes at the config's rate.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use unbloat_testbed::netns::{run_in_named, Netns};
use unbloat_units::Rate;

use super::error::{failed, SoakError};
use crate::profile::DEFAULT_FIFO_PACKETS;
use crate::trace::RateTrace;
use crate::trace_player::{floor, TracePlayer};

pub const WAN_ADDR: Ipv4Addr = Ipv4Addr::new(10, 53, 7, 1);
const FAR_ADDR: Ipv4Addr = Ipv4Addr::new(10, 53, 7, 2);
/// wan0's address at every re-creation (locally administered).
const WAN_MAC: &str = "02:53:07:00:00:01";
/// The bridge wan0p joins, in the soak's namespace.
const BRIDGE: &str = "soakbr0";
/// Where the download goes (beside the daemon's metrics, 19937, and page, 19938).
const LOAD_PORT: u16 = 19939;
/// A write that has waited this long is on a connection a re-creation broke: connect again.
const STUCK: Duration = Duration::from_secs(5);

/// The addresses the controller probes: six, as many as it probes at once by default.
pub fn reflectors() -> Vec<Ipv4Addr> {
    (10..16).map(|i| Ipv4Addr::new(10, 53, 7, i)).collect()
}

/// The `ip -batch` lines, in the soak's namespace, that make wan0 with its way to the far side.
pub fn wan0_lines() -> Vec<String> {
    vec![
        format!("link add wan0 address {WAN_MAC} type veth peer name wan0p"),
        format!("link set wan0p master {BRIDGE}"),
        "link set wan0p up".into(),
        format!("addr add {WAN_ADDR}/24 dev wan0"),
        "link set wan0 up".into(),
    ]
}

/// The HTB class on far0p at `rate`: how [`TracePlayer`] changes it.
fn class_line(verb: &str, rate: Rate) -> String {
    let r = format!("{}bit", rate.bits_per_sec());
    format!("class {verb} dev far0p parent 1: classid 1:1 htb rate {r} ceil {r}")
}

/// The far side, its trace playing and its download running; [`Far::stop`] ends them.
pub struct Far {
    player: Option<TracePlayer>,
    load: Load,
    // Held for their drop, which deletes them; declared last, so dropped after the player and
    // the load that run in them.
    _modem: Netns,
    _net: Netns,
}

impl Far {
    /// Builds the far side (before wan0 first exists) and starts the trace and the download.
    pub fn start(trace: RateTrace) -> Result<Far, SoakError> {
        let id = std::process::id();
        let ns = |n: &str| Netns::new(format!("ubs{id}{n}")).map_err(|e| failed("a namespace", e));
        let (modem, net) = (ns("m")?, ns("n")?);
        let (m, n) = (modem.name.as_str(), net.name.as_str());
        batch(
            "ip",
            None,
            &[
                format!("link add {BRIDGE} type bridge"),
                format!("link set {BRIDGE} up"),
                format!("link add far0 type veth peer name far0p netns {m}"),
                format!("link set far0 master {BRIDGE}"),
                "link set far0 up".into(),
                format!("link add lte0p netns {m} type veth peer name lte0 netns {n}"),
            ],
        )?;
        batch(
            "ip",
            Some(m),
            &[
                "link add br0 type bridge".into(),
                "link set br0 up".into(),
                "link set far0p master br0".into(),
                "link set far0p up".into(),
                "link set lte0p master br0".into(),
                "link set lte0p up".into(),
            ],
        )?;
        let mut lines = vec![format!("addr add {FAR_ADDR}/24 dev lte0")];
        lines.extend(
            reflectors()
                .iter()
                .map(|r| format!("addr add {r}/24 dev lte0")),
        );
        // MTU-sized packets, as over a real access link: a GSO burst of 64 KB would be one
        // "packet" of the FIFO.
        lines.push("link set lte0 gso_max_segs 1".into());
        lines.push("link set lte0 up".into());
        batch("ip", Some(n), &lines)?;
        let first = trace.at(Duration::ZERO).max(floor(trace.window));
        batch(
            "tc",
            Some(m),
            &[
                "qdisc add dev far0p root handle 1: htb default 1".into(),
                class_line("add", first),
                format!(
                    "qdisc add dev far0p parent 1:1 handle 10: pfifo limit {DEFAULT_FIFO_PACKETS}"
                ),
            ],
        )?;
        let player = TracePlayer::start_in(m, vec![("far0p".into(), trace)], |_, rate| {
            vec![class_line("change", rate)]
        })
        .map_err(|e| failed("the trace player", e))?;
        let load = Load::start(n)?;
        Ok(Far {
            player: Some(player),
            load,
            _modem: modem,
            _net: net,
        })
    }

    /// Ends the trace and the download: the player's changes to the bottleneck, and the bytes
    /// the download brought to the soak's namespace.
    pub fn stop(mut self) -> Result<(usize, u64), SoakError> {
        let bytes = self.load.stop();
        let changes = match self.player.take() {
            Some(p) => p.stop().map_err(|e| failed("the trace player", e))?,
            None => 0,
        };
        Ok((changes, bytes))
    }
}

impl Drop for Far {
    fn drop(&mut self) {
        self.load.stop();
        // The namespaces go with `modem` and `net`, and far0 with far0p; the bridge is ours.
        let _ = std::process::Command::new("ip")
            .args(["link", "del", BRIDGE])
            .output();
    }
}

/// `PROGRAM [-n NS] -batch -` of `lines` (ip or tc), failing with what it said.
fn batch(program: &str, ns: Option<&str>, lines: &[String]) -> Result<(), SoakError> {
    use unbloat_system::runner::{Cmd, Runner, SystemRunner};
    let mut args: Vec<&str> = ns.map_or(vec![], |n| vec!["-n", n]);
    args.extend(["-batch", "-"]);
    let cmd = Cmd::new(program).args(args).stdin(lines.join("\n") + "\n");
    let what = format!(
        "{program} -batch in {}",
        ns.unwrap_or("the soak's namespace")
    );
    let out = SystemRunner::from_env()
        .run(&cmd)
        .map_err(|e| failed(&what, e))?;
    if !out.success() {
        return Err(failed(what, out.stderr.trim()));
    }
    Ok(())
}

/// The download: a sender in net, a listener here counting what arrives.
struct Load {
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(net: &str) -> Result<Load, SoakError> {
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, LOAD_PORT))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| failed(format!("listening on port {LOAD_PORT}"), e))?;
        let (s, r) = (stop.clone(), received.clone());
        let accept = std::thread::spawn(move || accept_all(&listener, &s, &r));
        let s = stop.clone();
        let send = run_in_named(net, move || send_all(&s))
            .map_err(|e| failed("the download's sender", e))?;
        Ok(Load {
            stop,
            received,
            threads: vec![accept, send],
        })
    }

    /// Stops both ends (within [`STUCK`]); the bytes received.
    fn stop(&mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.received.load(Ordering::SeqCst)
    }
}

/// Takes every connection (the sender replaces a broken one) and reads each on a thread of its
/// own until it ends or `stop`, counting the bytes.
fn accept_all(listener: &TcpListener, stop: &Arc<AtomicBool>, received: &Arc<AtomicU64>) {
    let mut readers = vec![];
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _)) => {
                let (s, r) = (stop.clone(), received.clone());
                readers.push(std::thread::spawn(move || read_all(conn, &s, &r)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    for r in readers {
        let _ = r.join();
    }
}

fn read_all(mut conn: TcpStream, stop: &AtomicBool, received: &AtomicU64) {
    // Short timeouts, to look at `stop` between reads.
    let ok = conn.set_nonblocking(false).is_ok()
        && conn
            .set_read_timeout(Some(Duration::from_millis(500)))
            .is_ok();
    let mut buf = vec![0u8; 64 * 1024];
    while ok && !stop.load(Ordering::SeqCst) {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
}

/// Sends to wan0's address as fast as the link takes it, until `stop`; connects again after a
/// failure or a write stuck for [`STUCK`].
fn send_all(stop: &AtomicBool) {
    let to = SocketAddr::from((WAN_ADDR, LOAD_PORT));
    let buf = vec![0x55u8; 64 * 1024];
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut conn) = TcpStream::connect_timeout(&to, Duration::from_secs(2)) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let _ = conn.set_write_timeout(Some(STUCK));
        while !stop.load(Ordering::SeqCst) && conn.write_all(&buf).is_ok() {}
    }
}
