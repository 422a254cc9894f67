//! The daemon beside a process that moves an interface's rates for a while (`unbloat tune`, which
//! holds the interface's controller lock for its run, or `unbloat autorate` by hand), in a real
//! kernel: its periodic check would put the configured shaping back under the tune's steps every
//! minute. While the lock is held by another process the daemon leaves the interface alone and
//! `unbloat status` says to whom; once it is released, the next check shapes it again.

mod common;

use common::daemon::Daemon;
use common::{wait_until, Netns};
use std::time::Duration;
use unbloat_system::lock::ControllerLock;
use unbloat_testbed::real_kernel_test;

const CONFIG: &str = "[interface.wan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n";

real_kernel_test! {
    fn the_daemon_leaves_an_interface_to_the_process_that_holds_its_controller_lock() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let config = ns.run_dir.join("unbloat.toml");
        std::fs::write(&config, CONFIG).unwrap();
        let _daemon = Daemon::start(&ns, &[config.to_str().unwrap(), "--check-every", "10"], &[]);
        let cake = || ns.tc("qdisc show dev wan0").contains("bandwidth 5Mbit");
        assert!(wait_until(Duration::from_secs(20), cake).is_some(), "the daemon did not shape wan0:\n{}", ns.snapshot());

        // As `unbloat tune wan0` holds it for its run; its first step takes the shaping off.
        let tune = ControllerLock::acquire(&ns.run_dir, "wan0", "unbloat tune").expect("the lock is free");
        ns.must("tc qdisc del dev wan0 root");
        // Past one periodic check (10 s) and a little: not put back under the tune.
        std::thread::sleep(Duration::from_secs(13));
        assert!(!cake(), "the daemon put its shaping back under a tune:\n{}", ns.tc("qdisc show dev wan0"));
        let status = common::text(&ns.unbloat(&["status"]));
        let holder = format!("left to unbloat tune, pid {}", std::process::id());
        assert!(status.contains(&holder), "status does not say who has wan0: {status}");

        // The tune is over: the next check shapes wan0 as the file says.
        drop(tune);
        let back = wait_until(Duration::from_secs(20), cake);
        assert!(back.is_some(), "the daemon did not shape wan0 again once the lock was free:\n{}", ns.snapshot());
        let status = common::text(&ns.unbloat(&["status"]));
        assert!(!status.contains("left to"), "{status}");
    }
}

real_kernel_test! {
    /// A tune is refused, before any load and changing nothing, while another process moves the
    /// interface's rates (an autorate controller): each would spoil the other's work.
    #[cfg(feature = "tune")]
    fn a_tune_beside_an_autorate_controller_is_refused_and_changes_nothing() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");
        let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit"]);
        assert!(out.status.success(), "{}", common::text(&out));
        let before = ns.snapshot();
        let controller = ControllerLock::acquire(&ns.run_dir, "wan0", "unbloat autorate").expect("the lock is free");
        let out = ns.unbloat(&["tune", "wan0", "--server", "192.0.2.1", "--out", ns.run_dir.join("tune").to_str().unwrap()]);
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.contains("moved by another autorate controller (unbloat autorate, pid") && text.contains("nothing was measured or changed"), "{text}");
        assert_eq!(ns.snapshot(), before, "a refused tune changed the kernel");
        drop(controller);
    }
}
