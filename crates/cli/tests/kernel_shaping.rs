//! `unbloat start | status | stop` in a kernel that has the qdiscs (the host's, or User-Mode
//! Linux): every golden configuration on real devices, and every kind of bad input refused with a
//! clear message, a failing exit status and the interface exactly as it was.

mod common;

use common::{golden_cases, text, Netns};
use unbloat_testbed::real_kernel_test;

const NEEDS: &[&str] = &["cake", "fq_codel", "htb", "ingress"];

/// Each golden configuration that `pick` selects: start (exit 0, verified), start again
/// (unchanged), status (owned by unbloat, text and JSON), stop, and nothing left behind.
fn golden_configurations_start_verify_show_and_stop(pick: fn(&str) -> bool) {
    let ns = Netns::new();
    let cases: Vec<_> = golden_cases()
        .into_iter()
        .filter(|(name, _, _)| pick(name))
        .collect();
    assert!(!cases.is_empty(), "no golden case selected");
    for (name, iface, table) in cases {
        let before = ns.snapshot();
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let config = ns.run_dir.join(format!("{name}.toml"));
        std::fs::write(&config, format!("[interface.\"{iface}\"]\n{table}")).unwrap();
        let config = config.to_str().unwrap();

        let run = |what: &str, args: &[&str], says: &str| {
            let out = ns.unbloat(args);
            assert!(
                out.status.success(),
                "{name}: {what} failed:\n{}",
                text(&out)
            );
            assert!(text(&out).contains(says), "{name}: {what}: {}", text(&out));
        };
        let start = ["start", &iface, "--config", config];
        run("start", &start, "verified");
        assert_ne!(ns.snapshot(), before, "{name}: start changed nothing");
        run("second start", &start, "nothing changed");
        run("status", &["status", &iface], "shaped by unbloat");
        let json = ns.unbloat(&["status", &iface, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{name}: status --json is not JSON ({e}): {}", text(&json)));
        assert_eq!(v[0]["ownership"], "unbloat", "{name}: {v}");

        let stop = ns.unbloat(&["stop", &iface]);
        assert!(
            stop.status.success(),
            "{name}: stop failed:\n{}",
            text(&stop)
        );
        assert_eq!(ns.snapshot(), before, "{name}: stop left something behind");
    }
}

real_kernel_test! {
    /// The golden configurations of cake. Split from the others so that `make test`'s two
    /// threads for this file share the golden cases evenly.
    fn the_golden_cake_configurations_start_verify_show_and_stop_cleanly() needs ["cake", "fq_codel", "htb", "ingress"] {
        golden_configurations_start_verify_show_and_stop(|name| name.starts_with("cake_"));
    }

    /// Every other golden configuration: fq_codel tiers under HTB, and the interface names.
    fn the_other_golden_configurations_start_verify_show_and_stop_cleanly() needs ["cake", "fq_codel", "htb", "ingress"] {
        golden_configurations_start_verify_show_and_stop(|name| !name.starts_with("cake_"));
    }
}

/// (what, args, exit status, words the message must contain)
fn bad_inputs(
    cfg_unknown: &str,
    cfg_twice: &str,
) -> Vec<(&'static str, Vec<String>, i32, Vec<&'static str>)> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            "bad unit",
            v(&["start", "eth0", "--down", "78mbitz"]),
            2,
            vec!["--down", "unknown unit"],
        ),
        (
            "zero both ways",
            v(&["start", "eth0", "--down", "0", "--up", "0"]),
            2,
            vec!["nothing to shape"],
        ),
        (
            "negative rate",
            v(&["start", "eth0", "--up=-5mbit"]),
            2,
            vec!["--up", "negative"],
        ),
        (
            "absurdly high rate",
            v(&["start", "eth0", "--up", "500gbit"]),
            2,
            vec!["--up", "500gbit"],
        ),
        (
            "absurdly low rate",
            v(&["start", "eth0", "--up", "1kbit"]),
            2,
            vec!["--up", "1kbit"],
        ),
        (
            "unknown interface",
            v(&["start", "nosuch0", "--up", "10mbit"]),
            1,
            vec!["no network interface nosuch0"],
        ),
        (
            "name too long",
            v(&["start", "abcdefghijklmnop", "--up", "10mbit"]),
            2,
            vec!["15 bytes"],
        ),
        (
            "overhead too big",
            v(&["start", "eth0", "--up", "10mbit", "--overhead", "300"]),
            2,
            vec!["--overhead", "300"],
        ),
        (
            "overhead too small",
            v(&["start", "eth0", "--up", "10mbit", "--overhead", "-65"]),
            2,
            vec!["--overhead", "-65"],
        ),
        (
            "mpu out of range",
            v(&["start", "eth0", "--up", "10mbit", "--mpu", "300"]),
            2,
            vec!["--mpu", "300"],
        ),
        (
            "atm with ptm",
            v(&[
                "start",
                "eth0",
                "--up",
                "10mbit",
                "--link",
                "vdsl2",
                "--framing",
                "atm",
            ]),
            2,
            vec!["atm", "ptm"],
        ),
        (
            "ack-filter on fq_codel",
            v(&[
                "start",
                "eth0",
                "--up",
                "10mbit",
                "--qdisc",
                "fq_codel",
                "--ack-filter",
            ]),
            2,
            vec!["ack-filter", "fq_codel"],
        ),
        (
            "diffserv on fq_codel",
            v(&[
                "start",
                "eth0",
                "--up",
                "10mbit",
                "--qdisc",
                "fq_codel",
                "--diffserv",
                "diffserv4",
            ]),
            2,
            vec!["diffserv", "fq_codel"],
        ),
        (
            "tiers on cake",
            v(&["start", "eth0", "--up", "10mbit", "--tiers", "3"]),
            2,
            vec!["tiers"],
        ),
        (
            "unknown word in an option string",
            v(&[
                "start",
                "eth0",
                "--up",
                "10mbit",
                "--egress-options",
                "nat bogusword",
            ]),
            2,
            vec!["bogusword"],
        ),
        (
            "unknown TOML key",
            v(&["start", "eth0", "--config", cfg_unknown]),
            2,
            vec!["unknown.toml:3", "bogus-key"],
        ),
        (
            "the same interface twice",
            v(&["start", "--config", cfg_twice]),
            2,
            vec!["twice.toml:", "eth0", "one table"],
        ),
        (
            "stop what is not shaped",
            v(&["stop", "eth0"]),
            1,
            vec!["not shaped by unbloat"],
        ),
        // Issue 19: no guessed units, and no rate that would cut the user off unconfirmed.
        (
            "SQM's kbit/s without a unit",
            v(&["start", "eth0", "--down", "20000", "--up", "10000"]),
            2,
            vec!["--down", "20000kbit (SQM's unit)", "20mbit"],
        ),
        (
            "a speed test's Mbps",
            v(&["start", "eth0", "--down", "20 Mbps"]),
            2,
            vec!["--down", "20mbit if you mean megabits", "160mbit"],
        ),
        (
            "a bare rtt",
            v(&["start", "eth0", "--up", "10mbit", "--rtt", "100"]),
            2,
            vec!["--rtt", "write 100ms"],
        ),
        (
            "a bare bandwidth word in an option string",
            v(&[
                "start",
                "eth0",
                "--up",
                "10mbit",
                "--egress-options",
                "bandwidth 20000",
            ]),
            2,
            vec!["bandwidth", "20000kbit (SQM's unit)"],
        ),
        (
            "set-rate without a unit",
            v(&["set-rate", "eth0", "--down", "20000"]),
            2,
            vec!["--down", "20000kbit (SQM's unit)"],
        ),
        (
            "below 64kbit unconfirmed",
            v(&["start", "eth0", "--down", "50mbit", "--up", "20kbit"]),
            2,
            vec!["--up 20kbit: below 64kbit", "--i-mean-it"],
        ),
        (
            "over 1000 to 1 unconfirmed",
            v(&["start", "eth0", "--down", "1gbit", "--up", "900kbit"]),
            2,
            vec!["1111 times", "--i-mean-it"],
        ),
    ]
}

