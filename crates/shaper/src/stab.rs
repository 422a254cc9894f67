//! The size table: link-layer compensation for qdiscs other than cake (here HTB).
//!
//! Heads up! Man page `tc-stab(8)`; kernel `net/sched/sch_api.c` (`qdisc_get_stab`,
//! `__qdisc_calculate_pkt_len`); tc's side in iproute2 `tc/tc_stab.c` and `tc/tc_core.c`
//! (`tc_calc_size_table`). No RFC: the ATM cell arithmetic is ITU-T I.363.5 / RFC 2684 framing.
//!
//! cake and stab count from different places, and the conversion is where people go wrong
//! (seed 001: "This seems confusing, because it is"):
//! - cake (without `raw`) takes the *IP packet* and adds its overhead: the 38 bytes of
//!   `ethernet` are preamble + SFD + inter-frame gap (20), MAC header (14) and FCS (4).
//! - stab takes the length *Linux counts*, which on an Ethernet-type device (and on a VLAN
//!   device like eth0.2) already includes the 14-byte MAC header, and adds its overhead to that.
//!   So the stab overhead is cake's minus the 14 bytes Linux already counted (24 for `ethernet`,
//!   26 for `pppoe-llcsnap`). On a device without a link-layer header (ppp0, wg0, tun) Linux
//!   counts 0 bytes of header and nothing is subtracted: the planner takes that header length from
//!   [`Spec::mac_header`](crate::spec::Spec), which the system side may set from the device type.
//! - With cake's `raw`, its overhead is already relative to Linux's length: used as is.
//! - mpu compares with the same quantity in both (length + overhead), so it carries over as is.
//! - stab knows `linklayer ethernet` (no cells) and `atm` (53-byte cells carrying 48), but not PTM.
//!   PTM's 64b/65b costs one byte in 65, so unbloat shapes PTM links at 64/65 of the rate
//!   ([`PTM_RATE_FACTOR`]), which cake's man page itself calls the more efficient equivalent.
//!   (Exact for full frames; for tiny packets the per-packet rounding of cake's `ptm` is lost,
//!   at most one byte per packet.)
//!
//! `mtu 2047 tsize 512` as sqm-scripts: 512 slots of 4 bytes cover every frame up to 2048 bytes,
//! finer than the 16 bytes ATM needs (tc-stab(8)); bigger GSO packets are counted in whole tables.
//!
//! Unless no table is needed: with `linklayer ethernet` and `mpu 0` a packet's size is its length
//! plus the overhead, which the kernel adds without a table, so tc sends none and zeroes `mtu` and
//! `tsize` (iproute2 tc/tc_core.c `tc_calc_size_table`: "don't need data table in this case (only
//! overhead set)"). The kernel then holds and reports a stab of only `linklayer ethernet` and the
//! overhead (`tc -j -d qdisc show`: `"stab":{"linklayer":"ethernet","overhead":24}`, and just
//! `{"linklayer":"ethernet"}` when the overhead is 0 too; tc prints no key whose value is 0).
//! [`for_link`] plans exactly that (`mtu` and `tsize` 0), so that the plan is what the kernel
//! reports: `--mpu 0`, and `--link raw` without an mpu, under HTB.

use crate::linklayer::{Framing, LinkLayer};
use crate::model::{Stab, StabLinkLayer};

pub const STAB_MTU: u32 = 2047;
pub const STAB_TSIZE: u32 = 512;
/// (numerator, denominator) applied to HTB rates on PTM links: 64b/65b.
pub const PTM_RATE_FACTOR: (u64, u64) = (64, 65);

/// The size table equivalent to a cake link layer, on a device whose Linux length includes
/// `mac_header` bytes of link-layer header. Returns the table and whether the rate must be derated
/// for PTM.
pub fn for_link(link: &LinkLayer, mac_header: u32) -> (Stab, bool) {
    let overhead = if link.raw {
        link.overhead
    } else {
        link.overhead - mac_header as i32
    };
    let linklayer = match link.framing {
        Framing::Atm => StabLinkLayer::Atm,
        Framing::None | Framing::Ptm => StabLinkLayer::Ethernet,
    };
    // tc_calc_size_table: no table for ethernet without an mpu; tc zeroes mtu and tsize.
    let table = linklayer != StabLinkLayer::Ethernet || link.mpu != 0;
    let stab = Stab {
        mtu: if table { STAB_MTU } else { 0 },
        tsize: if table { STAB_TSIZE } else { 0 },
        mpu: link.mpu,
        overhead,
        linklayer,
    };
    (stab, link.framing == Framing::Ptm)
}

