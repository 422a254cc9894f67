//! Flow offloading, found before anything changes (issue 52).
//!
//! Heads up! `nft(8)` (FLOWTABLES); kernel `net/netfilter/nf_flow_table_ip.c`
//! (`nf_flow_offload_ip_hook`), `net/core/dev.c` (`__netif_receive_skb_core`: tc's ingress
//! runs before netfilter's); OpenWrt's fw4, whose `flow_offloading` and `flow_offloading_hw` (in
//! `/etc/config/firewall`) make the flowtable `ft` of the table `inet fw4`.
//!
//! A flowtable lets an established connection's packets skip the forwarding path:
//! - in software (no `flags offload`) the fast path starts at netfilter's ingress hook, after
//!   tc's (the download's redirect to the IFB comes first), and sends through the output
//!   device's queue: both shapers still see every packet. What it skips is nftables' forward
//!   and postrouting chains, and classification's `dscp set` rules, which mark each upload
//!   packet of a classified connection, are in postrouting: an offloaded connection's upload
//!   leaves unmarked, in best effort. So shaping goes on, with a warning when it classifies.
//! - in hardware (`flags offload`) the switch or the SoC's packet engine forwards the
//!   connection and the CPU never sees its packets: no qdisc shapes them. So it is refused.
//!
//! What counts is the kernel's own state, whoever made the flowtable (fw4 or a ruleset by hand),
//! read with `nft list flowtables`. Without nft, or where it fails (a kernel without nf_tables),
//! there is no flowtable to see.

use crate::runner::{Cmd, Runner};
use unbloat_shaper::plan::Plan;

/// One flowtable, as `nft list flowtables` prints it (borrowed from its text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flowtable<'a> {
    /// Its table: `inet fw4`.
    pub table: &'a str,
    pub name: &'a str,
    /// Inside `devices = { ... }`: `"br-lan", eth0`.
    pub devices: &'a str,
    /// `flags offload`: the hardware forwards.
    pub hardware: bool,
}

impl Flowtable<'_> {
    pub fn has(&self, iface: &str) -> bool {
        self.devices
            .split(',')
            .any(|d| d.trim().trim_matches('"') == iface)
    }
}

/// A plan's device in a hardware flowtable: refused before anything changes.
#[derive(Debug, thiserror::Error)]
#[error("{iface} is in the flowtable {name} of {table} with hardware offloading, whose connections pass no qdisc: turn it off first (OpenWrt: `uci set firewall.@defaults[0].flow_offloading_hw=0; uci commit firewall; fw4 reload`); nothing was changed")]
pub struct HardwareOffload {
    pub iface: String,
    pub table: String,
    pub name: String,
}

/// What `nft list flowtables` printed; nothing when nft is missing or fails.
pub fn listed(runner: &dyn Runner) -> String {
    match runner.run(&Cmd::new("nft").args(["list", "flowtables"])) {
        Ok(out) if out.success() => out.stdout,
        _ => String::new(),
    }
}

/// Reads `nft list flowtables`: `table inet fw4 {`, `flowtable ft {`, then its statements one
/// per line (`devices = { "br-lan", eth0 }`, `flags offload`), `;`-ended in some versions.
pub fn parse(text: &str) -> Vec<Flowtable<'_>> {
    let mut out = vec![];
    let mut table = "";
    let mut open: Option<Flowtable> = None;
    for s in text.lines().flat_map(|l| l.split(';')).map(str::trim) {
        match open.as_mut() {
            None if s.starts_with("table ") => table = s[6..].trim_end_matches('{').trim(),
            None if s.starts_with("flowtable ") => {
                open = Some(Flowtable {
                    table,
                    name: s[10..].split_whitespace().next().unwrap_or(""),
                    devices: "",
                    hardware: false,
                })
            }
            Some(_) if s.starts_with('}') => out.extend(open.take()),
            Some(ft) if s.starts_with("flags ") => ft.hardware |= s.contains("offload"),
            Some(ft) if s.starts_with("devices ") => {
                ft.devices = s.split(['{', '}']).nth(1).unwrap_or("")
            }
            _ => {}
        }
    }
    out
}

/// Refuses hardware offloading on the plan's device; warns of software offloading where the
/// plan classifies (see the module's note).
pub fn judge(tables: &[Flowtable], plan: &Plan) -> Result<Vec<String>, HardwareOffload> {
    let iface = plan.wan.as_str();
    let mut warnings = vec![];
    for ft in tables.iter().filter(|ft| ft.has(iface)) {
        if ft.hardware {
            return Err(HardwareOffload {
                iface: iface.to_string(),
                table: ft.table.to_string(),
                name: ft.name.to_string(),
            });
        }
        if plan.classify.is_some() {
            warnings.push(format!(
                "{iface} is in the flowtable {} of {} (software offloading): shaping holds, but offloaded uploads lose classification's marks (OpenWrt: `uci set firewall.@defaults[0].flow_offloading=0; uci commit firewall; fw4 reload`)",
                ft.name, ft.table
            ));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::options::ShapeOptions;
    use unbloat_shaper::spec::Spec;

    /// What fw4 makes with `flow_offloading_hw '1'` (nft 1.0.6's layout), a second table's
    /// software flowtable in the `;`-ended form, and a table without one.
    const LISTED: &str = "table inet fw4 {\n\tflowtable ft {\n\t\thook ingress priority filter\n\t\tdevices = { \"br-lan\", eth1 }\n\t\tflags offload;\n\t\tcounter\n\t}\n}\ntable inet mine {\n\tflowtable f2 {\n\t\thook ingress priority filter; devices = { wan0 };\n\t}\n}\ntable ip other {\n}\n";

    fn plan(iface: &str, classify: bool) -> Plan {
        let opts = ShapeOptions {
            down: Some("20mbit".parse().unwrap()),
            up: Some("5mbit".parse().unwrap()),
            classify: classify.then(|| vec!["voice udp port 3074".to_string()]),
            ..Default::default()
        };
        Plan::build(&Spec::new(iface.parse().unwrap(), &opts).unwrap())
    }

    #[test]
    fn reads_each_flowtable_its_devices_and_hardware_flag() {
        let fts = parse(LISTED);
        assert_eq!(fts.len(), 2, "{fts:?}");
        assert_eq!((fts[0].table, fts[0].name), ("inet fw4", "ft"));
        assert!(fts[0].has("br-lan") && fts[0].has("eth1") && !fts[0].has("eth"));
        assert!(fts[0].hardware);
        assert_eq!((fts[1].table, fts[1].name), ("inet mine", "f2"));
        assert!(fts[1].has("wan0") && !fts[1].hardware);
        assert!(parse("").is_empty());
    }

    #[test]
    fn hardware_offload_on_the_device_is_refused_and_software_warns_only_when_classifying() {
        let fts = parse(LISTED);
        let e = judge(&fts, &plan("eth1", false)).unwrap_err().to_string();
        assert!(
            e.contains("eth1 is in the flowtable ft of inet fw4 with hardware offloading"),
            "{e}"
        );
        assert!(
            e.contains("flow_offloading_hw=0") && e.ends_with("nothing was changed"),
            "{e}"
        );
        assert_eq!(
            judge(&fts, &plan("wan0", false)).unwrap(),
            Vec::<String>::new()
        );
        let w = judge(&fts, &plan("wan0", true)).unwrap();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("flowtable f2 of inet mine (software offloading)"),
            "{}",
            w[0]
        );
        // A device in no flowtable: nothing to say.
        assert_eq!(
            judge(&fts, &plan("eth9", true)).unwrap(),
            Vec::<String>::new()
        );
    }
}
