//! What the real-kernel tests of the binary share: a throw-away network namespace with a WAN-side
//! veth, running the built `unbloat` in it, and snapshots of a device to prove "unchanged".
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Each device ("3: eth0@isp0: <...>" gives `eth0`), then its qdiscs, its HTB classes (cake and
/// fq_codel list their active flows as classes, which are not configuration) and its filters.
const SNAPSHOT: &str = r#"ip -o link show | cut -d: -f2 | cut -d@ -f1 | while read -r dev; do
  echo "link $dev"
  tc qdisc show dev "$dev"
  tc class show dev "$dev" | grep '^class htb'
  tc filter show dev "$dev" ingress
  tc filter show dev "$dev" root
done"#;

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
