//! Ingress shaping: the `ingress` qdisc on the WAN device and the mirred redirect to the IFB.
//!
//! Heads up! Man pages `tc-mirred(8)`, `tc-u32(8)`, `tc(8)` (ingress qdisc); kernel
//! `net/sched/sch_ingress.c`, `net/sched/act_mirred.c`, `net/sched/cls_u32.c`,
//! `drivers/net/ifb.c`. No RFC.
//!
//! A qdisc only queues what a device *sends*, and the download arrives. So the WAN device gets an
//! `ingress` qdisc (`handle ffff:`), one u32 filter that matches every packet (`match u32 0 0`)
//! of every protocol (`protocol all`: IPv6 and ARP too, unlike wondershaper's IPv4-only policer,
//! seed 000) and redirects it with mirred to the IFB device's egress, where the real shaper sits.
//! The IFB must be up before the redirect exists, or redirected packets are dropped.

pub mod attr;

use crate::model::{FilterProtocol, Handle, Redirect};
use unbloat_units::IfName;

/// The filter's priority, as sqm-scripts uses.
pub const REDIRECT_PRIO: u16 = 10;

/// The catch-all redirect from `wan`'s ingress to `ifb`.
pub fn redirect(wan: &IfName, ifb: &IfName) -> Redirect {
    Redirect {
        dev: wan.clone(),
        parent: Handle::INGRESS,
        protocol: FilterProtocol::All,
        prio: REDIRECT_PRIO,
        to: ifb.clone(),
        restore_dscp: false,
    }
}

impl Redirect {
    /// The words after `tc filter add dev WAN`.
    pub fn words(&self) -> Vec<String> {
        let restore: &[&str] = if self.restore_dscp {
            &crate::classify::CTINFO_WORDS
        } else {
            &[]
        };
        let mut w: Vec<String> = [
            "parent",
            &self.parent.to_string(),
            "protocol",
            &self.protocol.to_string(),
            "prio",
            &self.prio.to_string(),
            "u32",
            "match",
            "u32",
            "0",
            "0",
        ]
        .iter()
        .chain(restore)
        .chain(&["action", "mirred", "egress", "redirect", "dev"])
        .map(|s| s.to_string())
        .collect();
        w.push(self.to.to_string());
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_is_the_field_s_catch_all() {
        let r = redirect(&"eth0".parse().unwrap(), &"ifb4eth0".parse().unwrap());
        assert_eq!(
            r.words().join(" "),
            "parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0"
        );
    }
}
