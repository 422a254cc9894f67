//! The daemon on `/etc/config/unbloat` as OpenWrt edits it, in a real kernel: the file is written
//! by OpenWrt's own `uci` (built from its source by scripts/openwrt/userland, as make test does),
//! and each change is committed and reloaded as the init script's `reload_service` does after
//! `reload_config` (`unbloat reload`; procd itself is not here: docs/openwrt.md says why).
//!
//! - `uci set` and `uci commit` of a new rate, then the reload: the kernel has it, in place.
//! - A bad value committed through uci: the reload is refused, naming the section and option,
//!   with exit 2, and the kernel keeps what it had; `unbloat config check` says the same.
//! - The daemon with only the capabilities procd's jail gives it (the package's
//!   /etc/capabilities/unbloat.json, no_new_privs, and only the environment ujail passes: the init
//!   script's PATH; ujail itself is not here either, so setpriv applies them): it shapes, takes a
//!   reload, and shapes a WAN device that is re-created.

mod common;

use common::caps;
use common::daemon::Daemon;
use common::uci::must as uci;
use common::{wait_until, Netns};
use std::path::Path;
use std::time::{Duration, Instant};
use unbloat_testbed::real_kernel_test;

real_kernel_test! {
    fn a_rate_committed_through_uci_reaches_the_kernel_and_a_bad_one_changes_nothing() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");
        let etc = wan_config(&ns);
        let file = etc.join("unbloat");
        let path = file.to_str().unwrap();
        let _daemon = Daemon::start(&ns, &[path], &[]);
        let shaped = wait_until(Duration::from_secs(20), || {
            ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 20Mbit")
                && ns.tc("qdisc show dev wan0").contains("bandwidth 5Mbit")
        });
        assert!(shaped.is_some(), "the daemon did not shape wan0 from uci's file:\n{}", ns.snapshot());
        let handle = || ns.tc("qdisc show dev ifb4wan0").split_whitespace().nth(2).unwrap_or_default().to_string();
        let before = handle();

        // A new rate, committed, then the init script's reload: in the kernel, in place.
        uci(&etc, &["set", "unbloat.wan.down=30mbit"]);
        uci(&etc, &["commit", "unbloat"]);
        let t = Instant::now();
        let out = ns.unbloat(&["reload"]);
        assert!(out.status.success(), "{}", common::text(&out));
        let applied = wait_until(Duration::from_secs(10), || ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 30Mbit"));
        assert!(applied.is_some(), "the reload did not apply uci's rate:\n{}", ns.snapshot());
        println!("uci commit to the new rate in the kernel: {:?} (reload and read-back)", t.elapsed());
        assert_eq!(handle(), before, "the reload replaced the cake instead of changing it");

        // A rate without its unit, committed through uci: refused where it is, nothing changes.
        let kernel_before = ns.snapshot();
        uci(&etc, &["set", "unbloat.wan.down=20000"]);
        uci(&etc, &["commit", "unbloat"]);
        let out = ns.unbloat(&["reload"]);
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("interface 'wan', option down '20000'") && text.contains("running setup stays"), "{text}");
        assert_eq!(ns.snapshot(), kernel_before, "a refused reload changed the kernel");
        let check = ns.unbloat(&["config", "check", path]);
        let said = common::text(&check);
        assert_eq!(check.status.code(), Some(2), "{said}");
        assert!(said.contains("interface 'wan', option down '20000'") && said.contains("20000kbit"), "{said}");
    }
}

/// `/etc/config/unbloat` (in the namespace's run directory) as uci writes it: wan0 at 20/5 Mbit/s.
fn wan_config(ns: &Netns) -> std::path::PathBuf {
    let etc = ns.run_dir.join("etc-config");
    std::fs::create_dir_all(etc.join(".uci")).unwrap();
    std::fs::write(etc.join("unbloat"), "").unwrap();
    for set in [
        "unbloat.wan=interface",
        "unbloat.wan.interface=wan0",
        "unbloat.wan.enabled=1",
        "unbloat.wan.down=20mbit",
        "unbloat.wan.up=5mbit",
        "unbloat.wan.link=ethernet",
    ] {
        uci(&etc, &["set", set]);
    }
    uci(&etc, &["commit", "unbloat"]);
    etc
}

