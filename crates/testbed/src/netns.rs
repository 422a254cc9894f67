//! Throw-away network namespaces joined by veth pairs through a router namespace: the test bench
//! of the integration tests (measure's far ends, the lab's) and the accuracy benchmarks. Needs
//! root.
//!
//! What callers can rely on:
//! - Names are unique per process and call (pid + counter), so parallel runs do not collide.
//! - Everything is removed when the value is dropped, also while unwinding from a panic:
//!   deleting a namespace deletes its ends of the veths, and with them the other ends.
//! - [`Netns::run_in`] runs a closure on a thread that has entered the namespace (setns(2) is
//!   per thread); sockets created there, and threads and programs it starts, live in it.
//!
//! The shaping here is the host kernel's HTB with a plain FIFO leaf, which this machine has;
//! the lab crate builds the real access-network emulation.

use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// What could not be done, and why: a command that failed (with its stderr), or a system call.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct NetnsError {
    pub context: String,
    #[source]
    pub source: std::io::Error,
}

impl NetnsError {
    fn io(context: impl Into<String>, source: std::io::Error) -> NetnsError {
        NetnsError {
            context: context.into(),
            source,
        }
    }
}

/// Runs a command, failing with its stderr when it fails.
pub fn run(argv: &[&str]) -> Result<Output, NetnsError> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| NetnsError::io(format!("running {}", argv.join(" ")), e))?;
    if !out.status.success() {
        return Err(NetnsError::io(
            format!("`{}` failed", argv.join(" ")),
            std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        ));
    }
    Ok(out)
}

/// A named network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates a namespace with its loopback up.
    pub fn new(name: String) -> Result<Netns, NetnsError> {
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns { name };
        run(&["ip", "-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, argv: &[&str]) -> Result<Output, NetnsError> {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(argv);
        run(&full)
    }

    /// A `Command` that runs `argv` inside the namespace (for long-running helpers).
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(argv);
        c
    }

    /// Runs `f` on a new thread inside the namespace.
    pub fn run_in<T, F>(&self, f: F) -> Result<JoinHandle<T>, NetnsError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        run_in_named(&self.name, f)
    }
}

/// Runs `f` on a new thread inside the namespace `name` (`/run/netns/NAME`, as `ip netns`
/// makes it), one this process does not own: the lab's, say. Nothing is deleted afterwards.
pub fn run_in_named<T, F>(name: &str, f: F) -> Result<JoinHandle<T>, NetnsError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let path = format!("/run/netns/{name}");
    let file = File::open(&path).map_err(|e| NetnsError::io(format!("opening {path}"), e))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || {
            // SAFETY: setns with a valid namespace fd; it changes only this thread.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            let entered = if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            };
            let ok = entered.is_ok();
            let _ = tx.send(entered);
            if !ok {
                // Never run the closure in the wrong namespace.
                return None;
            }
            Some(f())
        })
        .map_err(|e| NetnsError::io("starting a thread", e))?;
    match rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(NetnsError::io(format!("entering namespace {name}"), e)),
        Err(_) => {
            return Err(NetnsError::io(
                "entering namespace",
                std::io::Error::other("thread died"),
            ))
        }
    }
    // The closure runs; unwrap the Option on join without panicking on our side.
    Ok(spawn_unwrap(handle))
}

fn spawn_unwrap<T: Send + 'static>(inner: JoinHandle<Option<T>>) -> JoinHandle<T> {
    std::thread::spawn(move || match inner.join() {
        Ok(Some(v)) => v,
        Ok(None) => panic!("namespace thread did not run"),
        Err(p) => std::panic::resume_unwind(p),
    })
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Three namespaces in a line, `a` (server side), `r` (a router) and `b` (client side), joined
/// by two veth pairs, with IPv4 and IPv6 addresses and routes through `r`.
///
/// The bottleneck belongs on the router, not on an end host: on the sending host itself, TCP
/// Small Queues keep each socket's bytes in the local qdisc to about a millisecond's worth, so a
/// deep FIFO there never fills and shows no bloat. Forwarded packets belong to no socket, so
/// the router's queue fills as a modem's does.
#[derive(Debug)]
pub struct Testbed {
    pub a: Netns,
    pub r: Netns,
    pub b: Netns,
    /// `a`'s interface (towards `r`) and `b`'s interface (towards `r`).
    pub dev_a: String,
    pub dev_b: String,
    /// The router's interfaces towards `a` (upload leaves here) and towards `b` (download).
    pub dev_ra: String,
    pub dev_rb: String,
    pub ip4_a: Ipv4Addr,
    pub ip4_b: Ipv4Addr,
    pub ip6_a: Ipv6Addr,
    pub ip6_b: Ipv6Addr,
}

