//! Flow offloading (issue 52, crates/system/src/offload.rs): a WAN device the hardware forwards
//! is refused before anything changes; software offloading shapes, and warns when classification
//! would lose its upload marks. Neither this machine's kernel nor the lab's has flowtables
//! (NF_FLOW_TABLE), so `nft list flowtables` answers as it does on an OpenWrt router whose fw4
//! offloads (the test knob UNBLOAT_NFT); every other nft command, tc and the kernel are real.

mod common;

use common::{text, Netns};
use unbloat_testbed::real_kernel_test;

/// An `nft` that lists fw4's flowtable over `lan0` and `wan0` with `flag` in it, and is the real
/// one for everything else.
fn nft_listing(ns: &Netns, name: &str, flag: &str) -> String {
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    let path = ns.run_dir.join(name);
    let listed = format!(
        "table inet fw4 {{\n\tflowtable ft {{\n\t\thook ingress priority filter\n\t\tdevices = {{ lan0, wan0 }}\n\t\t{flag}\n\t}}\n}}\n"
    );
    std::fs::write(
        &path,
        format!("#!/bin/sh\nif [ \"$*\" = \"list flowtables\" ]; then printf '%s' '{listed}'; exit 0; fi\nexec nft \"$@\"\n"),
    )
    .unwrap();
    common::must(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

real_kernel_test! {
    fn hardware_offload_is_refused_before_anything_changes_and_software_offload_warns() needs ["cake", "ingress", "mirred"] {
        let ns = Netns::new();
        let _far = ns.wan_to_far_end();
        let before = ns.snapshot();
        let start = ["start", "wan0", "--down", "20mbit", "--up", "5mbit"];

        let hardware = nft_listing(&ns, "nft-hardware", "flags offload");
        let out = ns.unbloat_env(&start, &[("UNBLOAT_NFT", &hardware)]);
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains("wan0 is in the flowtable ft of inet fw4 with hardware offloading"), "{msg}");
        assert!(msg.contains("flow_offloading_hw=0"), "{msg}");
        assert_eq!(ns.snapshot(), before, "a refused start changed the kernel");

        // Software offloading: shaped; a warning only where classification marks the upload.
        let software = nft_listing(&ns, "nft-software", "counter");
        let out = ns.unbloat_env(&start, &[("UNBLOAT_NFT", &software)]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(!text(&out).contains("software offloading"), "{}", text(&out));
        let classified = [&start[..], &["--classify", "voice udp port 3074"]].concat();
        let out = ns.unbloat_env(&classified, &[("UNBLOAT_NFT", &software)]);
        let msg = text(&out);
        assert!(out.status.success(), "{msg}");
        assert!(msg.contains("warning: wan0 is in the flowtable ft of inet fw4 (software offloading)"), "{msg}");
        assert!(ns.unbloat(&["stop", "wan0"]).status.success());
        assert_eq!(ns.snapshot(), before, "stop left something");
    }
}