impl Stab {
    /// `stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet`; without a table
    /// (`tsize` 0) `stab mpu 0 overhead 24 linklayer ethernet`, which tc sends the same way.
    pub fn words(&self) -> Vec<String> {
        let mut w: Vec<String> = vec!["stab".into()];
        if self.tsize != 0 {
            w.extend([
                "mtu".into(),
                self.mtu.to_string(),
                "tsize".into(),
                self.tsize.to_string(),
            ]);
        }
        w.extend([
            "mpu".into(),
            self.mpu.to_string(),
            "overhead".into(),
            self.overhead.to_string(),
            "linklayer".into(),
            match self.linklayer {
                StabLinkLayer::Ethernet => "ethernet",
                StabLinkLayer::Atm => "atm",
            }
            .into(),
        ]);
        w
    }

    /// The length HTB will charge for a packet Linux counts as `len` bytes (tc_core.c's table
    /// arithmetic without the slot rounding): overhead, then mpu, then ATM cells.
    pub fn adjusted(&self, len: u32) -> u32 {
        let l = (len as i64 + self.overhead as i64)
            .max(self.mpu as i64)
            .max(0) as u32;
        match self.linklayer {
            StabLinkLayer::Ethernet => l,
            StabLinkLayer::Atm => l.div_ceil(48) * 53,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linklayer::LinkPreset;

    #[test]
    fn stab_charges_what_cake_charges_on_an_ethernet_device() {
        // For every preset, a 1500-byte IP packet (1514 as Linux counts it on Ethernet) costs the
        // same under the stab as under cake, PTM aside (derated instead).
        for p in LinkPreset::ALL {
            let link = p.link_layer();
            let (stab, ptm) = for_link(&link, 14);
            if ptm {
                continue;
            }
            for ip in [40u32, 100, 576, 1500] {
                assert_eq!(stab.adjusted(ip + 14), link.wire_bytes(ip, 14), "{p} {ip}");
            }
        }
    }

    #[test]
    fn ethernet_overhead_subtracts_the_mac_header_linux_counts() {
        let (s, ptm) = for_link(&LinkPreset::Ethernet.link_layer(), 14);
        assert_eq!(
            s.words().join(" "),
            "stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet"
        );
        assert!(!ptm);
        let (s, _) = for_link(&LinkPreset::PppoeLlcsnap.link_layer(), 14);
        assert_eq!((s.overhead, s.linklayer), (26, StabLinkLayer::Atm));
        let (s, _) = for_link(&LinkPreset::PppoeLlcsnap.link_layer(), 0);
        assert_eq!(s.overhead, 40, "no header on a PPP device");
        let (s, ptm) = for_link(&LinkPreset::Vdsl2.link_layer(), 14);
        assert!(ptm);
        assert_eq!((s.overhead, s.mpu), (12, 64));
    }

    #[test]
    fn no_table_for_ethernet_without_mpu_as_tc_sends_it() {
        // --mpu 0 under HTB (the ethernet preset's overhead stays): tc keeps no table.
        let link = LinkLayer::resolve(Some(LinkPreset::Ethernet), None, Some(0), None, None)
            .expect("valid");
        let (s, _) = for_link(&link, 14);
        assert_eq!((s.mtu, s.tsize, s.mpu, s.overhead), (0, 0, 0, 24));
        assert_eq!(
            s.words().join(" "),
            "stab mpu 0 overhead 24 linklayer ethernet"
        );
        assert_eq!(s.adjusted(1514), 1538);
        // --link raw: overhead 0 and no mpu, a stab of nothing but `linklayer ethernet`.
        let (s, _) = for_link(&LinkPreset::Raw.link_layer(), 14);
        assert_eq!((s.mtu, s.tsize, s.mpu, s.overhead), (0, 0, 0, 0));
        // ATM always needs its table, mpu or not.
        let (s, _) = for_link(&LinkPreset::PppoaVcmux.link_layer(), 14);
        assert_eq!((s.mtu, s.tsize, s.mpu), (STAB_MTU, STAB_TSIZE, 0));
    }
}
