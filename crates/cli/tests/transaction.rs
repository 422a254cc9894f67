//! Shaping as a transaction, in a kernel that has the qdiscs (the host's, or User-Mode Linux):
//! several interfaces change together or not at all; a SIGKILL at every step of an apply, a
//! stop or a set-rate leaves the old or the new setup whole after the next command; a run
//! directory that cannot be written changes nothing; stop leaves what is no longer unbloat's;
//! a record is data, never commands; set-rate changes in place.

mod common;

use common::{text, Netns};
use std::os::unix::process::ExitStatusExt;
use unbloat_testbed::real_kernel_test;

/// A `tc` that fails the `n`th apply batch (`tc -batch -`; reads are `tc -j ... -batch`) half
/// way: its first half runs for real, then it reports an error as tc does.
fn tc_failing_batch(ns: &Netns, n: u32) -> String {
    let path = ns.run_dir.join("tc-fails-half-way");
    let count = ns.run_dir.join("tc-batches");
    let _ = std::fs::remove_file(&count);
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/sh
if [ "$1" = "-batch" ]; then
  n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}
  if [ $n -eq {n} ]; then
    input=$(cat); half=$(( ($(printf '%s\n' "$input" | wc -l) + 1) / 2 ))
    printf '%s\n' "$input" | head -n $half | tc -batch - || exit $?
    echo "RTNETLINK answers: No buffer space available (injected by the test)" >&2
    echo "Command failed -:$((half + 1))" >&2
    exit 1
  fi
fi
exec tc "$@"
"#,
            count = count.display()
        ),
    )
    .unwrap();
    common::must(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

/// A `tc` that runs the first `k` lines of an apply batch and then SIGKILLs unbloat, its parent;
/// a batch of `k` lines or fewer runs whole, as if nothing happened.
fn tc_killing_parent_after(ns: &Netns, k: usize) -> String {
    let path = ns.run_dir.join(format!("tc-kills-after-{k}"));
    let batch = ns.run_dir.join("batch");
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/sh
if [ "$1" = "-batch" ]; then
  cat > {batch}
  if [ $(wc -l < {batch}) -le {k} ]; then exec tc -batch {batch}; fi
  head -n {k} {batch} | tc -batch -
  kill -9 $PPID
  exit 1
fi
exec tc "$@"
"#,
            batch = batch.display()
        ),
    )
    .unwrap();
    common::must(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

fn write_config(ns: &Netns, name: &str, text: &str) -> String {
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    let path = ns.run_dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn ok(ns: &Netns, args: &[&str]) -> String {
    let out = ns.unbloat(args);
    assert!(
        out.status.success(),
        "unbloat {args:?} failed:\n{}",
        text(&out)
    );
    text(&out)
}

const TWO: &str = "[interface.eth0]\ndown = \"50mbit\"\nup = \"10mbit\"\n\n[interface.enx00e04c680123]\ndown = \"20mbit\"\nup = \"5mbit\"\nqdisc = \"fq_codel\"\ntiers = 3\n";
const TWO_CHANGED: &str = "[interface.eth0]\ndown = \"40mbit\"\nup = \"8mbit\"\nlink = \"docsis\"\n\n[interface.enx00e04c680123]\ndown = \"20mbit\"\nup = \"5mbit\"\n";

real_kernel_test! {
    /// Both interfaces of a config, or neither: tc failing half way through the second
    /// interface's batch leaves the first as it was too, from nothing and from a previous setup.
    fn a_two_interface_config_is_one_transaction() needs ["cake", "fq_codel", "htb", "ingress"] {
        let ns = Netns::new();
        let two = write_config(&ns, "two.toml", TWO);
        let changed = write_config(&ns, "changed.toml", TWO_CHANGED);
        let before = ns.snapshot();

        let tc = tc_failing_batch(&ns, 2);
        let out = ns.unbloat_env(&["start", "--config", &two], &[("UNBLOAT_TC", &tc)]);
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains("injected by the test"), "quotes tc: {msg}");
        assert!(msg.contains("exactly as it was"), "{msg}");
        assert_eq!(ns.snapshot(), before, "the first interface was shaped and not undone");
        let status = ns.unbloat(&["status"]);
        assert!(text(&status).contains("no interface is shaped"), "{}", text(&status));

        ok(&ns, &["start", "--config", &two]);
        let shaped = ns.snapshot();
        assert_ne!(shaped, before);
        let tc = tc_failing_batch(&ns, 2);
        let out = ns.unbloat_env(&["start", "--config", &changed], &[("UNBLOAT_TC", &tc)]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert_eq!(ns.snapshot(), shaped, "both previous setups are back");
        assert!(ok(&ns, &["start", "--config", &two]).contains("nothing changed"));

        ok(&ns, &["start", "--config", &changed]);
        ok(&ns, &["stop", "--all"]);
        assert_eq!(ns.snapshot(), before);
    }
}

/// One change to crash: how to get to the old setup, the command that changes it, and how to
/// clean up afterwards.
struct Scenario {
    name: &'static str,
    setup: &'static [&'static str],
    change: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "fresh start",
        setup: &[],
        change: &["start", "eth0", "--down", "50mbit", "--up", "10mbit"],
    },
    Scenario {
        name: "replace cake with three-tier fq_codel",
        setup: &[
            "start", "eth0", "--down", "20mbit", "--up", "5mbit", "--link", "docsis",
        ],
        change: &[
            "start", "eth0", "--down", "50mbit", "--up", "10mbit", "--qdisc", "fq_codel",
            "--tiers", "3",
        ],
    },
    Scenario {
        name: "change cake in place",
        setup: &["start", "eth0", "--down", "20mbit", "--up", "5mbit"],
        change: &[
            "start", "eth0", "--down", "30mbit", "--up", "8mbit", "--nat",
        ],
    },
    Scenario {
        name: "set-rate",
        setup: &["start", "eth0", "--down", "20mbit", "--up", "5mbit"],
        change: &["set-rate", "eth0", "--down", "25mbit", "--up", "6mbit"],
    },
    Scenario {
        name: "stop",
        setup: &[
            "start", "eth0", "--down", "20mbit", "--up", "5mbit", "--qdisc", "fq_codel",
        ],
        change: &["stop", "eth0"],
    },
];

