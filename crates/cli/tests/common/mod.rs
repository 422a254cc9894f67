//! What the real-kernel tests of the binary share: a throw-away network namespace with a WAN-side
//! veth, running the built `unbloat` in it, and snapshots of a device to prove "unchanged".
#![allow(dead_code)]

pub mod caps;
pub mod daemon;
pub mod uci;

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Each device ("3: eth0@isp0: <...>" gives `eth0`), then from one `tc -batch` (in User-Mode
/// Linux a process costs about 100 ms, and a `tc` per device and kind made a snapshot 40 of them)
/// every device's qdiscs (each line names its device), HTB classes (cake and fq_codel list their
/// active flows as classes, which are not configuration), ingress filters and the filters of its
/// root qdisc (`filter show dev X`: `... root` lists the ingress filters again and missed HTB's
/// DSCP filters); last the namespace's nftables ruleset (classification's table).
const SNAPSHOT: &str = r#"devs=$(ip -o link show | cut -d: -f2 | cut -d@ -f1)
for dev in $devs; do echo "link $dev"; done
for dev in $devs; do
  echo "qdisc show dev $dev"
  echo "class show dev $dev"
  echo "filter show dev $dev ingress"
  echo "filter show dev $dev"
done | tc -force -batch - 2>/dev/null | sed '/^class /{/^class htb /!d}'
echo "nft ruleset"; nft list ruleset 2>&1"#;

/// A network namespace with devices named like a router's WAN side, removed on drop.
pub struct Netns {
    pub name: String,
    pub run_dir: PathBuf,
}

pub fn sh(cmd: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("sh runs")
}

pub fn must(cmd: &str) {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// `eth0` (a veth whose peer is `isp0`), `eth0.2` (a VLAN on it) and `enx00e04c680123` (a
    /// 15-byte name), all up.
    pub fn new() -> Netns {
        let name = format!(
            "ubt-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        must(&format!("ip netns add {name}"));
        // The pid repeats from one User-Mode Linux boot to the next, and every guest shares the
        // host's /tmp: the clock keeps two guests' state directories apart.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let ns = Netns {
            run_dir: std::env::temp_dir().join(format!("{name}-{nanos}-run")),
            name,
        };
        for cmd in [
            "ip link set lo up",
            "ip link add eth0 type veth peer name isp0",
            "ip link add link eth0 name eth0.2 type vlan id 2",
            "ip link add enx00e04c680123 type veth peer name enxpeer",
            "ip link set eth0 up",
            "ip link set isp0 up",
            "ip link set eth0.2 up",
            "ip link set enx00e04c680123 up",
            "ip link set enxpeer up",
        ] {
            ns.must(cmd);
        }
        ns
    }

    pub fn sh(&self, cmd: &str) -> Output {
        sh(&format!("ip netns exec {} {cmd}", self.name))
    }

    pub fn must(&self, cmd: &str) {
        must(&format!("ip netns exec {} {cmd}", self.name))
    }

    /// Runs `unbloat ARGS` in the namespace with its own state directory and extra env.
    pub fn unbloat_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        // The binary built for these tests reads them only with the test knobs, which the
        // `unbloat` crate's dev-dependency turns on: a build without them would ignore the
        // fault this test injects, and prove nothing.
        assert!(
            unbloat_system::knobs::ENABLED || env.iter().all(|(k, _)| !k.starts_with("UNBLOAT_")),
            "this test needs the feature test-knobs (cargo test turns it on; make test names it)"
        );
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, UNBLOAT])
            .args(args)
            .env("UNBLOAT_RUN_DIR", &self.run_dir);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("unbloat runs")
    }

    pub fn unbloat(&self, args: &[&str]) -> Output {
        self.unbloat_env(args, &[])
    }

    /// `tc ARGS` in the namespace: what it printed.
    pub fn tc(&self, args: &str) -> String {
        text(&self.sh(&format!("tc {args}")))
    }

    /// `wan0` here (10.9.0.1/24) and its peer `peer0` (10.9.0.2/24) in a namespace of its own,
    /// the far end of a flood ([`udp_flood`]), removed when the returned guard drops.
    pub fn wan_to_far_end(&self) -> FarEnd {
        let far = FarEnd(format!("{}-far", self.name));
        must(&format!("ip netns add {}", far.0));
        self.must("ip link add wan0 type veth peer name peer0");
        self.must(&format!("ip link set peer0 netns {}", far.0));
        self.must("ip addr add 10.9.0.1/24 dev wan0");
        self.must("ip link set wan0 up");
        must(&format!("ip -n {} addr add 10.9.0.2/24 dev peer0", far.0));
        must(&format!("ip -n {} link set peer0 up", far.0));
        far
    }

    /// Everything that could change when shaping: qdiscs, filters of every device, the devices.
    pub fn snapshot(&self) -> String {
        // One shell in the namespace runs every `tc`: in User-Mode Linux each process costs tens
        // of milliseconds and each `ip netns exec` far more, and a snapshot per command made the
        // golden test spend two thirds of its time here.
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", SNAPSHOT])
            .output()
            .expect("sh runs");
        let s = String::from_utf8_lossy(&out.stdout);
        // Two failed snapshots would be equal: an empty one must not prove "unchanged".
        assert!(
            s.contains("link lo\n"),
            "the snapshot of {} failed: {}{}",
            self.name,
            s,
            String::from_utf8_lossy(&out.stderr)
        );
        // Handles the kernel picked itself (8001: ...) differ between equal setups, and HTB counts
        // the packets (IPv6 router solicitations) it sent before classes existed.
        let words: Vec<&str> = s.split_whitespace().collect();
        let mut out = vec![];
        for (i, w) in words.iter().enumerate() {
            if i > 0 && words[i - 1] == "direct_packets_stat" {
                out.push("N");
            } else if w.len() == 5 && w.starts_with('8') && w.ends_with(':') {
                out.push("8xxx:");
            } else {
                out.push(w);
            }
        }
        out.join(" ")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = sh(&format!("ip netns del {}", self.name));
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// The far end's namespace of [`Netns::wan_to_far_end`], deleted on drop.
pub struct FarEnd(pub String);

impl Drop for FarEnd {
    fn drop(&mut self) {
        let _ = sh(&format!("ip netns del {}", self.0));
    }
}

/// UDP at `bits_per_sec` from wan0's 10.9.0.1 to the far end's discard port for `span`, paced
/// every millisecond. Call it from a thread in the namespace ([`in_ns`]).
pub fn udp_flood(bits_per_sec: f64, span: Duration) {
    let sock = std::net::UdpSocket::bind("10.9.0.1:0").unwrap();
    let payload = [0u8; 1200];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < span {
        let due = (t0.elapsed().as_secs_f64() * bits_per_sec / 8.0 / 1200.0) as u64;
        while sent < due {
            let _ = sock.send_to(&payload, "10.9.0.2:9");
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `f` in a thread that entered the namespace `ns` (threads it starts are in it too): an
/// rtnetlink or any other socket belongs to the namespace of the thread that opens it, and it
/// costs no process (50-100 ms each in User-Mode Linux).
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the namespace's file");
        // SAFETY: a valid descriptor of a network namespace; only this thread moves.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("the thread in the namespace")
}

/// How long until `ok` held, looking every 2 ms; `None` if it did not within `limit`.
pub fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if ok() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

/// `dev`'s egress and ingress (its IFB's) cake rates as tc shows them: `Some(("6Mbit",
/// "30Mbit"))`; `None` while either is not cake.
pub fn rates(ns: &Netns, dev: &str) -> Option<(String, String)> {
    let word = |q: String| {
        let mut w = q.split_whitespace().skip_while(|w| *w != "bandwidth");
        w.nth(1).map(str::to_string)
    };
    Some((
        word(ns.tc(&format!("qdisc show dev {dev} root")))?,
        word(ns.tc(&format!("qdisc show dev ifb4{dev} root")))?,
    ))
}

/// How long until `dev` is shaped at `(up, down)` as tc prints them, within `limit`.
pub fn shaped_at(
    ns: &Netns,
    dev: &str,
    (up, down): (&str, &str),
    limit: Duration,
) -> Option<Duration> {
    wait_until(limit, || {
        rates(ns, dev) == Some((up.to_string(), down.to_string()))
    })
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The golden configurations of the shaper (crates/shaper/tests/golden/cases.toml):
/// (name, interface, TOML table), read by the shaper's own parser of that file.
#[path = "../../../shaper/tests/golden/cases.rs"]
mod cases;
#[allow(unused_imports)]
pub use cases::cases as golden_cases;
