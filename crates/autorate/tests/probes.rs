//! The probes in a real kernel (issue 36): what autorate accepts as an answer, and which way its
//! probes leave.
//!
//! - a reply forged on the wire (our identifier and sequence, a send time of 0, the cookie
//!   unknown) is dropped and counted, while the genuine reply to the next probe is a sample;
//! - on a router with two WANs whose default route is wan1's, wan2's probes leave by wan2: with
//!   100 ms of netem on wan1 only, wan2's pinger measures the short path, and still does when
//!   wan2 is deleted and made again (a PPPoE reconnect).

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use unbloat_autorate::pinger::{Answer, Delay, Method, Pinger};
use unbloat_testbed::real_kernel_test;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn must(cmd: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
struct Ns(String);

impl Ns {
    fn new(what: &str) -> Ns {
        let name = format!(
            "uba-{what}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        must(&format!("ip netns add {name}"));
        must(&format!("ip -n {name} link set lo up"));
        Ns(name)
    }

    fn must(&self, cmd: &str) {
        must(&format!("ip netns exec {} {cmd}", self.0));
    }

    /// Runs `f` in a thread that entered this namespace: the sockets it opens are the
    /// namespace's.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.0);
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
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Every answer the pinger accepts within `span`.
fn answers(p: &Pinger, span: Duration) -> Vec<Answer> {
    let t0 = Instant::now();
    let mut got = Vec::new();
    while let Some(left) = span.checked_sub(t0.elapsed()) {
        if let Some(a) = p.recv(left).expect("recv") {
            got.push(a);
        }
    }
    got
}

/// RFC 1071's checksum.
fn checksum(p: &[u8]) -> u16 {
    let mut sum: u32 = p
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

real_kernel_test! {
    fn a_forged_echo_reply_is_dropped_and_counted_and_a_genuine_one_is_a_sample() needs ["netem"] {
        let ns = Ns::new("forge");
        // The kernel's own answers off: the only reply to the first probe is the forger's.
        ns.must("sysctl -qw net.ipv4.icmp_echo_ignore_all=1");
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let name = ns.0.clone();
        let (forged, unmatched, second, genuine) = ns.run(move || {
            let p = Pinger::open(&[lo]).expect("a raw socket (root)");
            let seq = p.send(lo, Method::Echo).expect("a probe sent");
            // The forger knows the identifier and the sequence, not the payload: it claims the
            // probe left at 0, so a trusted reply would read as the pinger's whole age.
            let mut reply = vec![0u8; 16];
            reply[4..6].copy_from_slice(&p.ident().to_be_bytes());
            reply[6..8].copy_from_slice(&seq.to_be_bytes());
            let sum = checksum(&reply);
            reply[2..4].copy_from_slice(&sum.to_be_bytes());
            let forger = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            forger.send_to(&reply, &std::net::SocketAddr::new(lo, 0).into()).expect("forged");
            let forged = answers(&p, Duration::from_millis(500));
            must(&format!("ip netns exec {name} sysctl -qw net.ipv4.icmp_echo_ignore_all=0"));
            let second = p.send(lo, Method::Echo).expect("a second probe sent");
            let genuine = answers(&p, Duration::from_millis(500));
            (forged, p.unmatched(), second, genuine)
        });
        assert!(forged.is_empty(), "a forged reply was taken: {forged:?}");
        assert_eq!(unmatched, 1, "the forged reply is counted");
        let quick = |a: &Answer| matches!(a.delay, Delay::Rtt(ms) if ms < 100.0);
        assert!(
            matches!(genuine.as_slice(), [a] if a.seq == second && quick(a)),
            "the genuine reply: {genuine:?}"
        );
    }

    fn wan2s_probes_leave_by_wan2_when_the_default_route_is_wan1s() needs ["netem"] {
        // Here: wan1 10.9.1.1 and wan2 10.9.2.1, each a veth to a far end of its own; both far
        // ends hold the reflector 10.9.9.9. The default route is wan1's (metric 1), wan2's is
        // the fallback (metric 2), as a multi-WAN router's are; wan1's path is 100 ms long.
        let here = Ns::new("r");
        let far: Vec<Ns> = (1..=2).map(|i| Ns::new(&format!("far{i}"))).collect();
        for f in &far {
            f.must("ip addr add 10.9.9.9/32 dev lo");
        }
        // wan{i} and its far end's side, and its default route: again when wan2 is re-created.
        let wan = |i: usize| {
            let f = &far[i - 1].0;
            let cmds = [
                format!("ip -n {} link add wan{i} type veth peer name peer{i}", here.0),
                format!("ip -n {} link set peer{i} netns {f}", here.0),
                format!("ip -n {} addr add 10.9.{i}.1/24 dev wan{i}", here.0),
                format!("ip -n {} link set wan{i} up", here.0),
                format!("ip -n {f} addr add 10.9.{i}.2/24 dev peer{i}"),
                format!("ip -n {f} link set peer{i} up"),
                format!("ip -n {} route add default via 10.9.{i}.2 dev wan{i} metric {i}", here.0),
            ];
            cmds.join(" && ")
        };
        must(&wan(1));
        let reflector = IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9));
        // wan2 not there yet (a PPPoE link or a USB modem still coming up): the kernel binds to
        // a device's index, so there is nothing to bind to, and the caller is told it is
        // missing (the daemon waits on that) rather than why a bind failed.
        let early = here.run(move || match Pinger::open_on(&[reflector], Some("wan2")) {
            Err(e) => format!("{e:?}: {e}"),
            Ok(_) => "opened".to_string(),
        });
        assert_eq!(early, r#"NoDevice("wan2"): wan2 does not exist (yet)"#);
        must(&wan(2));
        // wan2's answers come from an address the main table routes by wan1: loose reverse-path
        // filtering, as a multi-WAN router needs.
        here.must("sysctl -qw net.ipv4.conf.all.rp_filter=2");
        here.must("tc qdisc add dev wan1 root netem delay 100ms");
        // A PPPoE link comes back as a new device of the same name after each reconnect: the
        // probes follow the name.
        let again = format!("ip -n {} link del wan2 && {}", here.0, wan(2));
        let got = here.run(move || {
            let p = Pinger::open_on(&[reflector], Some("wan2")).expect("a raw socket (root)");
            let mut got = Vec::new();
            for round in 1..=6 {
                if round == 4 {
                    must(&again);
                }
                let _ = p.send(reflector, Method::Echo);
                got.extend(answers(&p, Duration::from_millis(400)));
            }
            got
        });
        // The first probe after the re-creation may be lost to the new device's neighbour
        // discovery; the others are answered.
        assert!(got.len() >= 5, "{got:?}");
        for a in &got {
            let Delay::Rtt(ms) = a.delay else { panic!("{a:?}") };
            assert!(ms < 50.0, "wan2's probe went by wan1's 100 ms path: {ms} ms");
        }
    }
}