real_kernel_test! {
    /// Every bad input: a message that names what was wrong, the documented exit status, and the
    /// interfaces exactly as they were.
    fn bad_inputs_are_refused_clearly_and_change_nothing() needs ["cake", "fq_codel", "htb", "ingress"] {
        let ns = Netns::new();
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let unknown = ns.run_dir.join("unknown.toml");
        std::fs::write(&unknown, "[interface.eth0]\nup = \"10mbit\"\nbogus-key = 1\n").unwrap();
        let twice = ns.run_dir.join("twice.toml");
        std::fs::write(&twice, "[interface.eth0]\nup = \"10mbit\"\n\n[interface.eth0]\ndown = \"10mbit\"\n").unwrap();
        let before = ns.snapshot();
        let cases = bad_inputs(unknown.to_str().unwrap(), twice.to_str().unwrap());
        assert!(cases.len() >= 15);
        for (what, args, code, words) in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ns.unbloat(&args);
            let msg = text(&out);
            assert_eq!(out.status.code(), Some(code), "{what}: exit status, output:\n{msg}");
            for w in words {
                assert!(msg.contains(w), "{what}: the message should mention {w:?}:\n{msg}");
            }
            assert!(!msg.contains("panicked"), "{what}: {msg}");
            assert_eq!(ns.snapshot(), before, "{what}: the interface changed");
        }
    }
}