/// The crash points of `apply::crash_point`, in order.
const POINTS: &[&str] = &["journal", "links", "tc", "committed", "recorded"];

/// SIGKILL after every step of one kind of change (each crash point, and after each line of its
/// tc batch), then one more command: the interface holds the old setup or the new one, whole, and
/// what unbloat says it holds agrees with the kernel (the same change again leads to the new
/// setup, verified).
fn a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(s: &Scenario) {
    let ns = Netns::new();
    let unshaped = ns.snapshot();
    // The old and the new setups, without a crash.
    if !s.setup.is_empty() {
        ok(&ns, s.setup);
    }
    let old = ns.snapshot();
    ok(&ns, s.change);
    let new = ns.snapshot();
    assert_ne!(old, new, "{}: the change changes nothing", s.name);
    // Back to the old setup. Snapshots cost many processes in User-Mode Linux: the reset is
    // checked here once, and every kill below is judged by a snapshot of its own.
    let reset = || {
        let _ = ns.unbloat(&["stop", "--all"]);
        if !s.setup.is_empty() {
            ok(&ns, s.setup);
        }
    };
    reset();
    assert_eq!(ns.snapshot(), old, "{}: the old setup again", s.name);
    let mut kills: Vec<(String, (&str, String))> = POINTS
        .iter()
        .map(|p| (format!("at {p}"), ("UNBLOAT_CRASH_AT", p.to_string())))
        .collect();
    // More than any batch here has; the first k past the batch's end completes the change.
    for k in 0..64 {
        kills.push((
            format!("after {k} batch lines"),
            ("UNBLOAT_TC", tc_killing_parent_after(&ns, k)),
        ));
    }
    let mut tried = 0;
    let mut completed = false;
    for (when, (key, value)) in kills {
        let out = ns.unbloat_env(s.change, &[(key, value.as_str())]);
        if out.status.success() {
            // The kill point is past this change: it completed.
            assert_eq!(ns.snapshot(), new, "{} {when}", s.name);
            reset();
            if key == "UNBLOAT_TC" {
                completed = true;
                break;
            }
            continue;
        }
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{} {when}: {}",
            s.name,
            text(&out)
        );
        tried += 1;
        // The next command: status finishes or undoes the change first.
        let status = ns.unbloat(&["status"]);
        assert!(
            status.status.success(),
            "{} {when}: {}",
            s.name,
            text(&status)
        );
        let now = ns.snapshot();
        assert!(
            now == old || now == new,
            "{} {when}: neither the old nor the new setup:\n{now}\nold:\n{old}\nnew:\n{new}",
            s.name
        );
        if now == old {
            // Undone: the next kill's run is the same change again from here, and it must get
            // as far as its kill point (a run refused by records that disagree with the kernel
            // exits 1, not by SIGKILL, and fails the assertion above); the last run, past every
            // kill point, must end in the new setup. So no reset is needed, and without one this
            // loop takes half the time (the replace's 48 batch lines took 4 minutes).
            continue;
        }
        // Finished: unbloat's records agree with the kernel: the same change again ends in the
        // new setup (a stop that already happened says there is nothing to stop).
        let again = ns.unbloat(s.change);
        let stopped_already =
            s.change[0] == "stop" && now == new && text(&again).contains("not shaped");
        assert!(
            again.status.success() || stopped_already,
            "{} {when}: after recovery: {}",
            s.name,
            text(&again)
        );
        assert_eq!(ns.snapshot(), new, "{} {when}", s.name);
        reset();
    }
    assert!(
        completed,
        "{}: no run got past the batch's last line",
        s.name
    );
    assert!(
        tried > POINTS.len() - 2,
        "{}: only {tried} kills happened",
        s.name
    );
    let _ = ns.unbloat(&["stop", "--all"]);
    assert_eq!(ns.snapshot(), unshaped);
    let probes = std::fs::read_dir("/run/netns").map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("unbloat-probe-")
            })
            .count()
    });
    assert_eq!(probes, 0, "probe namespaces left behind");
}

