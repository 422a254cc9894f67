//! From what unbloat has on a link to what it should have: the commands of one change, pure.
//!
//! [`between`] compares two plans piece by piece (the WAN device's root, the IFB's root, the
//! ingress redirect) and does no more than the difference:
//!
//! - A piece that is equal is not touched: a second identical start changes nothing.
//! - A piece whose structure stays (cake to cake; HTB with the same handles, classes, leaves and
//!   filters) is changed in place with tc's `change`: the kernel keeps the qdisc, its queues and
//!   its counters (net/sched/sch_cake.c `cake_change`, sch_htb.c `htb_change_class`,
//!   sch_fq_codel.c `fq_codel_change`), so flows see no gap. That is how `set-rate` and a
//!   reload with new options work.
//! - Anything else is replaced: deleted, then added.
//!
//! Where the kernel cannot change a value in place, the piece is replaced instead:
//! fq_codel refuses a new `flows` on a running qdisc (`fq_codel_change`: "if (q->flows) return
//! -EINVAL"), HTB has no `change` for its root options (`htb_qdisc_ops` has none), neither
//! cake's `memlimit` nor fq_codel's `memory_limit` can go back to "the kernel's own" once set,
//! and cake's `mpu` cannot go back to 0 (iproute2's q_cake.c sends `TCA_CAKE_MPU` only when it
//! is above 0, and `cake_change` keeps what it is not sent).
//!
//! The commands come in the order that never leaves a redirect pointing at nothing: the IFB is
//! created and set up before the batch; in the batch deletions come first, then changes, then
//! additions (egress tree, IFB tree, and the ingress qdisc with its redirect last); an IFB no
//! longer needed is deleted after the batch (with its qdiscs).

use crate::model::HtbTree;
use crate::plan::{IngressShaping, Plan, RootQdisc, Shaping, Step};
use crate::script::argv;
use unbloat_units::IfName;

/// The commands of one change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transition {
    /// `ip` steps before the batch: create and set up an IFB.
    pub links_before: Vec<Step>,
    /// The `tc -batch` lines (argv without `tc`): deletions, changes, additions.
    pub tc: Vec<Vec<String>>,
    /// `ip` steps after the batch: delete an IFB no longer needed.
    pub links_after: Vec<Step>,
    /// Pieces changed in place, and pieces replaced (deleted and added), for the message.
    pub changed_in_place: usize,
    pub replaced: usize,
    /// `nft -f` text after the links: the classification's table written whole or removed.
    pub nft: Option<String>,
}

impl Transition {
    pub fn is_empty(&self) -> bool {
        self.links_before.is_empty()
            && self.tc.is_empty()
            && self.links_after.is_empty()
            && self.nft.is_none()
    }

    /// The `tc -batch` text.
    pub fn batch_text(&self) -> String {
        self.tc.iter().map(|c| c.join(" ") + "\n").collect()
    }
}

#[derive(Default)]
struct Parts {
    t: Transition,
    dels: Vec<Vec<String>>,
    changes: Vec<Vec<String>>,
    adds: Vec<Vec<String>>,
}

/// The commands that turn `prev` (what unbloat has there; None: nothing) into `next` (None:
/// nothing, a stop). Both plans are for the same WAN device.
pub fn between(prev: Option<&Plan>, next: Option<&Plan>) -> Transition {
    let wan = match (prev, next) {
        (_, Some(p)) | (Some(p), None) => p.wan.clone(),
        (None, None) => return Transition::default(),
    };
    let mut parts = Parts::default();
    parts.shaping(
        &wan,
        prev.and_then(|p| p.egress.as_ref()),
        next.and_then(|p| p.egress.as_ref()),
    );
    parts.ingress(
        &wan,
        prev.and_then(|p| p.ingress.as_ref()),
        next.and_then(|p| p.ingress.as_ref()),
    );
    let Parts {
        mut t,
        dels,
        changes,
        adds,
    } = parts;
    t.tc = dels.into_iter().chain(changes).chain(adds).collect();
    let (was, will) = (
        prev.and_then(|p| p.classify.as_ref()),
        next.and_then(|p| p.classify.as_ref()),
    );
    if was != will {
        t.nft = Some(match will {
            Some(c) => c.nft_text(),
            None => crate::classify::delete_text(&wan),
        });
    }
    t
}

impl Parts {
    fn shaping(&mut self, wan: &IfName, prev: Option<&Shaping>, next: Option<&Shaping>) {
        match (prev, next) {
            (None, None) => {}
            (Some(p), None) => self
                .dels
                .push(argv(&Step::DeleteRootQdisc { dev: p.dev.clone() })),
            (None, Some(n)) => self.add_tree(wan, n),
            (Some(p), Some(n)) if p == n => {}
            (Some(p), Some(n)) => match in_place(p, n) {
                Some(changes) => {
                    self.changes.extend(changes);
                    self.t.changed_in_place += 1;
                }
                None => {
                    self.dels
                        .push(argv(&Step::DeleteRootQdisc { dev: p.dev.clone() }));
                    self.add_tree(wan, n);
                    self.t.replaced += 1;
                }
            },
        }
    }