/// A `tc` that, before unbloat's apply batch (`tc -batch -`) runs, deletes the IFB unbloat just
/// created and brought up, as a concurrent administrator (or a hot-unplug) might: the IFB's
/// `qdisc add ... root cake` in the middle of the real batch then fails in the kernel ("Cannot
/// find device"), after the egress qdisc has been created. That is a genuine half-applied setup
/// for the rollback to undo.
fn fault_injecting_tc(dir: &std::path::Path) -> String {
    let path = dir.join("tc-with-fault");
    // Once only (a marker file), so that the rollback's own re-apply is not sabotaged too.
    let marker = dir.join("fault-fired");
    let _ = std::fs::remove_file(&marker);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$1\" = -batch ] && [ ! -e {m} ]; then\n  touch {m}\n  ip link del dev ifb4eth0\nfi\nexec tc \"$@\"\n",
            m = marker.display()
        ),
    )
    .unwrap();
    common::must(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

real_kernel_test! {
    /// A tc command failing half way through the batch: the error names that command and tc's
    /// message, the exit status is 1, and everything is as it was: nothing, or the previous setup.
    fn a_tc_failure_half_way_is_rolled_back_exactly() needs ["cake", "ingress"] {
        let ns = Netns::new();
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let tc = fault_injecting_tc(&ns.run_dir);
        let args = ["start", "eth0", "--down", "50mbit", "--up", "10mbit"];

        // From an unshaped interface.
        let before = ns.snapshot();
        let out = ns.unbloat_env(&args, &[("UNBLOAT_TC", &tc)]);
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains("tc qdisc add dev ifb4eth0 root cake"), "names the failing command: {msg}");
        assert!(msg.contains("Cannot find device"), "quotes tc: {msg}");
        assert!(msg.contains("exactly as it was"), "{msg}");
        assert!(!msg.contains("Command failed -:"), "tc's batch line number is replaced by the command: {msg}");
        assert_eq!(ns.snapshot(), before, "rollback from nothing");

        // Over a previous unbloat setup, which must come back.
        let ok = ns.unbloat(&["start", "eth0", "--down", "20mbit", "--up", "5mbit", "--link", "docsis"]);
        assert!(ok.status.success(), "{}", text(&ok));
        let shaped = ns.snapshot();
        let tc = fault_injecting_tc(&ns.run_dir);
        let out = ns.unbloat_env(&args, &[("UNBLOAT_TC", &tc)]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("exactly as it was"), "{}", text(&out));
        assert_eq!(ns.snapshot(), shaped, "the previous setup is restored");
        let status = ns.unbloat(&["status", "eth0"]);
        assert!(text(&status).contains("shaped by unbloat"), "{}", text(&status));
        assert!(ns.unbloat(&["stop", "eth0"]).status.success());
        assert_eq!(ns.snapshot(), before);
    }
}

real_kernel_test! {
    /// unbloat never replaces a qdisc it did not create, and stop removes only what start created.
    fn foreign_qdiscs_are_left_alone() needs ["cake", "htb", "ingress"] {
        let ns = Netns::new();
        ns.must("tc qdisc add dev eth0 root handle 1: htb default 1");
        let before = ns.snapshot();
        let out = ns.unbloat(&["start", "eth0", "--up", "10mbit"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("unbloat did not create"), "{}", text(&out));
        assert_eq!(ns.snapshot(), before);
        let status = ns.unbloat(&["status", "eth0"]);
        assert!(text(&status).contains("something other than unbloat"), "{}", text(&status));
        // tune refuses it before measuring anything (the far end need not even exist).
        let out = ns.unbloat(&["tune", "eth0", "--server", "http://192.0.2.1:9/", "--no-sweep"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("root qdisc (htb 1:"), "{}", text(&out));
        assert!(!text(&out).contains("saturates"), "tune started: {}", text(&out));
        assert_eq!(ns.snapshot(), before);

        // Someone's ingress qdisc stays when unbloat shapes egress only, and after stop.
        ns.must("tc qdisc del dev eth0 root");
        ns.must("tc qdisc add dev eth0 handle ffff: ingress");
        let before = ns.snapshot();
        let out = ns.unbloat(&["start", "eth0", "--up", "10mbit"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(ns.unbloat(&["stop", "eth0"]).status.success());
        assert_eq!(ns.snapshot(), before);

        let plain = ns.unbloat(&["status", "isp0"]);
        assert!(text(&plain).contains("not shaped"), "{}", text(&plain));
    }
}

/// A kernel without sch_cake: only in a User-Mode Linux guest, where unloading a module harms
/// nothing and the guest cannot load it back by itself (its modules live outside /lib/modules).
#[test]
fn a_missing_module_is_named_and_changes_nothing() {
    if !unbloat_testbed::kernel::in_guest() {
        let ran_here = unbloat_testbed::kernel::run_test_in_uml(
            concat!(
                module_path!(),
                "::a_missing_module_is_named_and_changes_nothing"
            ),
            NEEDS,
        );
        assert!(
            !ran_here,
            "forced to User-Mode Linux, the body runs in the guest"
        );
        return;
    }
    common::must("rmmod sch_cake");
    let ns = Netns::new();
    let before = ns.snapshot();
    let out = ns.unbloat(&["start", "eth0", "--down", "50mbit", "--up", "10mbit"]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(
        msg.contains("no cake qdisc") && msg.contains("modprobe sch_cake"),
        "{msg}"
    );
    assert!(
        msg.contains("--qdisc fq_codel"),
        "suggests the alternative: {msg}"
    );
    assert_eq!(ns.snapshot(), before);
    // The alternative works on the same kernel.
    let out = ns.unbloat(&[
        "start", "eth0", "--down", "50mbit", "--up", "10mbit", "--qdisc", "fq_codel",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ns.unbloat(&["stop", "eth0"]).status.success());
}
