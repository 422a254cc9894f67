//! The name of the IFB device that carries a WAN device's ingress traffic to its shaper.
//!
//! Heads up! IFB is `drivers/net/ifb.c` (no man page of its own; `ip-link(8)` `type ifb`).
//! Interface names are at most 15 bytes (`IFNAMSIZ` - 1).
//!
//! The name is `ifb4<dev>`, as sqm-scripts names it, whenever that fits: `ifb4eth0`,
//! `ifb4eth0.2`, `ifb4pppoe-wan`. A longer device name (`enx00e04c680123`, 15 bytes) gets
//! `ifb4` + its first 4 bytes + `-` + 6 hex digits of a hash of the whole name:
//! `ifb4enx0-3f9a1c`. The hash is 32-bit FNV-1a (a fixed, documented function, so the name is the
//! same on every run and every version), truncated to 24 bits: two devices sharing a prefix get
//! different IFBs unless their hashes collide (1 in 16 million). The `-` keeps shortened names
//! from being the `ifb4<dev>` of a short device in every realistic case.

use unbloat_units::IfName;

/// `ifb4` + the device name, or the shortened form when that would exceed 15 bytes.
pub fn ifb_name(dev: &IfName) -> IfName {
    let d = dev.as_str();
    let full = format!("ifb4{d}");
    let name = if full.len() <= 15 {
        full
    } else {
        // IfName is ASCII (validated), so byte slicing is on character boundaries.
        format!("ifb4{}-{:06x}", &d[..4], fnv1a(d.as_bytes()) & 0xff_ffff)
    };
    // Both forms are at most 15 ASCII bytes of characters the kernel allows (those of `dev` plus
    // `ifb4`, `-` and hex digits), so this parse cannot fail; fall back to the input name rather
    // than panic if that reasoning is ever broken.
    name.parse().unwrap_or_else(|_| dev.clone())
}

/// 32-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn n(s: &str) -> IfName {
        s.parse().unwrap()
    }

    #[test]
    fn short_names_get_ifb4_prefix() {
        assert_eq!(ifb_name(&n("eth0")).as_str(), "ifb4eth0");
        assert_eq!(ifb_name(&n("eth0.2")).as_str(), "ifb4eth0.2");
        assert_eq!(ifb_name(&n("pppoe-wan11")).as_str(), "ifb4pppoe-wan11");
    }

    #[test]
    fn long_names_are_shortened_stably() {
        let a = ifb_name(&n("enx00e04c680123"));
        assert_eq!(a.as_str().len(), 15);
        assert!(a.as_str().starts_with("ifb4enx0-"), "{a}");
        assert_eq!(a, ifb_name(&n("enx00e04c680123")));
        assert_ne!(a, ifb_name(&n("enx00e04c680124")));
        // FNV-1a is fixed: pin one value so a change of function is noticed.
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }

    proptest! {
        #[test]
        fn always_valid_and_distinct_for_distinct_long_names(
            prefix in "[a-z]{4}", a in "[a-z0-9]{8,11}", b in "[a-z0-9]{8,11}"
        ) {
            let da = n(&format!("{prefix}{a}"));
            let db = n(&format!("{prefix}{b}"));
            let (ia, ib) = (ifb_name(&da), ifb_name(&db));
            prop_assert!(ia.as_str().len() <= 15);
            prop_assert!(ia.as_str().starts_with("ifb4"));
            prop_assert_ne!(&ia, &da);
            if da != db {
                prop_assert_ne!(ia, ib);
            }
        }
    }
}
