//! The rtnetlink client against a real kernel, each test in a network namespace of its own (a
//! thread that unshares CLONE_NEWNET: the namespace is the thread's alone, the `tc` it starts
//! runs there too, and it is gone when the thread ends). Needs root: `make test` runs as root.
//!
//! Links and qdisc snapshots run on the host (it has htb, tbf, ifb, ingress); cake's rate change
//! runs where cake is, through `real_kernel_test!` (User-Mode Linux when the host lacks it), and
//! so does the timing of 1000 changes, which is printed, not asserted.

use std::process::Command;
use std::time::Instant;

use unbloat_system::rtnl::{Link, RawQdisc, Rtnl, RtnlError, TC_H_INGRESS, TC_H_ROOT};

/// Runs `f` on a new thread in a new network namespace; a panic in `f` is this test's panic.
fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let thread = std::thread::spawn(move || {
        // SAFETY: unshare has no memory preconditions; CLONE_NEWNET moves only this thread.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            rc,
            0,
            "unshare(CLONE_NEWNET): {} (these tests need root)",
            std::io::Error::last_os_error()
        );
        f()
    });
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `tc ARGS` in the calling thread's namespace; its stdout. Panics unless it succeeds.
fn tc(args: &str) -> String {
    let out = Command::new("tc")
        .args(args.split_whitespace())
        .output()
        .unwrap_or_else(|e| panic!("cannot run tc: {e}"));
    assert!(out.status.success(), "tc {args}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A new IFB, up; its link.
fn ifb_up(rtnl: &Rtnl, name: &str) -> Link {
    rtnl.add_ifb(name).unwrap();
    let link = rtnl.link(name).unwrap().expect("the IFB just created");
    rtnl.set_up(link.index).unwrap();
    link
}

fn only<'a>(qdiscs: &'a [RawQdisc], kind: &str) -> &'a RawQdisc {
    let found: Vec<_> = qdiscs.iter().filter(|q| q.kind == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in {qdiscs:?}");
    found[0]
}

#[test]
fn a_new_namespace_lists_its_loopback_down_and_set_up_brings_it_up() {
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        let lo = Link {
            index: 1,
            name: "lo".into(),
            kind: None,
            up: false,
        };
        assert!(rtnl.links().unwrap().contains(&lo), "{:?}", rtnl.links());
        assert_eq!(rtnl.link("lo").unwrap(), Some(lo));
        rtnl.set_up(1).unwrap();
        assert!(rtnl.link("lo").unwrap().unwrap().up);
        assert_eq!(rtnl.link("nosuchdev0").unwrap(), None);
    });
}

#[test]
fn an_ifb_is_created_once_with_its_kind_and_a_second_create_is_refused_with_eexist() {
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        rtnl.add_ifb("ifb4test0").unwrap();
        let link = rtnl.link("ifb4test0").unwrap().unwrap();
        assert_eq!(link.kind.as_deref(), Some("ifb"));
        assert!(!link.up, "created down, as `ip link add` does");
        assert!(rtnl.links().unwrap().contains(&link));

        let err = rtnl.add_ifb("ifb4test0").unwrap_err();
        assert_eq!(err.errno(), Some(libc::EEXIST), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("netlink: cannot create ifb4test0: File exists (os error 17)"),
            "{err}"
        );
        assert!(matches!(err, RtnlError::Kernel { .. }));

        rtnl.set_up(link.index).unwrap();
        let up = rtnl.link("ifb4test0").unwrap().unwrap();
        assert_eq!(up, Link { up: true, ..link });
    });
}

