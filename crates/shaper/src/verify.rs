//! Verification: does the kernel hold what the plan asked for?
//!
//! After `start` applies a [`Plan`], the system crate reads `tc -j -s -d` back into a
//! [`LiveState`] and calls [`verify`]. Every parameter unbloat sets is compared with what the
//! kernel reports, in the kernel's own units and rounding:
//!
//! - cake's `bandwidth` is stored in whole bytes per second, so the plan's rate is compared as
//!   `rate / 8` truncated; fq_codel's `target`/`interval` as the kernel rounds codel times
//!   ([`codel_time_readback`]); HTB rates read from tc's text at the precision tc printed them
//!   ([`tc_text_rate`]).
//! - Structure: the root qdisc's kind, every planned HTB class, fq_codel leaf and DSCP filter, the
//!   `ingress` qdisc, the mirred redirect (catch-all u32, protocol all, to the IFB), the IFB's
//!   root; and anything extra under unbloat's trees (a class, a leaf qdisc or a classifier key
//!   the plan does not have).
//!
//! An empty result means the kernel holds exactly the plan. Each [`Mismatch`] displays as one
//! line naming the place, the parameter, what was found and what was expected, e.g.
//! `egress cake: overhead is 18, expected 26`.
//!
//! What is not compared, and why: HTB `burst`/`cburst` (the kernel keeps them as transmit times
//! and tc prints them back rounded, e.g. 1600 as 1598b) and counters. cake's own options, `fwmark`
//! among them, are compared row by row from [`crate::qdisc::cake::params`].

use crate::cake::{self, CakeParams};
use crate::fq_codel;
use crate::model::{
    DscpFilter, FilterProtocol, FqCodelLeaf, Handle, HtbClass, HtbTree, Redirect, Stab,
    StabLinkLayer,
};
use crate::plan::{Plan, RootQdisc, Shaping};
use crate::tcjson::{tc_text_rate, DeviceState, LiveState, Qdisc, Source};
use serde::Serialize;
use std::fmt;
use unbloat_units::Rate;

/// One difference between the plan and the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// Where: `egress cake`, `ingress class 1:10`, `egress filter prio 1 (ip)`, ...
    pub place: String,
    /// Which parameter or object: `overhead`, `rate`, `root qdisc`, ...
    pub what: String,
    /// What the kernel holds; None when it holds nothing there.
    pub found: Option<String>,
    /// What the plan asked for (`none` for something the plan does not have).
    pub expected: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.found {
            Some(found) => write!(
                f,
                "{}: {} is {}, expected {}",
                self.place, self.what, found, self.expected
            ),
            None => write!(
                f,
                "{}: {} is missing, expected {}",
                self.place, self.what, self.expected
            ),
        }
    }
}

/// Compares `plan` with `live`; an empty list means they agree.
pub fn verify(plan: &Plan, live: &LiveState) -> Vec<Mismatch> {
    let mut out = Mismatches(Vec::new());
    if let Some(egress) = &plan.egress {
        out.shaping("egress", egress, &live.wan);
    }
    if let Some(ingress) = &plan.ingress {
        if live.wan.ingress().is_none() {
            out.missing(
                "ingress",
                &format!("ingress qdisc on {}", live.wan.dev),
                "ingress ffff:",
            );
        }
        out.redirect(&ingress.redirect, live);
        match &live.ifb {
            Some(ifb) if ifb.dev == ingress.ifb => out.shaping("ingress", &ingress.shaping, ifb),
            Some(ifb) => out.differs(
                "ingress",
                "IFB device",
                ifb.dev.to_string(),
                ingress.ifb.to_string(),
            ),
            None => out.missing("ingress", "IFB device", ingress.ifb.as_str()),
        }
    }
    out.0
}

struct Mismatches(Vec<Mismatch>);

fn stab_linklayer(l: StabLinkLayer) -> &'static str {
    match l {
        StabLinkLayer::Ethernet => "ethernet",
        StabLinkLayer::Atm => "atm",
    }
}

