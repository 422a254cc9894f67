//! The netlink reader (`tcnl`) against tc's own reading (`live`, `tc -j -s -d`) on the same
//! kernel: unbloat's two setups (cake both ways; HTB + fq_codel with a size table and DSCP
//! filters), on a veth whose far end is in another namespace, with traffic through both
//! directions. Runs where cake is (User-Mode Linux when the host lacks it). Needs root.
//!
//! - Quiet: what both readers see is equal, field by field, qdiscs, classes and filters with
//!   their counters (tc is read before and after; a reading is compared only when those two
//!   agree, so no packet crossed in between).
//! - Under load: each counter netlink reads lies between tc's readings before and after it.
//! - A missing device is an error that names it; a missing IFB reads as none.

use std::process::{Child, Command, Stdio};
use std::time::Instant;

use unbloat_shaper::tcjson::{
    tc_text_rate, Action, ClassKind, FilterKind, LiveState, QdiscKind, Source,
};
use unbloat_system::live;
use unbloat_system::rtnl::Rtnl;
use unbloat_system::runner::SystemRunner;
use unbloat_system::tcnl::{self, ReadError};
use unbloat_units::IfName;

/// `unbloat plan wan0 --down 20mbit --up 5mbit --link vdsl2 --egress-options diffserv4 ...`:
/// cake both ways, through the IFB.
const CAKE: &str = "\
qdisc add dev wan0 root cake bandwidth 5mbit rtt 100ms diffserv4 dual-srchost nat nowash egress ack-filter split-gso overhead 26 mpu 64 ptm
qdisc add dev ifb4wan0 root cake bandwidth 20mbit rtt 80ms besteffort dual-dsthost nonat wash ingress no-ack-filter split-gso overhead 26 mpu 64 ptm memlimit 4mb
qdisc add dev wan0 handle ffff: ingress
filter add dev wan0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4wan0
";

/// `unbloat plan wan0 --down 20mbit --up 5mbit --link pppoe-llcsnap --qdisc fq_codel --tiers 3`
/// (the IFB's tree is the same shape: one side is enough to read every kind).
const HTB: &str = "\
qdisc add dev wan0 root handle 1: stab mtu 2047 tsize 512 mpu 0 overhead 26 linklayer atm htb default 12
class add dev wan0 parent 1: classid 1:1 htb rate 5mbit ceil 5mbit burst 1749 cburst 1749 quantum 1749
class add dev wan0 parent 1:1 classid 1:11 htb rate 1250kbit ceil 5mbit burst 1749 cburst 1749 quantum 1749 prio 1
class add dev wan0 parent 1:1 classid 1:12 htb rate 3438kbit ceil 5mbit burst 1749 cburst 1749 quantum 1749 prio 2
class add dev wan0 parent 1:1 classid 1:13 htb rate 312kbit ceil 5mbit burst 1749 cburst 1749 quantum 1749 prio 3
qdisc add dev wan0 parent 1:11 handle 110: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev wan0 parent 1:12 handle 120: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev wan0 parent 1:13 handle 130: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms noecn ce_threshold 2ms
filter add dev wan0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:11
filter add dev wan0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x20 0xfc flowid 1:13
filter add dev wan0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb8 0xfc flowid 1:11
qdisc add dev ifb4wan0 root cake bandwidth 20mbit besteffort
qdisc add dev wan0 handle ffff: ingress
filter add dev wan0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4wan0
";