#[test]
fn qdiscs_read_what_tc_set_compare_equal_when_unchanged_and_differ_after_a_change() {
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        rtnl.add_ifb("ifb4test0").unwrap();
        let dev = rtnl.link("ifb4test0").unwrap().unwrap();
        assert_eq!(
            rtnl.qdiscs(dev.index).unwrap(),
            vec![],
            "a device never up has only the built-in noop, which is not listed"
        );
        rtnl.set_up(dev.index).unwrap();
        let default = rtnl.qdiscs(dev.index).unwrap();
        assert_eq!(default.len(), 1, "{default:?}");
        assert_eq!((default[0].handle, default[0].parent), (0, TC_H_ROOT));
        let other = ifb_up(&rtnl, "ifb4test1");

        tc("qdisc add dev ifb4test0 root handle 1: htb default 1");
        let first = rtnl.qdiscs(dev.index).unwrap();
        assert_eq!(first.len(), 1, "{first:?}");
        let htb = &first[0];
        assert_eq!(
            (htb.kind.as_str(), htb.handle, htb.parent),
            ("htb", 0x1_0000, TC_H_ROOT)
        );
        assert!(!htb.options.is_empty());
        assert!(htb.stab.is_empty());
        assert_eq!(rtnl.qdiscs(dev.index).unwrap(), first, "nothing changed");
        let other_qdiscs = rtnl.qdiscs(other.index).unwrap();
        assert_eq!(
            other_qdiscs.len(),
            1,
            "only ifb4test1's own: {other_qdiscs:?}"
        );

        // HTB has no change operation (sch_htb.c sets no .change): delete and add again.
        tc("qdisc del dev ifb4test0 root");
        tc("qdisc add dev ifb4test0 root handle 1: htb default 2");
        let second = rtnl.qdiscs(dev.index).unwrap();
        assert_ne!(second, first);
        assert_eq!(
            second[0],
            RawQdisc {
                options: second[0].options.clone(),
                ..htb.clone()
            },
            "only the options differ"
        );

        tc("class add dev ifb4test0 parent 1: classid 1:1 htb rate 1mbit");
        tc("qdisc add dev ifb4test0 parent 1:1 handle 10: tbf rate 1mbit burst 10k latency 50ms");
        tc("qdisc add dev ifb4test0 handle ffff: ingress");
        let all = rtnl.qdiscs(dev.index).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        let tbf = only(&all, "tbf");
        assert_eq!((tbf.handle, tbf.parent), (0x10_0000, 0x1_0001));
        let ingress = only(&all, "ingress");
        assert_eq!(
            (ingress.handle, ingress.parent),
            (0xFFFF_0000, TC_H_INGRESS)
        );
        assert_eq!(only(&all, "htb"), &second[0]);
    });
}

#[test]
fn a_size_table_is_read_with_its_qdisc() {
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        let dev = ifb_up(&rtnl, "ifb4test0");
        tc("qdisc add dev ifb4test0 root handle 1: stab overhead 24 mtu 2047 tsize 512 htb default 1");
        let with = rtnl.qdiscs(dev.index).unwrap();
        // TCA_STAB holds one TCA_STAB_BASE (1): a struct tc_sizespec of 24 bytes (pkt_sched.h),
        // whose `overhead` is the s32 at offset 4.
        let stab = &only(&with, "htb").stab;
        assert_eq!(stab.len(), 28, "{stab:?}");
        assert_eq!(u16::from_ne_bytes([stab[0], stab[1]]), 28);
        assert_eq!(u16::from_ne_bytes([stab[2], stab[3]]) & 0x3FFF, 1);
        assert_eq!(i32::from_ne_bytes(stab[8..12].try_into().unwrap()), 24);

        tc("qdisc del dev ifb4test0 root");
        tc("qdisc add dev ifb4test0 root handle 1: htb default 1");
        let without = rtnl.qdiscs(dev.index).unwrap();
        assert!(only(&without, "htb").stab.is_empty(), "{without:?}");
        assert_eq!(only(&without, "htb").options, only(&with, "htb").options);
    });
}

#[test]
fn a_deleted_device_is_gone_and_every_operation_on_its_index_is_an_error_naming_it() {
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        let dev = ifb_up(&rtnl, "ifb4test0");
        rtnl.delete_link(dev.index).unwrap();
        assert_eq!(rtnl.link("ifb4test0").unwrap(), None);
        assert!(!rtnl.links().unwrap().iter().any(|l| l.name == "ifb4test0"));

        let index = dev.index;
        let refused = |what: &str, result: Result<_, RtnlError>| {
            let err = result.expect_err(what);
            assert_eq!(err.errno(), Some(libc::ENODEV), "{what}: {err}");
            let text = err.to_string();
            assert!(text.contains(&format!("device index {index}")), "{text}");
            assert!(text.contains("No such device (os error 19)"), "{text}");
            text
        };
        assert_eq!(
            refused("delete", rtnl.delete_link(index)),
            format!("netlink: cannot delete device index {index}: No such device (os error 19)")
        );
        refused("set up", rtnl.set_up(index));
        refused("qdiscs", rtnl.qdiscs(index).map(|_| ()));
        refused("cake", rtnl.change_cake_bandwidth(index, 1_250_000));
    });
}