    /// The `tc` steps that build one device's tree.
    fn add_tree(&mut self, wan: &IfName, s: &Shaping) {
        let only = Plan {
            wan: wan.clone(),
            egress: Some(s.clone()),
            ingress: None,
            classify: None,
        };
        self.adds.extend(only.steps().iter().map(argv));
    }

    fn ingress(
        &mut self,
        wan: &IfName,
        prev: Option<&IngressShaping>,
        next: Option<&IngressShaping>,
    ) {
        match (prev, next) {
            (None, None) => {}
            (Some(p), None) => self.remove_ingress(wan, p),
            (None, Some(n)) => self.add_ingress(wan, n),
            (Some(p), Some(n)) if p.ifb != n.ifb => {
                self.remove_ingress(wan, p);
                self.add_ingress(wan, n);
                self.t.replaced += 1;
            }
            (Some(p), Some(n)) => {
                self.shaping(wan, Some(&p.shaping), Some(&n.shaping));
                if p.redirect != n.redirect {
                    self.dels
                        .push(argv(&Step::DeleteIngressQdisc { dev: wan.clone() }));
                    self.adds
                        .push(argv(&Step::AddIngressQdisc { dev: wan.clone() }));
                    self.adds.push(argv(&Step::AddRedirect {
                        redirect: n.redirect.clone(),
                    }));
                    self.t.replaced += 1;
                }
            }
        }
    }

    fn remove_ingress(&mut self, wan: &IfName, p: &IngressShaping) {
        // The ingress qdisc goes first (with its redirect), then the IFB with its qdiscs.
        self.dels
            .push(argv(&Step::DeleteIngressQdisc { dev: wan.clone() }));
        self.t.links_after.push(Step::DeleteLink {
            name: p.ifb.clone(),
        });
    }

    fn add_ingress(&mut self, wan: &IfName, n: &IngressShaping) {
        let only = Plan {
            wan: wan.clone(),
            egress: None,
            ingress: Some(n.clone()),
            classify: None,
        };
        for step in only.steps() {
            if step.is_ip() {
                self.t.links_before.push(step);
            } else {
                self.adds.push(argv(&step));
            }
        }
    }
}

/// `change` commands that turn `p` into `n` without replacing the qdisc, if the kernel allows it.
fn in_place(p: &Shaping, n: &Shaping) -> Option<Vec<Vec<String>>> {
    if p.dev != n.dev {
        return None;
    }
    match (&p.root, &n.root) {
        (RootQdisc::Cake(a), RootQdisc::Cake(b)) => {
            if a.sticks_in(b) {
                return None;
            }
            let add = Plan {
                wan: n.dev.clone(),
                egress: Some(n.clone()),
                ingress: None,
                classify: None,
            };
            Some(add.steps().iter().map(argv).map(as_change).collect())
        }
        (RootQdisc::Htb(a), RootQdisc::Htb(b)) => htb_in_place(&n.dev, a, b),
        _ => None,
    }
}

fn htb_in_place(dev: &IfName, a: &HtbTree, b: &HtbTree) -> Option<Vec<Vec<String>>> {
    let same_shape = a.handle == b.handle
        && a.default_class == b.default_class
        && a.stab == b.stab
        && a.filters == b.filters
        && a.classes.len() == b.classes.len()
        && a.leaves.len() == b.leaves.len()
        && a.classes
            .iter()
            .zip(&b.classes)
            .all(|(x, y)| (x.parent, x.classid) == (y.parent, y.classid))
        && a.leaves.iter().zip(&b.leaves).all(|(x, y)| {
            (x.parent, x.handle, x.params.flows) == (y.parent, y.handle, y.params.flows)
                && !(x.params.memory_limit.is_some() && y.params.memory_limit.is_none())
        });
    if !same_shape {
        return None;
    }
    let mut out = vec![];
    for (x, y) in a.classes.iter().zip(&b.classes) {
        if x != y {
            out.push(as_change(argv(&Step::AddClass {
                dev: dev.clone(),
                class: y.clone(),
            })));
        }
    }
    for (x, y) in a.leaves.iter().zip(&b.leaves) {
        if x != y {
            let mut w = as_change(argv(&Step::AddLeafQdisc {
                dev: dev.clone(),
                leaf: y.clone(),
            }));
            // A running fq_codel refuses any `flows`, even the same number.
            if let Some(i) = w.iter().position(|t| t == "flows") {
                w.drain(i..i + 2);
            }
            out.push(w);
        }
    }
    Some(out)
}