/// eth0 deleted and created again under its record (a PPPoE reconnect, a modem re-plug while no
/// daemon ran): its IFB stays behind, holding the old download shaping, and the new eth0 holds
/// nothing. A start then, killed at each step: the next command finds the device bare (the
/// orphan IFB is removed before the change begins) or the new setup whole, never the old record's
/// setup re-created on a device that did not hold it.
fn recreate_eth0(ns: &Netns) {
    ns.must("ip link del eth0");
    ns.must("ip link add eth0 type veth peer name isp0");
    ns.must("ip link set eth0 up");
}

real_kernel_test! {
    fn a_kill_during_a_start_on_a_recreated_device_leaves_it_bare_or_shaped() needs ["cake", "ingress"] {
        let ns = Netns::new();
        let setup = ["start", "eth0", "--down", "20mbit", "--up", "5mbit"];
        let change = ["start", "eth0", "--down", "25mbit", "--up", "6mbit"];
        ok(&ns, &setup);
        recreate_eth0(&ns);
        assert!(common::text(&ns.sh("ip -o link show type ifb")).contains("ifb4eth0"), "the IFB stayed");
        ok(&ns, &change);
        let new = ns.snapshot();
        let _ = ns.unbloat(&["stop", "--all"]);
        let bare = ns.snapshot();
        for p in POINTS {
            ok(&ns, &setup);
            recreate_eth0(&ns);
            let out = ns.unbloat_env(&change, &[("UNBLOAT_CRASH_AT", p)]);
            if out.status.success() {
                assert_eq!(ns.snapshot(), new, "at {p}: completed");
            } else {
                assert_eq!(out.status.signal(), Some(9), "at {p}: {}", text(&out));
                let status = ns.unbloat(&["status"]);
                assert!(status.status.success(), "at {p}: {}", text(&status));
                let now = ns.snapshot();
                assert!(now == bare || now == new, "at {p}: neither bare nor the new setup:\n{now}\nbare:\n{bare}\nnew:\n{new}");
                ok(&ns, &change);
                assert_eq!(ns.snapshot(), new, "at {p}: the change again");
            }
            let _ = ns.unbloat(&["stop", "--all"]);
            assert_eq!(ns.snapshot(), bare, "at {p}: stopped");
        }
    }
}