impl Mismatches {
    fn push(&mut self, place: &str, what: &str, found: Option<String>, expected: String) {
        self.0.push(Mismatch {
            place: place.to_string(),
            what: what.to_string(),
            found,
            expected,
        });
    }
    fn differs(&mut self, place: &str, what: &str, found: String, expected: String) {
        self.push(place, what, Some(found), expected);
    }
    fn missing(&mut self, place: &str, what: &str, expected: &str) {
        self.push(place, what, None, expected.to_string());
    }
    /// Records a difference when `found != expected`, both shown through `show`.
    fn check<T: PartialEq>(
        &mut self,
        place: &str,
        what: &str,
        found: T,
        expected: T,
        show: impl Fn(&T) -> String,
    ) {
        if found != expected {
            self.differs(place, what, show(&found), show(&expected));
        }
    }

    fn shaping(&mut self, dir: &str, s: &Shaping, dev: &DeviceState) {
        let Some(root) = dev.root() else {
            self.missing(
                dir,
                &format!("root qdisc on {}", dev.dev),
                root_kind(&s.root),
            );
            return;
        };
        if root.kind != root_kind(&s.root) {
            self.differs(
                dir,
                &format!("root qdisc on {}", dev.dev),
                root.label(),
                root_kind(&s.root).to_string(),
            );
            return;
        }
        match &s.root {
            RootQdisc::Cake(p) => self.cake(&format!("{dir} cake"), p, root),
            RootQdisc::Htb(t) => self.htb(dir, t, root, dev),
        }
        // Nothing else may hang below unbloat's root (cake has no children; HTB only its leaves).
        let planned_leaves: Vec<Handle> = match &s.root {
            RootQdisc::Htb(t) => t.leaves.iter().map(|l| l.handle).collect(),
            RootQdisc::Cake(_) => Vec::new(),
        };
        for q in dev.qdiscs.iter().filter(|q| !q.root && !q.is_ingress()) {
            if !planned_leaves.contains(&q.handle) {
                let parent = q.parent.map(|p| format!(" under {p}")).unwrap_or_default();
                self.differs(
                    dir,
                    "extra qdisc",
                    format!("{}{parent}", q.label()),
                    "none".to_string(),
                );
            }
        }
    }

    /// Every cake parameter ([`cake::params::PARAMS`]) as the kernel reports it, against what
    /// the kernel should report for the plan.
    fn cake(&mut self, place: &str, p: &CakeParams, q: &Qdisc) {
        let Some((live, _)) = q.cake() else {
            self.differs(
                place,
                "options",
                unreadable(q),
                "cake's options".to_string(),
            );
            return;
        };
        let want = cake::params::expected(p);
        for param in cake::params::PARAMS
            .iter()
            .filter(|param| (param.checked)(p))
        {
            self.check(
                place,
                param.what,
                (param.read)(live),
                (param.read)(&want),
                |v| v.clone(),
            );
        }
    }

    fn htb(&mut self, dir: &str, t: &HtbTree, root: &Qdisc, dev: &DeviceState) {
        let place = format!("{dir} htb ({})", t.handle);
        self.check(&place, "handle", root.handle, t.handle, |h| h.to_string());
        match root.htb() {
            Some(o) => self.check(
                &place,
                "default class",
                o.default_class,
                u64::from(t.default_class.minor),
                |m| format!("{m:x}"),
            ),
            None => self.differs(
                &place,
                "options",
                unreadable(root),
                "htb's options".to_string(),
            ),
        }
        self.stab(&format!("{dir} stab"), t.stab.as_ref(), root);
        for c in &t.classes {
            self.class(dir, t, c, dev);
        }
        for live in dev.classes.iter().filter(|c| c.kind == "htb") {
            if !t.classes.iter().any(|c| c.classid == live.handle) {
                self.differs(
                    dir,
                    "extra class",
                    format!("htb {}", live.handle),
                    "none".to_string(),
                );
            }
        }
        for leaf in &t.leaves {
            self.leaf(dir, leaf, dev);
        }
        for f in &t.filters {
            self.dscp_filter(dir, f, dev);
        }
        // Classifier keys on the tree that no planned filter explains.
        for (f, k) in dev
            .filters
            .iter()
            .filter_map(|f| f.u32_key().map(|k| (f, k)))
        {
            if f.parent.is_some_and(|p| p != t.handle) {
                continue;
            }
            let planned = t.filters.iter().any(|p| {
                u32::from(p.prio) == f.pref
                    && p.protocol.to_string() == f.protocol
                    && Some(p.flowid) == k.flowid
            });
            if !planned {
                let to = k.flowid.map(|h| format!(" to {h}")).unwrap_or_default();
                self.differs(
                    dir,
                    "extra filter",
                    format!("{} prio {} ({}){to}", f.kind, f.pref, f.protocol),
                    "none".to_string(),
                );
            }
        }
    }