impl Testbed {
    /// Builds `a` (10.77.1.1, fd77:1::1) -- `r` -- `b` (10.77.2.1, fd77:2::1).
    pub fn new() -> Result<Testbed, NetnsError> {
        let id = format!(
            "{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let a = Netns::new(format!("ubm{id}a"))?;
        let r = Netns::new(format!("ubm{id}r"))?;
        let b = Netns::new(format!("ubm{id}b"))?;
        // Interface names are at most 15 bytes: "vm" + pid (<= 7) + "x" + counter + 2.
        let bed = Testbed {
            dev_a: format!("vm{id}a"),
            dev_b: format!("vm{id}b"),
            dev_ra: format!("vm{id}ra"),
            dev_rb: format!("vm{id}rb"),
            ip4_a: Ipv4Addr::new(10, 77, 1, 1),
            ip4_b: Ipv4Addr::new(10, 77, 2, 1),
            ip6_a: Ipv6Addr::new(0xfd77, 1, 0, 0, 0, 0, 0, 1),
            ip6_b: Ipv6Addr::new(0xfd77, 2, 0, 0, 0, 0, 0, 1),
            a,
            r,
            b,
        };
        let (a, r, b) = (
            bed.a.name.as_str(),
            bed.r.name.as_str(),
            bed.b.name.as_str(),
        );
        run(&[
            "ip",
            "link",
            "add",
            &bed.dev_a,
            "netns",
            a,
            "type",
            "veth",
            "peer",
            "name",
            &bed.dev_ra,
            "netns",
            r,
        ])?;
        run(&[
            "ip",
            "link",
            "add",
            &bed.dev_b,
            "netns",
            b,
            "type",
            "veth",
            "peer",
            "name",
            &bed.dev_rb,
            "netns",
            r,
        ])?;
        for (ns, dev, addr4, addr6) in [
            (a, &bed.dev_a, "10.77.1.1/24", "fd77:1::1/64"),
            (r, &bed.dev_ra, "10.77.1.2/24", "fd77:1::2/64"),
            (r, &bed.dev_rb, "10.77.2.2/24", "fd77:2::2/64"),
            (b, &bed.dev_b, "10.77.2.1/24", "fd77:2::1/64"),
        ] {
            run(&["ip", "-n", ns, "addr", "add", addr4, "dev", dev])?;
            // nodad: the address is usable at once instead of after duplicate detection.
            run(&["ip", "-n", ns, "addr", "add", addr6, "dev", dev, "nodad"])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        // The endpoints send MTU-sized packets, as over a real access link: with GSO a FIFO
        // "packet" could be a 64 KB burst and a 10-packet queue would hold 250 ms at 20 Mbit/s.
        for (ns, dev) in [(a, &bed.dev_a), (b, &bed.dev_b)] {
            run(&["ip", "-n", ns, "link", "set", dev, "gso_max_segs", "1"])?;
        }
        for (ns, gw4, gw6) in [(a, "10.77.1.2", "fd77:1::2"), (b, "10.77.2.2", "fd77:2::2")] {
            run(&["ip", "-n", ns, "route", "add", "default", "via", gw4])?;
            run(&["ip", "-n", ns, "-6", "route", "add", "default", "via", gw6])?;
        }
        // A loss-based sender (CUBIC, the default of most hosts, or Reno) fills a deep FIFO as
        // real traffic does; a host set to BBR (as this machine is) keeps the queue short and
        // hides the bloat. Reno, because a namespace may only pick from the host's
        // net.ipv4.tcp_allowed_congestion_control, which always has it (CUBIC may be missing).
        for ns in [&bed.a, &bed.b] {
            ns.exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"])?;
        }
        bed.r
            .exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])?;
        bed.r
            .exec(&["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"])?;
        Ok(bed)
    }