real_kernel_test! {
    fn a_kill_during_a_fresh_start_leaves_nothing_or_the_whole_setup() needs ["cake", "ingress"] {
        a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(&SCENARIOS[0]);
    }
    fn a_kill_during_a_replace_leaves_the_old_or_the_new_setup_whole() needs ["cake", "fq_codel", "htb", "ingress"] {
        a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(&SCENARIOS[1]);
    }
    fn a_kill_during_an_in_place_change_leaves_the_old_or_the_new_setup_whole() needs ["cake", "ingress"] {
        a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(&SCENARIOS[2]);
    }
    fn a_kill_during_set_rate_leaves_the_old_or_the_new_rates() needs ["cake", "ingress"] {
        a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(&SCENARIOS[3]);
    }
    fn a_kill_during_stop_leaves_the_setup_or_nothing() needs ["cake", "fq_codel", "htb", "ingress"] {
        a_kill_at_any_step_leaves_the_old_or_the_new_setup_whole(&SCENARIOS[4]);
    }
}

real_kernel_test! {
    /// A run directory that cannot be written (read-only, or full): the journal cannot be
    /// written, so nothing is changed, and the error says so.
    fn a_run_directory_that_cannot_be_written_changes_nothing() needs ["cake", "ingress"] {
        let ns = Netns::new();
        let before = ns.snapshot();
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let dir = ns.run_dir.display().to_string();
        let args = ["start", "eth0", "--down", "50mbit", "--up", "10mbit"];

        common::must(&format!("mount -t tmpfs -o ro,size=1m tmpfs {dir}"));
        let out = ns.unbloat(&args);
        common::must(&format!("umount {dir}"));
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("Read-only file system"), "{}", text(&out));
        assert_eq!(ns.snapshot(), before, "read-only run directory");

        common::must(&format!("mount -t tmpfs -o size=64k tmpfs {dir}"));
        ok(&ns, &["status"]); // makes the directory and its lock while there is room
        let _ = common::sh(&format!("dd if=/dev/zero of={dir}/fill bs=4k 2>/dev/null"));
        let out = ns.unbloat(&args);
        let msg = text(&out);
        common::must(&format!("umount {dir}"));
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains("No space left") && msg.contains("nothing was changed"), "{msg}");
        assert_eq!(ns.snapshot(), before, "full run directory");
    }
}

