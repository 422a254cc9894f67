//! The probe in a kernel that has every qdisc (User-Mode Linux where the host lacks them): its
//! unit tests beside the code run on the host and with recorded output; this one needs the real
//! kernel, and the test bench's runner to reach it. Needs root.

use unbloat_system::probe::probe;
use unbloat_system::runner::{Cmd, Runner, SystemRunner};

unbloat_testbed::real_kernel_test! {
    /// In a kernel with everything (UML here), everything is found and nothing is missing.
    fn in_a_full_kernel_nothing_is_missing() needs ["cake", "fq_codel", "htb", "netem"] {
        let caps = probe(&SystemRunner::plain(), &["cake", "fq_codel", "htb", "netem", "tbf", "sfq"]).unwrap();
        assert!(caps.qdiscs.values().all(|&v| v), "{caps:?}");
        assert!(caps.ifb && caps.u32 && caps.mirred, "{caps:?}");
        assert_eq!(caps.missing(&["cake", "fq_codel", "htb", "ifb", "mirred", "u32"]), []);
        let left = SystemRunner::plain().run(&Cmd::ip(["netns", "list"])).unwrap().stdout;
        assert!(!left.contains("unbloat-probe-"), "{left}");
    }
}