    fn stab(&mut self, place: &str, want: Option<&Stab>, root: &Qdisc) {
        match (want, &root.stab) {
            (None, None) => {}
            (Some(_), None) => self.missing(place, "size table", "a stab"),
            (None, Some(s)) => self.differs(
                place,
                "size table",
                format!("linklayer {} overhead {}", s.linklayer, s.overhead),
                "none".to_string(),
            ),
            (Some(w), Some(s)) => {
                self.check(
                    place,
                    "linklayer",
                    s.linklayer.as_str(),
                    stab_linklayer(w.linklayer),
                    |s| s.to_string(),
                );
                self.check(place, "overhead", s.overhead, w.overhead, |v| v.to_string());
                self.check(place, "mpu", s.mpu, w.mpu, |v| v.to_string());
                self.check(place, "mtu", s.mtu, w.mtu, |v| v.to_string());
                self.check(place, "tsize", s.tsize, w.tsize, |v| v.to_string());
            }
        }
    }

    fn class(&mut self, dir: &str, t: &HtbTree, c: &HtbClass, dev: &DeviceState) {
        let place = format!("{dir} class {}", c.classid);
        let Some(live) = dev.class(c.classid) else {
            self.missing(
                &place,
                "htb class",
                &format!("rate {} ceil {}", c.rate, c.ceil),
            );
            return;
        };
        let Some(o) = live.htb() else {
            self.differs(&place, "kind", live.kind.clone(), "htb".to_string());
            return;
        };
        // A class whose parent is the qdisc itself is listed as `root`.
        let want_parent = (c.parent != t.handle).then_some(c.parent);
        self.check(&place, "parent", live.parent, want_parent, |p| match p {
            Some(h) => h.to_string(),
            None => "root".to_string(),
        });
        let kernel = |r: Rate| {
            let stored = Rate::from_bytes_per_sec(r.bytes_per_sec());
            match live.source {
                Source::Json | Source::Netlink => stored,
                Source::Text => tc_text_rate(stored),
            }
        };
        self.check(&place, "rate", kernel(o.rate), kernel(c.rate), |r| {
            r.to_string()
        });
        self.check(&place, "ceil", kernel(o.ceil), kernel(c.ceil), |r| {
            r.to_string()
        });
        // tc reports prio and quantum for leaf classes only.
        if o.level == Some(0) || o.prio.is_some() {
            if let Some(prio) = c.prio {
                self.check(&place, "prio", o.prio, Some(u32::from(prio)), |p| {
                    p.map_or("unset".into(), |p| p.to_string())
                });
            }
            if let Some(q) = o.quantum {
                self.check(&place, "quantum", u64::from(q), c.quantum.bytes(), |q| {
                    q.to_string()
                });
            }
        }
    }

    fn leaf(&mut self, dir: &str, leaf: &FqCodelLeaf, dev: &DeviceState) {
        let place = format!("{dir} fq_codel ({})", leaf.handle);
        let Some(q) = dev.qdisc(leaf.handle) else {
            self.missing(&place, &format!("qdisc under {}", leaf.parent), "fq_codel");
            return;
        };
        self.check(&place, "parent", q.parent, Some(leaf.parent), |p| {
            p.map_or("root".into(), |h| h.to_string())
        });
        let Some((o, _)) = q.fq_codel() else {
            self.differs(&place, "kind", unreadable(q), "fq_codel".to_string());
            return;
        };
        let want = fq_codel::params::expected(&leaf.params);
        for param in fq_codel::params::PARAMS
            .iter()
            .filter(|param| (param.checked)(&leaf.params))
        {
            self.check(
                &place,
                param.what,
                (param.read)(o),
                (param.read)(&want),
                |v| v.clone(),
            );
        }
    }

