//! The daemon on `/etc/config/unbloat` as OpenWrt edits it, in a real kernel: the file is written
//! by OpenWrt's own `uci` (built from its source by scripts/openwrt/userland, as make test does),
//! and each change is committed and reloaded as the init script's `reload_service` does after
//! `reload_config` (`unbloat reload`; procd itself is not here: docs/openwrt.md says why).
//!
//! - `uci set` and `uci commit` of a new rate, then the reload: the kernel has it, in place.
//! - A bad value committed through uci: the reload is refused, naming the section and option,
//!   with exit 2, and the kernel keeps what it had; `unbloat config check` says the same.

mod common;

use common::daemon::Daemon;
use common::uci::must as uci;
use common::{wait_until, Netns};
use std::time::{Duration, Instant};
use unbloat_testbed::real_kernel_test;

real_kernel_test! {
    fn a_rate_committed_through_uci_reaches_the_kernel_and_a_bad_one_changes_nothing() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");
        let etc = ns.run_dir.join("etc-config");
        std::fs::create_dir_all(etc.join(".uci")).unwrap();
        let file = etc.join("unbloat");
        std::fs::write(&file, "").unwrap();
        for set in ["unbloat.wan=interface", "unbloat.wan.interface=wan0", "unbloat.wan.enabled=1",
            "unbloat.wan.down=20mbit", "unbloat.wan.up=5mbit", "unbloat.wan.link=ethernet"] {
            uci(&etc, &["set", set]);
        }
        uci(&etc, &["commit", "unbloat"]);
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