#[test]
fn change_cake_bandwidth_refuses_a_root_that_is_not_cake_and_changes_nothing() {
    // No cake needed: the root is read first and the change never sent.
    in_new_netns(|| {
        let rtnl = Rtnl::open().unwrap();
        let dev = ifb_up(&rtnl, "ifb4test0");
        let refused = |expected_root: &str| {
            let err = rtnl
                .change_cake_bandwidth(dev.index, 1_250_000)
                .unwrap_err();
            assert!(matches!(err, RtnlError::NotCake { .. }), "{err:?}");
            assert_eq!(err.errno(), None);
            let text = err.to_string();
            let prefix = format!(
                "netlink: cannot change cake's bandwidth on ifb4test0 (index {}) to 1250000 \
                 bytes/s: the root qdisc is ",
                dev.index
            );
            assert!(text.starts_with(&prefix), "{text}");
            assert!(
                text.ends_with(&format!("{expected_root}, not cake; nothing was changed")),
                "{text}"
            );
        };
        let default = rtnl.qdiscs(dev.index).unwrap();
        refused(" 0:"); // the device's default, whatever net.core.default_qdisc says
        assert_eq!(rtnl.qdiscs(dev.index).unwrap(), default, "nothing created");

        tc("qdisc add dev ifb4test0 root handle 1: htb default 1");
        let htb = rtnl.qdiscs(dev.index).unwrap();
        refused("is htb 1:");
        assert_eq!(rtnl.qdiscs(dev.index).unwrap(), htb, "nothing replaced");
    });
}

/// `tc -s -j qdisc show dev lo`'s root qdisc.
fn root_json() -> serde_json::Value {
    let shown: serde_json::Value =
        serde_json::from_str(&tc("-s -j qdisc show dev lo")).expect("tc -j prints JSON");
    let root = shown
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["root"] == true))
        .unwrap_or_else(|| panic!("no root qdisc in {shown}"));
    root.clone()
}

/// Sends `n` UDP datagrams to ourselves over lo (through its root qdisc).
fn send_over_lo(n: usize) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = socket.local_addr().unwrap();
    for _ in 0..n {
        socket.send_to(&[0; 100], to).unwrap();
    }
}