    fn dscp_filter(&mut self, dir: &str, want: &DscpFilter, dev: &DeviceState) {
        let place = format!("{dir} filter prio {} ({})", want.prio, want.protocol);
        let candidates: Vec<_> = dev
            .filters
            .iter()
            .filter(|f| f.pref == u32::from(want.prio) && f.protocol == want.protocol.to_string())
            .filter(|f| f.parent.is_none_or(|p| p == want.parent))
            .filter_map(|f| f.u32_key())
            .collect();
        let expected = format!("DSCP {} to {}", want.dscp, want.flowid);
        // Several filters share one prio (one u32 table per protocol), so the planned filter
        // matches if ANY key at that prio carries its DSCP and class, not just the first.
        let dscp_of = |key: &&crate::tcjson::U32Key| {
            key.matches.iter().find_map(|m| match want.protocol {
                FilterProtocol::Ipv6 => m.ipv6_dscp(),
                _ => m.ipv4_dscp(),
            })
        };
        if candidates
            .iter()
            .any(|k| dscp_of(k) == Some(want.dscp) && k.flowid == Some(want.flowid))
        {
            return;
        }
        let Some(key) = candidates.first() else {
            self.missing(&place, "u32 filter", &expected);
            return;
        };
        let found = format!(
            "DSCP {} to {}",
            dscp_of(key).map_or("?".to_string(), |d| d.to_string()),
            key.flowid.map_or("?".to_string(), |h| h.to_string())
        );
        self.differs(&place, "u32 match", found, expected);
    }

    fn redirect(&mut self, r: &Redirect, live: &LiveState) {
        let place = "ingress redirect";
        let expected = format!("mirred egress redirect to {}", r.to);
        let key = live
            .ingress_filters
            .iter()
            .filter(|f| f.pref == u32::from(r.prio))
            .find_map(|f| f.u32_key().map(|k| (f, k)));
        let Some((f, k)) = key else {
            self.missing(
                place,
                &format!("filter prio {} on {}", r.prio, r.dev),
                &expected,
            );
            return;
        };
        let protocol = r.protocol.to_string();
        self.check(
            place,
            "protocol",
            f.protocol.as_str(),
            protocol.as_str(),
            |p| p.to_string(),
        );
        if !k.matches.iter().all(|m| m.is_catch_all()) || k.matches.is_empty() {
            self.differs(
                place,
                "match",
                "a selective u32 match".to_string(),
                "every packet (u32 0 0)".to_string(),
            );
        }
        let ctinfo = k
            .actions
            .iter()
            .any(|a| matches!(a, crate::tcjson::filter::Action::Other(v) if v["kind"] == "ctinfo"));
        if ctinfo != r.restore_dscp {
            let says = |on: bool| {
                if on {
                    "ctinfo restoring the DSCP"
                } else {
                    "no ctinfo"
                }
            };
            self.differs(
                place,
                "classification",
                says(ctinfo).into(),
                says(r.restore_dscp).into(),
            );
        }
        match k.mirred().next() {
            None => self.missing(place, "mirred action", &expected),
            Some(m) => {
                let found = format!("mirred {} {} to {}", m.direction, m.action, m.to_dev);
                if m.action != "redirect" || m.direction != "egress" || m.to_dev != r.to.as_str() {
                    self.differs(place, "action", found, expected);
                }
            }
        }
    }
}

fn root_kind(r: &RootQdisc) -> &'static str {
    match r {
        RootQdisc::Cake(_) => "cake",
        RootQdisc::Htb(_) => "htb",
    }
}

fn unreadable(q: &Qdisc) -> String {
    match &q.details {
        crate::tcjson::QdiscKind::Other { error: Some(e), .. } => {
            format!("{} (unreadable: {e})", q.label())
        }
        _ => q.label(),
    }
}