real_kernel_test! {
    /// stop removes only what is still unbloat's: a root qdisc someone put in place of
    /// unbloat's stays, and stop says so; a record is data: one with a command in it is refused,
    /// and one naming another device as its IFB does not get that device deleted.
    fn stop_removes_only_what_is_still_unbloats_and_never_runs_a_record() needs ["cake", "htb", "ingress"] {
        let ns = Netns::new();
        let before = ns.snapshot();
        ok(&ns, &["start", "eth0", "--down", "50mbit", "--up", "10mbit"]);
        ns.must("tc qdisc replace dev eth0 root handle 1: htb default 1");
        let msg = ok(&ns, &["stop", "eth0"]);
        assert!(msg.contains("left alone") && msg.contains("root qdisc"), "{msg}");
        let after = ns.snapshot();
        assert!(after.contains("qdisc htb 1: root"), "{after}");
        assert!(!after.contains("ifb4eth0") && !after.contains("ingress ffff:"), "{after}");
        ns.must("tc qdisc del dev eth0 root");
        assert_eq!(ns.snapshot(), before);

        // A record with a command in it.
        ok(&ns, &["start", "eth0", "--down", "50mbit", "--up", "10mbit"]);
        let shaped = ns.snapshot();
        let record = ns.run_dir.join("shaped/eth0.json");
        let original = std::fs::read_to_string(&record).unwrap();
        let marker = ns.run_dir.join("ran-a-record");
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        v["teardown"] = serde_json::json!([{"program": "touch", "args": [marker.display().to_string()]}]);
        std::fs::write(&record, v.to_string()).unwrap();
        let out = ns.unbloat(&["stop", "eth0"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("eth0.json"), "{}", text(&out));
        assert!(!marker.exists(), "a command from the record ran");
        assert_eq!(ns.snapshot(), shaped);

        // A record whose IFB is another device (a VLAN): that device is not deleted.
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        v["plan"]["ingress"]["ifb"] = "eth0.2".into();
        std::fs::write(&record, v.to_string()).unwrap();
        let out = ns.unbloat(&["stop", "eth0"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(ns.snapshot().contains("link eth0.2"), "eth0.2 was deleted: {}", text(&out));
        // What the changed record no longer describes is left for a person.
        ns.must("tc qdisc del dev eth0 ingress");
        ns.must("ip link del ifb4eth0");
        assert_eq!(ns.snapshot(), before);
    }
}

real_kernel_test! {
    /// set-rate changes the rates in place: the same qdiscs (the kernel's handles stay), new
    /// rates read back, the record follows (the same start is then "nothing changed"); cake and
    /// HTB alike. What is not a rate change is refused.
    fn set_rate_changes_rates_in_place() needs ["cake", "fq_codel", "htb", "ingress"] {
        let ns = Netns::new();
        let before = ns.snapshot();
        let handle = |dev: &str| {
            let out = ns.sh(&format!("tc -j qdisc show dev {dev} root"));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            (v[0]["handle"].as_str().unwrap().to_string(), v[0]["options"]["bandwidth"].clone())
        };
        ok(&ns, &["start", "eth0", "--down", "50mbit", "--up", "10mbit"]);
        let (h_up, _) = handle("eth0");
        let (h_down, _) = handle("ifb4eth0");
        ok(&ns, &["set-rate", "eth0", "--down", "60mbit", "--up", "12mbit"]);
        let (h2_up, bw_up) = handle("eth0");
        let (h2_down, bw_down) = handle("ifb4eth0");
        assert_eq!((&h_up, &h_down), (&h2_up, &h2_down), "the qdiscs were re-created");
        assert_eq!(bw_up, 1_500_000, "12mbit is 1500000 bytes/s");
        assert_eq!(bw_down, 7_500_000);
        let status = ok(&ns, &["status", "eth0"]);
        assert!(status.contains("shaped by unbloat"), "{status}");
        // A start verifies what the kernel holds against the record's plan: "nothing changed"
        // means the record followed the change and the kernel agrees with it.
        assert!(ok(&ns, &["start", "eth0", "--down", "60mbit", "--up", "12mbit"]).contains("nothing changed"));

        // Crossing 4 Mbit/s changes cake's ingress mode too: still in place.
        ok(&ns, &["set-rate", "eth0", "--down", "3mbit"]);
        assert_eq!(handle("ifb4eth0").0, h2_down);
        // A direction that is not shaped is not a rate change.
        ok(&ns, &["start", "eth0", "--up", "10mbit"]);
        let out = ns.unbloat(&["set-rate", "eth0", "--down", "20mbit"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let out = ns.unbloat(&["set-rate", "eth0"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        ok(&ns, &["stop", "eth0"]);
        let out = ns.unbloat(&["set-rate", "eth0", "--up", "20mbit"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("not shaped"), "{}", text(&out));

        // HTB + fq_codel: classes and leaves change in place.
        ok(&ns, &["start", "eth0", "--down", "50mbit", "--up", "10mbit", "--qdisc", "fq_codel", "--tiers", "3"]);
        let shaped = ns.snapshot();
        ok(&ns, &["set-rate", "eth0", "--down", "40mbit", "--up", "9mbit"]);
        let changed = ns.snapshot();
        assert_ne!(changed, shaped);
        assert!(changed.contains("rate 9Mbit"), "{changed}");
        let again = ["start", "eth0", "--down", "40mbit", "--up", "9mbit", "--qdisc", "fq_codel", "--tiers", "3"];
        assert!(ok(&ns, &again).contains("nothing changed"));
        ok(&ns, &["stop", "eth0"]);
        assert_eq!(ns.snapshot(), before);
    }
}

real_kernel_test! {
    /// `start --confirm`: without `unbloat confirm` the previous setup is back by itself after
    /// the deadline (the watchdog), with it the change stays; and with the watchdog killed too,
    /// the next unbloat command after the deadline puts the previous setup back.
    fn a_change_on_trial_undoes_itself_unless_confirmed() needs ["cake", "fq_codel", "htb", "ingress"] {
        let ns = Netns::new();
        let before = ns.snapshot();
        ok(&ns, &["start", "eth0", "--down", "20mbit", "--up", "5mbit"]);
        let old = ns.snapshot();
        let trial = |secs: &'static str| {
            ["start", "eth0", "--down", "50mbit", "--up", "10mbit", "--qdisc", "fq_codel", "--confirm", secs]
        };
        let wait = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
        // In User-Mode Linux on a loaded machine a snapshot can take seconds; one taken while a
        // watchdog is due may straddle the undo (CI once saw eth0 changed and its IFB put back).
        // So the setup under trial is recorded only while no deadline can fall, after `confirm`,
        // and each deadline gets seconds of margin.

        // Confirmed: it stays past the deadline; meanwhile other changes wait.
        let started = std::time::Instant::now();
        ok(&ns, &trial("8"));
        let out = ns.unbloat(&["start", "eth0", "--up", "1mbit"]);
        assert_eq!(out.status.code(), Some(1), "another change waits: {}", text(&out));
        assert!(text(&out).contains("waits for confirmation"), "{}", text(&out));
        assert!(ok(&ns, &["confirm"]).contains("confirmed"));
        assert!(started.elapsed().as_secs() < 8, "too slow to confirm within the trial: {:?}", started.elapsed());
        let new = ns.snapshot();
        assert_ne!(new, old);
        wait(9000u64.saturating_sub(started.elapsed().as_millis() as u64));
        assert_eq!(ns.snapshot(), new, "a confirmed change was undone");
        assert!(ok(&ns, &["confirm"]).contains("no change is waiting"));

        // Not confirmed: the watchdog puts the old setup back after the deadline by itself.
        ok(&ns, &["start", "eth0", "--down", "20mbit", "--up", "5mbit"]);
        assert_eq!(ns.snapshot(), old);
        let msg = ok(&ns, &trial("4"));
        assert!(msg.contains("unbloat confirm"), "says how to confirm: {msg}");
        assert_ne!(ns.snapshot(), old, "the change on trial was not made");
        wait(6000);
        assert_eq!(ns.snapshot(), old, "the watchdog did not put the old setup back");
        assert!(ok(&ns, &["start", "eth0", "--down", "20mbit", "--up", "5mbit"]).contains("nothing changed"));

        // The watchdog killed too: the next command after the deadline undoes it.
        let started = std::time::Instant::now();
        let msg = ok(&ns, &trial("4"));
        let pid: u32 = msg
            .split("watchdog pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no watchdog pid in: {msg}"));
        common::must(&format!("kill -9 {pid}"));
        assert!(started.elapsed().as_secs() < 4, "the watchdog was killed too late: {:?}", started.elapsed());
        wait(6000);
        assert_eq!(ns.snapshot(), new, "nothing runs the deadline without the watchdog");
        let status = ok(&ns, &["status"]);
        assert!(status.contains("not confirmed in time"), "{status}");
        assert_eq!(ns.snapshot(), old, "the next command did not undo the change");
        ok(&ns, &["stop", "eth0"]);
        assert_eq!(ns.snapshot(), before);
    }
}

real_kernel_test! {
    /// More hostile input, each refused with its exit status and the interfaces as they were:
    /// values the kernel would refuse or misread, config files that are too big or empty,
    /// intervals that would spin or never end, and commands on what is not there.
    fn hostile_input_is_refused_and_changes_nothing() needs ["cake", "fq_codel", "htb", "ingress"] {
        let ns = Netns::new();
        let empty = write_config(&ns, "empty.toml", "# nothing here\n");
        let huge = ns.run_dir.join("huge.toml");
        std::fs::write(&huge, "#".repeat(2 << 20)).unwrap();
        let huge = huge.display().to_string();
        let long_key = write_config(&ns, "long-key.toml", &format!("[interface.eth0]\n{} = 1\n", "k".repeat(100_000)));
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        let cases: Vec<(&str, Vec<String>, i32, Vec<&str>)> = vec![
            ("rtt far too long", v(&["start", "eth0", "--up", "10mbit", "--rtt", "5000s"]), 2, vec!["rtt", "5000s"]),
            ("rtt zero", v(&["start", "eth0", "--up", "10mbit", "--rtt", "0ms"]), 2, vec!["rtt"]),
            ("fq_codel target far too long", v(&["start", "eth0", "--up", "10mbit", "--qdisc", "fq_codel", "--target", "5000s"]), 2, vec!["5000s"]),
            ("an empty config", v(&["start", "--config", &empty]), 2, vec!["nothing to shape"]),
            ("a config over 1 MiB", v(&["start", "--config", &huge]), 2, vec!["huge.toml"]),
            ("/dev/zero as a config", v(&["start", "--config", "/dev/zero"]), 2, vec!["/dev/zero"]),
            ("a 100 kB key", v(&["start", "--config", &long_key]), 2, vec!["kkkk"]),
            ("watch forever", v(&["status", "eth0", "--watch", "inf"]), 2, vec!["--watch"]),
            ("watch zero", v(&["status", "eth0", "--watch", "0"]), 2, vec!["--watch"]),
            ("watch nan", v(&["status", "eth0", "--watch", "nan"]), 2, vec!["--watch"]),
            ("watch a busy loop", v(&["status", "eth0", "--watch", "0.001"]), 2, vec!["--watch"]),
            ("set-rate without rates", v(&["set-rate", "eth0"]), 2, vec!["--down"]),
            ("set-rate of what is not shaped", v(&["set-rate", "eth0", "--up", "10mbit"]), 1, vec!["not shaped"]),
            ("set-rate on no interface", v(&["set-rate", "nosuch0", "--up", "10mbit"]), 1, vec!["nosuch0"]),
            ("confirm too short", v(&["start", "eth0", "--up", "10mbit", "--confirm", "1s"]), 2, vec!["--confirm"]),
            ("confirm with a bad unit", v(&["start", "eth0", "--up", "10mbit", "--confirm", "5parsecs"]), 2, vec!["--confirm"]),
            ("status of no interface", v(&["status", "nosuch0"]), 1, vec!["no network interface nosuch0"]),
            ("stop of no interface", v(&["stop", "nosuch0"]), 1, vec!["not shaped"]),
            ("an interface name with a slash", v(&["start", "eth0/x", "--up", "10mbit"]), 2, vec!["eth0/x"]),
            ("recover with nothing to do", v(&["recover"]), 0, vec!["nothing to recover"]),
            ("confirm with nothing on trial", v(&["confirm"]), 0, vec!["no change is waiting"]),
        ];
        let before = ns.snapshot();
        for (what, args, code, words) in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ns.unbloat(&args);
            let msg = text(&out);
            assert_eq!(out.status.code(), Some(code), "{what}: exit status, output:\n{msg}");
            for w in words {
                assert!(msg.contains(w), "{what}: the message should mention {w:?}:\n{msg}");
            }
            assert!(msg.len() < 4000, "{what}: a message of {} bytes echoes the input", msg.len());
            assert!(!msg.contains("panicked"), "{what}: {msg}");
            assert_eq!(ns.snapshot(), before, "{what}: the interface changed");
        }
        // A name starting with a dot is shaped, listed and stopped like any other.
        ns.must("ip link add .wan0 type veth peer name .isp0");
        ns.must("ip link set .wan0 up");
        ok(&ns, &["start", ".wan0", "--up", "10mbit"]);
        assert!(ok(&ns, &["status"]).contains(".wan0: shaped by unbloat"));
        assert!(ok(&ns, &["stop", "--all"]).contains(".wan0 is no longer shaped"));
    }
}