/// `qdisc add ...` / `class add ...` as `... change ...`.
fn as_change(mut argv: Vec<String>) -> Vec<String> {
    if argv.get(1).is_some_and(|w| w == "add") {
        argv[1] = "change".into();
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Qdisc, ShapeOptions};
    use crate::spec::Spec;

    fn plan(iface: &str, opts: &ShapeOptions) -> Plan {
        Plan::build(&Spec::new(iface.parse().unwrap(), opts).unwrap())
    }

    fn rates(down: &str, up: &str) -> ShapeOptions {
        ShapeOptions {
            down: Some(down.parse().unwrap()),
            up: Some(up.parse().unwrap()),
            ..Default::default()
        }
    }

    fn lines(t: &Transition) -> Vec<String> {
        t.tc.iter().map(|c| c.join(" ")).collect()
    }

    #[test]
    fn the_same_plan_changes_nothing() {
        let p = plan("eth0", &rates("50mbit", "10mbit"));
        assert!(between(Some(&p), Some(&p)).is_empty());
    }

    #[test]
    fn from_nothing_it_is_the_plans_own_script() {
        let p = plan("eth0", &rates("50mbit", "10mbit"));
        let t = between(None, Some(&p));
        let s = p.script();
        assert_eq!(t.tc, s.tc_batch);
        assert_eq!(
            t.links_before.iter().map(argv).collect::<Vec<_>>(),
            s.ip_before
        );
    }

    #[test]
    fn a_new_cake_rate_is_a_change_of_both_roots_and_nothing_else() {
        let a = plan("eth0", &rates("50mbit", "10mbit"));
        let b = plan("eth0", &rates("60mbit", "12mbit"));
        let t = between(Some(&a), Some(&b));
        let l = lines(&t);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l[0].starts_with("qdisc change dev eth0 root cake bandwidth 12mbit"),
            "{l:?}"
        );
        assert!(
            l[1].starts_with("qdisc change dev ifb4eth0 root cake bandwidth 60mbit"),
            "{l:?}"
        );
        assert!(t.links_before.is_empty() && t.links_after.is_empty());
        assert_eq!((t.changed_in_place, t.replaced), (2, 0));
    }

    #[test]
    fn a_new_htb_rate_changes_classes_and_leaves_in_place_without_flows() {
        let o = |down, up| ShapeOptions {
            qdisc: Some(Qdisc::FqCodel),
            tiers: Some(3),
            ..rates(down, up)
        };
        let a = plan("eth0", &o("50mbit", "10mbit"));
        let b = plan("eth0", &o("60mbit", "12mbit"));
        let l = lines(&between(Some(&a), Some(&b)));
        assert!(!l.is_empty());
        assert!(l.iter().all(|c| c.contains(" change ")), "{l:?}");
        assert!(l.iter().all(|c| !c.contains("flows")), "{l:?}");
        assert!(
            l.iter().any(|c| c.starts_with("class change dev eth0")),
            "{l:?}"
        );
    }

    #[test]
    fn cakes_mpu_back_to_zero_is_a_replace_since_tc_would_not_send_it() {
        let a = plan("eth0", &rates("50mbit", "10mbit"));
        let b = plan(
            "eth0",
            &ShapeOptions {
                mpu: Some(0),
                ..rates("50mbit", "10mbit")
            },
        );
        assert!(a
            .egress
            .as_ref()
            .is_some_and(|e| matches!(&e.root, RootQdisc::Cake(p) if p.link.mpu > 0)));
        let t = between(Some(&a), Some(&b));
        assert_eq!((t.changed_in_place, t.replaced), (0, 2), "{:?}", lines(&t));
        // And from 0 to a value, tc sends it: in place.
        let back = between(Some(&b), Some(&a));
        assert_eq!((back.changed_in_place, back.replaced), (2, 0));
    }

    #[test]
    fn a_new_qdisc_kind_replaces_the_tree() {
        let a = plan("eth0", &rates("50mbit", "10mbit"));
        let b = plan(
            "eth0",
            &ShapeOptions {
                qdisc: Some(Qdisc::FqCodel),
                ..rates("50mbit", "10mbit")
            },
        );
        let t = between(Some(&a), Some(&b));
        let l = lines(&t);
        assert_eq!(l[0], "qdisc del dev eth0 root");
        assert_eq!(l[1], "qdisc del dev ifb4eth0 root");
        assert!(l[2..].iter().all(|c| c.contains(" add ")), "{l:?}");
        assert_eq!(t.replaced, 2);
    }

    #[test]
    fn dropping_the_download_removes_the_redirect_then_the_ifb() {
        let a = plan("eth0", &rates("50mbit", "10mbit"));
        let b = plan(
            "eth0",
            &ShapeOptions {
                up: Some("10mbit".parse().unwrap()),
                ..Default::default()
            },
        );
        let t = between(Some(&a), Some(&b));
        assert_eq!(lines(&t), vec!["qdisc del dev eth0 ingress"]);
        assert_eq!(
            t.links_after,
            vec![Step::DeleteLink {
                name: "ifb4eth0".parse().unwrap()
            }]
        );
    }

    #[test]
    fn a_stop_is_the_plans_teardown() {
        let a = plan("eth0", &rates("50mbit", "10mbit"));
        let t = between(Some(&a), None);
        assert_eq!(
            lines(&t),
            vec!["qdisc del dev eth0 root", "qdisc del dev eth0 ingress"]
        );
        assert_eq!(t.links_after.len(), 1);
    }
}