    /// Shapes both directions on the router with the host's HTB at `rate_bit` bit/s, each with
    /// a FIFO of `fifo_packets` packets as the queue (a deep one is a bloated modem).
    pub fn shape_htb(&self, rate_bit: u64, fifo_packets: u32) -> Result<(), NetnsError> {
        let rate = format!("{rate_bit}bit");
        let limit = fifo_packets.to_string();
        let n = self.r.name.as_str();
        // HTB cannot be changed in place by `replace`; start from the veth's default each time.
        self.unshape()?;
        for d in [self.dev_ra.as_str(), self.dev_rb.as_str()] {
            run(&[
                "tc", "-n", n, "qdisc", "add", "dev", d, "root", "handle", "1:", "htb", "default",
                "1",
            ])?;
            run(&[
                "tc", "-n", n, "class", "add", "dev", d, "parent", "1:", "classid", "1:1", "htb",
                "rate", &rate,
            ])?;
            run(&[
                "tc", "-n", n, "qdisc", "add", "dev", d, "parent", "1:1", "handle", "10:", "pfifo",
                "limit", &limit,
            ])?;
        }
        Ok(())
    }

    /// Removes the shaping (back to the veths' default qdiscs).
    pub fn unshape(&self) -> Result<(), NetnsError> {
        for d in [self.dev_ra.as_str(), self.dev_rb.as_str()] {
            let _ = run(&["tc", "-n", &self.r.name, "qdisc", "del", "dev", d, "root"]);
        }
        Ok(())
    }
}

/// `argv` as a command inside `ns`, or here when `ns` is `None`.
pub fn command_in(ns: Option<&Netns>, argv: &[&str]) -> Command {
    match ns {
        Some(ns) => ns.command(argv),
        None => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
    }
}

/// Runs `f` inside `ns` (on a thread that entered it) and returns its value; here when `ns` is
/// `None`.
pub fn call_in<T: Send + 'static>(
    ns: Option<&Netns>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    match ns {
        Some(ns) => ns
            .run_in(f)
            .map_err(|e| e.to_string())?
            .join()
            .map_err(|_| "a thread in the namespace panicked".to_string()),
        None => Ok(f()),
    }
}

/// Waits (5 s at most) until something listens on TCP `port` in `ns`, as `ss` sees it: not by
/// connecting, since a connection would start a test on an iperf3 server.
pub fn wait_listening(ns: Option<&Netns>, port: u16) -> Result<(), String> {
    let filter = format!("sport = :{port}");
    for _ in 0..50 {
        let out = command_in(ns, &["ss", "-Hltn", &filter])
            .output()
            .map_err(|e| format!("ss could not run ({e}); install iproute2"))?;
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("nothing listens on TCP port {port} after 5 s"))
}

/// A child process (a server a benchmark started) killed and reaped on drop.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The TCP goodput a link of `rate_bit` (gross, counting `l2_overhead` bytes per packet on top
/// of the IP packet) carries with full-size packets: `rate * (mtu - ip - tcp) / (mtu + l2)`
/// (PRODUCT.md; the TCP header is 32 bytes with timestamps). HTB on a veth counts the 14-byte
/// Ethernet header, so for 20 Mbit/s IPv4: 20e6 * 1448 / 1514 = 19.13 Mbit/s.
pub fn tcp_goodput(
    rate_bit: f64,
    mtu: u32,
    ip_header: u32,
    tcp_header: u32,
    l2_overhead: u32,
) -> f64 {
    rate_bit * f64::from(mtu - ip_header - tcp_header) / f64::from(mtu + l2_overhead)
}

/// IPv4 and TCP header sizes (TCP with the timestamps option), Ethernet header.
pub const IPV4_HEADER: u32 = 20;
pub const IPV6_HEADER: u32 = 40;
pub const TCP_HEADER_TS: u32 = 32;
pub const ETHERNET_HEADER: u32 = 14;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_of_twenty_megabit_ethernet() {
        let g = tcp_goodput(20e6, 1500, IPV4_HEADER, TCP_HEADER_TS, ETHERNET_HEADER);
        assert!((g - 20e6 * 1448.0 / 1514.0).abs() < 1e-6);
        let g6 = tcp_goodput(20e6, 1500, IPV6_HEADER, TCP_HEADER_TS, ETHERNET_HEADER);
        assert!(g6 < g);
    }
}