/// Runs `f` on a new thread in a new network namespace; a panic in `f` is this test's panic.
fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let thread = std::thread::spawn(move || {
        // SAFETY: unshare has no memory preconditions; CLONE_NEWNET moves only this thread.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    });
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn run(program: &str, args: &str) {
    let out = Command::new(program)
        .args(args.split_whitespace())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(out.status.success(), "{program} {args}: {out:?}");
}

fn tc_batch(lines: &str) {
    let path = std::env::temp_dir().join(format!("tcnl-test-{}.batch", std::process::id()));
    std::fs::write(&path, lines).unwrap();
    run("tc", &format!("-batch {}", path.display()));
    let _ = std::fs::remove_file(path);
}

/// wan0 (10.77.0.1) in this thread's namespace, its veth peer in the namespace `far` (removed
/// on drop), and the IFB.
struct Link {
    far: String,
}

impl Link {
    fn new() -> Link {
        let far = format!("tcnl-far-{}", std::process::id());
        run("ip", &format!("netns add {far}"));
        let link = Link { far };
        let far = &link.far;
        run(
            "ip",
            &format!("link add wan0 type veth peer name far0 netns {far}"),
        );
        run("ip", "addr add 10.77.0.1/24 dev wan0");
        run("ip", "link set wan0 up");
        run("ip", &format!("-n {far} addr add 10.77.0.2/24 dev far0"));
        run("ip", &format!("-n {far} link set far0 up"));
        run("ip", "link add ifb4wan0 type ifb");
        run("ip", "link set ifb4wan0 up");
        link
    }

    /// Pings across, with and without a DSCP (EF, CS1): echo requests leave through wan0's
    /// root, replies come back through its ingress and the IFB.
    fn traffic(&self, count: u32) {
        for tos in ["0", "0xb8", "0x20"] {
            run(
                "ping",
                &format!("-q -c {count} -i 0.002 -Q {tos} 10.77.0.2"),
            );
        }
    }

    fn flood(&self) -> Child {
        Command::new("ping")
            .args(["-q", "-i", "0.002", "-s", "1200", "10.77.0.2"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.far])
            .status();
    }
}

fn names() -> (IfName, IfName) {
    ("wan0".parse().unwrap(), "ifb4wan0".parse().unwrap())
}

/// tc's reading, parsed: `tc -j -s -d` through `live`.
fn by_tc() -> LiveState {
    let (wan, ifb) = names();
    let texts = live::read(&SystemRunner::from_env(), &wan, Some(&ifb), true).unwrap();
    LiveState::parse(&wan, &texts).unwrap()
}

fn by_netlink(rtnl: &Rtnl) -> LiveState {
    let (wan, ifb) = names();
    tcnl::read(rtnl, &wan, Some(&ifb), true).unwrap()
}

/// What the two readings may differ in without either being wrong: tc's text rounds HTB's
/// rates and bursts, and keeps the options of kinds netlink reads by place only; cake's and
/// fq_codel's classes are their busy flows, which come and go.
fn comparable(mut s: LiveState) -> LiveState {
    let devices = std::iter::once(&mut s.wan).chain(s.ifb.as_mut());
    for d in devices {
        for q in &mut d.qdiscs {
            if let QdiscKind::Other { options, .. } = &mut q.details {
                *options = serde_json::Value::Null;
            }
        }
        d.classes.retain(|c| matches!(c.details, ClassKind::Htb(_)));
        for c in &mut d.classes {
            c.source = Source::Netlink;
            if let ClassKind::Htb(o) = &mut c.details {
                o.rate = tc_text_rate(o.rate);
                o.ceil = tc_text_rate(o.ceil);
                o.burst = None;
                o.cburst = None;
            }
        }
    }
    let filters = s
        .wan
        .filters
        .iter_mut()
        .chain(s.ingress_filters.iter_mut())
        .chain(s.ifb.iter_mut().flat_map(|d| d.filters.iter_mut()));
    for f in filters {
        match &mut f.details {
            FilterKind::Other(v) => *v = serde_json::Value::Null,
            FilterKind::U32(k) => {
                for a in &mut k.actions {
                    if let Action::Other(v) = a {
                        *v = serde_json::Value::Null;
                    }
                }
            }
            FilterKind::Head => {}
        }
    }
    s
}

/// Reads tc, netlink, tc until no packet crossed in between (the tc readings agree), then
/// compares netlink's with them. Prints what each reading took.
fn assert_same_when_quiet(rtnl: &Rtnl, setup: &str) {
    for attempt in 1..=10 {
        let before = by_tc();
        let started = Instant::now();
        let nl = by_netlink(rtnl);
        let nl_took = started.elapsed();
        let started = Instant::now();
        let after = by_tc();
        let tc_took = started.elapsed();
        if before != after {
            eprintln!("{setup}: attempt {attempt}: something crossed during the reads; again");
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        let (nl, tc) = (comparable(nl), comparable(after));
        assert_eq!(nl.wan.qdiscs, tc.wan.qdiscs, "{setup}: wan0's qdiscs");
        assert_eq!(nl.wan.classes, tc.wan.classes, "{setup}: wan0's classes");
        assert_eq!(nl.wan.filters, tc.wan.filters, "{setup}: wan0's filters");
        assert_eq!(
            nl.ingress_filters, tc.ingress_filters,
            "{setup}: ingress filters"
        );
        assert_eq!(nl.ifb, tc.ifb, "{setup}: the IFB");
        assert_eq!(nl, tc, "{setup}");
        eprintln!("{setup}: equal; netlink read in {nl_took:?}, tc in {tc_took:?}");
        return;
    }
    panic!("{setup}: traffic never stopped long enough to compare");
}

/// Root qdisc bytes and the first cake tin's (or first class's) bytes, per device.
fn counters(s: &LiveState) -> Vec<(String, u64)> {
    let mut out = vec![];
    for d in std::iter::once(&s.wan).chain(s.ifb.as_ref()) {
        for q in &d.qdiscs {
            let label = format!("{} {}", d.dev, q.label());
            if let Some(st) = &q.stats {
                out.push((format!("{label} bytes"), st.bytes));
                out.push((format!("{label} packets"), st.packets));
            }
            if let QdiscKind::Cake { stats: Some(c), .. } = &q.details {
                for (i, t) in c.tins.iter().enumerate() {
                    out.push((format!("{label} tin {i} sent"), t.sent_bytes));
                }
            }
        }
        // HTB's classes only: cake's are its busy flows, which come and go.
        for c in d.classes.iter().filter(|c| c.htb().is_some()) {
            if let Some(st) = &c.stats {
                out.push((format!("{} class {} bytes", d.dev, c.handle), st.bytes));
            }
        }
    }
    out
}

fn assert_between_under_load(rtnl: &Rtnl, link: &Link, setup: &str) {
    let mut flood = link.flood();
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..5 {
        let (before, nl, after) = (by_tc(), by_netlink(rtnl), by_tc());
        let (b, n, a) = (counters(&before), counters(&nl), counters(&after));
        assert_eq!(n.len(), b.len(), "{setup}: {n:?} against {b:?}");
        let mut moved = false;
        for ((name, lo), ((_, mid), (_, hi))) in b.iter().zip(n.iter().zip(a.iter())) {
            assert!(
                lo <= mid && mid <= hi,
                "{setup}: {name}: tc {lo}, netlink {mid}, tc {hi}"
            );
            moved |= lo < hi;
        }
        assert!(moved, "{setup}: no counter moved under load: {b:?}");
    }
    let _ = flood.kill();
    let _ = flood.wait();
}

unbloat_testbed::real_kernel_test! {
    fn netlink_reads_what_tc_reads_for_both_setups() needs ["cake", "fq_codel", "htb", "ingress", "ifb", "mirred", "u32"] {
        in_new_netns(|| {
            let link = Link::new();
            let rtnl = Rtnl::open().unwrap();
            for (setup, lines) in [("cake", CAKE), ("htb", HTB)] {
                tc_batch(lines);
                link.traffic(100);
                assert_same_when_quiet(&rtnl, setup);
                assert_between_under_load(&rtnl, &link, setup);
                let nl = by_netlink(&rtnl);
                // Not vacuous: the setup is there, every qdisc of it decoded, and it counted.
                let undecoded: Vec<_> = nl.wan.qdiscs.iter()
                    .filter(|q| matches!(q.details, QdiscKind::Other { .. }))
                    .collect();
                assert!(undecoded.is_empty(), "{setup}: {undecoded:?}");
                let htb_classes = nl.wan.classes.iter().filter(|c| c.htb().is_some()).count();
                assert_eq!(htb_classes, if setup == "htb" { 4 } else { 0 }, "{setup}");
                assert!(nl.wan.root().unwrap().stats.as_ref().unwrap().packets > 0);
                assert_eq!(nl.ingress_filters.iter().filter(|f| f.u32_key().is_some()).count(), 1);
                run("tc", "qdisc del dev wan0 root");
                run("tc", "qdisc del dev wan0 ingress");
                run("tc", "qdisc del dev ifb4wan0 root");
            }

            // A missing device is named; a missing IFB is none.
            let gone: IfName = "nosuch0".parse().unwrap();
            match tcnl::read(&rtnl, &gone, None, false) {
                Err(e @ ReadError::NoDevice { .. }) => assert!(e.to_string().contains("nosuch0")),
                other => panic!("{other:?}"),
            }
            let (wan, _) = names();
            let no_ifb: IfName = "ifb4nosuch".parse().unwrap();
            let bare = tcnl::read(&rtnl, &wan, Some(&no_ifb), false).unwrap();
            assert!(bare.ifb.is_none());
            assert!(!bare.wan.is_shaped(), "{:?}", bare.wan.qdiscs);
            drop(link);
        });
    }
}