/// The package's `/etc/capabilities/unbloat.json`: its bounding set as setpriv takes it, and the
/// mask. procd's jail sets effective and permitted as the file says; a root process that execs
/// gets its bounding set as both, so setpriv's bounding set gives the same process only when
/// the file's three sets are one (checked here).
fn jail_capabilities() -> (String, u64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging/openwrt/unbloat.capabilities.json");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let set = |name: &str| -> Vec<String> {
        let list = file[name]
            .as_array()
            .unwrap_or_else(|| panic!("no {name} list"));
        list.iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    let bounding = set("bounding");
    assert_eq!(
        (set("effective"), set("permitted")),
        (bounding.clone(), bounding.clone())
    );
    assert_eq!((set("inheritable"), set("ambient")), (vec![], vec![]));
    caps::bounding(bounding.iter().map(String::as_str))
}

/// The `PATH=...` the init script has procd pass into the jail (ujail passes nothing else).
fn init_script_path() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/openwrt/unbloat.init");
    let text = std::fs::read_to_string(path).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("procd_set_param env "));
    line.expect("the init script passes a PATH into the jail")
        .to_string()
}

real_kernel_test! {
    /// Issue 52: the init script has procd start the daemon through ujail with the capabilities
    /// of /etc/capabilities/unbloat.json and no_new_privs; with only those it shapes from uci's
    /// file, applies a reload, and shapes the WAN again after a PPPoE-like re-creation.
    fn the_daemon_shapes_with_only_the_capabilities_of_procds_jail() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");
        let etc = wan_config(&ns);
        let file = etc.join("unbloat");
        let (bounding, mask) = jail_capabilities();
        // ujail's environment: `container=ujail` and the variables procd passes (the init
        // script's PATH; the test's run directory).
        let run_dir = format!("UNBLOAT_RUN_DIR={}", ns.run_dir.display());
        let path = init_script_path();
        let argv = ["env", "-i", "container=ujail", &run_dir, &path,
            "setpriv", "--bounding-set", &bounding, "--inh-caps=-all", "--ambient-caps=-all",
            "--no-new-privs", "--", common::UNBLOAT, "daemon", "--config", file.to_str().unwrap()];
        let daemon = Daemon::start_argv(&ns, &argv, &[]);
        let shaped = || ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 20Mbit")
            && ns.tc("qdisc show dev wan0").contains("bandwidth 5Mbit");
        assert!(wait_until(Duration::from_secs(20), shaped).is_some(),
            "the daemon did not shape wan0 with the jail's capabilities:\n{}", ns.snapshot());
        let pid = daemon.child.id();
        assert_eq!((caps::of_process(pid, "CapBnd:"), caps::of_process(pid, "CapEff:")), (Some(mask), Some(mask)));
        assert_eq!(caps::of_process(pid, "NoNewPrivs:"), Some(1));

        uci(&etc, &["set", "unbloat.wan.down=30mbit"]);
        uci(&etc, &["commit", "unbloat"]);
        let out = ns.unbloat(&["reload"]);
        assert!(out.status.success(), "{}", common::text(&out));
        let reloaded = wait_until(Duration::from_secs(10), || ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 30Mbit"));
        assert!(reloaded.is_some(), "the reload did not apply under the jail:\n{}", ns.snapshot());

        // A re-dial: the device goes and comes back; the jailed daemon makes its IFB again.
        ns.must("ip link del wan0");
        ns.must("ip link add wan0 type veth peer name peer0");
        let again = wait_until(Duration::from_secs(20), || ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 30Mbit")
            && ns.tc("qdisc show dev wan0").contains("bandwidth 5Mbit"));
        assert!(again.is_some(), "the re-created wan0 was not shaped under the jail:\n{}", ns.snapshot());
    }
}