unbloat_testbed::real_kernel_test! {
    /// `tc qdisc change dev lo root cake bandwidth 20mbit`, in process: tc reads back the new
    /// rate (tc -j prints cake's bandwidth in bytes per second) and every other option as it was;
    /// the counters go on (a replaced qdisc would start again from zero).
    fn change_cake_bandwidth_changes_the_rate_and_nothing_else() needs ["cake"] {
        in_new_netns(|| {
            let rtnl = Rtnl::open().unwrap();
            rtnl.set_up(1).unwrap();
            tc("qdisc add dev lo root cake bandwidth 10mbit diffserv4 dual-dsthost nat wash \
                overhead 38 mpu 84 rtt 50ms ack-filter");
            send_over_lo(20);
            let before = root_json();
            let raw_before = rtnl.qdiscs(1).unwrap();
            assert_eq!(before["options"]["bandwidth"], 1_250_000, "{before}");
            let sent_before = before["packets"].as_u64().unwrap();
            assert!(sent_before >= 20, "{before}");

            rtnl.change_cake_bandwidth(1, 2_500_000).unwrap();

            let after = root_json();
            assert_eq!(after["kind"], "cake");
            assert_eq!(after["handle"], before["handle"]);
            assert_eq!(after["options"]["bandwidth"], 2_500_000, "{after}");
            let unchanged = |v: &serde_json::Value| {
                let mut options = v["options"].clone();
                options.as_object_mut().unwrap().remove("bandwidth");
                options
            };
            assert_eq!(unchanged(&after), unchanged(&before));
            assert_eq!(after["options"]["diffserv"], "diffserv4", "{after}");
            assert_eq!(after["options"]["overhead"], 38, "{after}");
            assert!(after["packets"].as_u64().unwrap() >= sent_before, "{before}\n{after}");

            let raw_after = rtnl.qdiscs(1).unwrap();
            assert_eq!(raw_after.len(), 1);
            assert_eq!(
                (&raw_after[0].kind, raw_after[0].handle, raw_after[0].parent),
                (&raw_before[0].kind, raw_before[0].handle, raw_before[0].parent)
            );
            assert_ne!(raw_after[0].options, raw_before[0].options);
            rtnl.change_cake_bandwidth(1, 1_250_000).unwrap();
            assert_eq!(rtnl.qdiscs(1).unwrap(), raw_before, "back to 10mbit, byte for byte");
        });
    }

    /// With the handle, the kernel itself refuses anything but a change of that cake, where a
    /// plain `tc qdisc change ... root cake` would create one or replace another root.
    fn a_cake_change_with_a_stale_handle_is_refused_and_changes_nothing() needs ["cake", "htb"] {
        in_new_netns(|| {
            let rtnl = Rtnl::open().unwrap();
            let dev = ifb_up(&rtnl, "ifb4test0");
            // The behaviour, not a kernel's words: refused with one of the errnos kernels use
            // for it (6.1 says EEXIST "NLM_F_REPLACE needed to override" where 7.2 says EINVAL
            // "Invalid qdisc name: must match existing qdisc"), the kernel's own reason carried
            // in the error, and nothing changed.
            let refused = |handle: u32, errnos: &[i32]| {
                let before = rtnl.qdiscs(dev.index).unwrap();
                let err = rtnl
                    .change_cake_bandwidth_with_handle(dev.index, handle, 1_250_000)
                    .unwrap_err();
                assert!(err.errno().is_some_and(|e| errnos.contains(&e)), "{err}");
                let reason = err.to_string();
                let reason = reason.split_once("the kernel says: ").map(|(_, r)| r.trim());
                assert!(reason.is_some_and(|r| r.len() > 5), "{err}");
                assert_eq!(rtnl.qdiscs(dev.index).unwrap(), before, "nothing changed");
            };
            // Only the default root: nothing to change, nothing created.
            refused(0x8001_0000, &[libc::ENOENT, libc::EINVAL]);

            tc("qdisc add dev ifb4test0 root handle 1: cake bandwidth 10mbit");
            rtnl.change_cake_bandwidth_with_handle(dev.index, 0x1_0000, 2_500_000).unwrap();
            refused(0x2_0000, &[libc::EEXIST, libc::EINVAL]);

            tc("qdisc replace dev ifb4test0 root handle 2: htb default 1");
            refused(0x1_0000, &[libc::EEXIST, libc::EINVAL]);
            refused(0x2_0000, &[libc::EINVAL]);
            let err = rtnl.change_cake_bandwidth(dev.index, 1_250_000).unwrap_err();
            assert!(matches!(err, RtnlError::NotCake { .. }), "{err:?}");
        });
    }

    /// The cost of one rate change, in process and as a `tc` process, printed (run with
    /// `--nocapture` to see it). Not asserted: a loaded machine is slow, not wrong.
    fn time_of_a_cake_bandwidth_change() needs ["cake"] {
        in_new_netns(|| {
            let rtnl = Rtnl::open().unwrap();
            rtnl.set_up(1).unwrap();
            tc("qdisc add dev lo root cake bandwidth 10mbit");
            const CHANGES: u32 = 1000;
            let rate = |i: u32| 1_250_000 + u64::from(i % 2) * 125_000;
            for i in 0..100 {
                rtnl.change_cake_bandwidth(1, rate(i)).unwrap(); // warm up
            }
            let started = Instant::now();
            for i in 0..CHANGES {
                rtnl.change_cake_bandwidth(1, rate(i)).unwrap();
            }
            let per_change = started.elapsed() / CHANGES;
            let handle = rtnl.qdiscs(1).unwrap()[0].handle;
            let started = Instant::now();
            for i in 0..CHANGES {
                rtnl.change_cake_bandwidth_with_handle(1, handle, rate(i)).unwrap();
            }
            let per_change_with_handle = started.elapsed() / CHANGES;
            const PROCESSES: u32 = 20;
            let started = Instant::now();
            for i in 0..PROCESSES {
                tc(&format!("qdisc change dev lo root cake bandwidth {}kbit", 10_000 + (i % 2) * 1000));
            }
            let per_process = started.elapsed() / PROCESSES;
            println!(
                "rtnl timing in {}: change_cake_bandwidth {:.1} µs each, \
                 change_cake_bandwidth_with_handle {:.1} µs each (means of {CHANGES}); \
                 `tc qdisc change` {:.2} ms each (mean of {PROCESSES} processes)",
                unbloat_testbed::kernel::describe_current(),
                per_change.as_secs_f64() * 1e6,
                per_change_with_handle.as_secs_f64() * 1e6,
                per_process.as_secs_f64() * 1e3,
            );
        });
    }
}
