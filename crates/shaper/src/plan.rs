//! The plan: every qdisc, class, filter and device unbloat will create, as typed values.
//!
//! A [`Plan`] is what a validated [`Spec`] turns into ([`Plan::build`]). It is
//! organised the way the kernel will hold it, device by device, so that verification can compare it
//! with `tc -j -s` output field by field: the WAN device's root qdisc (egress), and for ingress the
//! IFB device, the `ingress` qdisc on the WAN device with its mirred redirect, and the IFB's root
//! qdisc. [`Plan::steps`] flattens it into the ordered typed operations ([`Step`]) that
//! [`script`](crate::script) renders as `ip` argv and `tc -batch` text.
//!
//! The pieces a plan is made of (handles, [`HtbTree`], [`Stab`], ...) are defined in
//! [`model`](crate::model), which the builders share without importing this module, and cake's
//! [`CakeParams`] with cake's other parameters ([`crate::cake::params`]); they are re-exported
//! here so `unbloat_shaper::plan::CakeParams` keeps naming them. Callers can rely on
//! the shape of these types staying stable (fields may be added).

pub use crate::model::*;
pub use crate::qdisc::cake::CakeParams;

use crate::classify::Classifier;
use crate::spec::{DirectionSpec, ShaperSpec, Spec};
use crate::{fq_codel, htb, ingress, stab};
use serde::{Deserialize, Serialize};
use unbloat_units::{IfName, Rate};

/// Everything unbloat sets up for one WAN interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The WAN device as the user named it.
    pub wan: IfName,
    /// Upload shaping on the WAN device's root, if the up rate is set.
    pub egress: Option<Shaping>,
    /// Download shaping through an IFB, if the down rate is set.
    pub ingress: Option<IngressShaping>,
    /// Classification rules, in an nftables table of their own ([`crate::classify`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classify: Option<Classifier>,
}

/// One device's root qdisc tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shaping {
    pub dev: IfName,
    pub root: RootQdisc,
}

/// The ingress half: an IFB device unbloat creates, the WAN device's `ingress` qdisc with a
/// redirect of everything to the IFB, and the shaper at the IFB's root (`shaping.dev == ifb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressShaping {
    pub ifb: IfName,
    pub redirect: Redirect,
    pub shaping: Shaping,
}

/// The root qdisc of a shaped device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RootQdisc {
    /// `tc qdisc add dev DEV root cake ...` (no handle: cake has no classes to address).
    Cake(CakeParams),
    /// `tc qdisc add dev DEV root handle 1: stab ... htb default N`, its classes, an fq_codel
    /// leaf on each leaf class, and DSCP filters for three tiers.
    Htb(HtbTree),
}

/// One typed operation, in the order it must run. `ip` steps run as separate commands; the
/// `tc` steps of one plan run as one `tc -batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Step {
    /// `ip link add name IFB type ifb`
    AddIfb { name: IfName },
    /// `ip link set dev IFB up` (before the redirect: a down IFB drops what is sent to it).
    SetUp { name: IfName },
    /// `ip link del dev IFB` (teardown; also removes the IFB's qdiscs).
    DeleteLink { name: IfName },
    /// `tc qdisc add dev DEV root [handle H] [stab ...] KIND ...`
    AddRootQdisc {
        dev: IfName,
        handle: Option<Handle>,
        stab: Option<Stab>,
        qdisc: QdiscKind,
    },
    /// `tc qdisc add dev DEV parent CLASS handle H fq_codel ...`
    AddLeafQdisc { dev: IfName, leaf: FqCodelLeaf },
    /// `tc qdisc add dev DEV handle ffff: ingress`
    AddIngressQdisc { dev: IfName },
    /// `tc class add dev DEV ... htb ...`
    AddClass { dev: IfName, class: HtbClass },
    /// `tc filter add dev DEV parent 1: protocol ip|ipv6 prio N u32 match ... flowid C`
    AddDscpFilter { dev: IfName, filter: DscpFilter },
    /// `tc filter add dev WAN parent ffff: ... action mirred egress redirect dev IFB`
    AddRedirect { redirect: Redirect },
    /// `tc qdisc del dev DEV root`
    DeleteRootQdisc { dev: IfName },
    /// `tc qdisc del dev DEV ingress`
    DeleteIngressQdisc { dev: IfName },
}

/// What a root qdisc step creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QdiscKind {
    Cake(CakeParams),
    Htb { default_class: Handle },
}

impl Step {
    /// True for the steps run by `ip`, false for those in the `tc -batch`.
    pub fn is_ip(&self) -> bool {
        matches!(
            self,
            Step::AddIfb { .. } | Step::SetUp { .. } | Step::DeleteLink { .. }
        )
    }
}

impl Plan {
    /// The plan for a validated spec. Pure: the same spec always gives the same plan.
    pub fn build(spec: &Spec) -> Plan {
        let shaping = |dev: &IfName, d: &DirectionSpec| Shaping {
            dev: dev.clone(),
            root: match &d.shaper {
                ShaperSpec::Cake(p) => RootQdisc::Cake(p.clone()),
                ShaperSpec::HtbFqCodel {
                    rate,
                    tiers,
                    link,
                    fq_codel,
                } => {
                    let (stab, ptm) = stab::for_link(link, spec.mac_header);
                    let shaped = if ptm {
                        let (num, den) = stab::PTM_RATE_FACTOR;
                        // u64 holds 100 Gbit/s x 64 with room to spare (MAX_RATE).
                        Rate::from_bits_per_sec(rate.bits_per_sec() * num / den)
                    } else {
                        *rate
                    };
                    let max_frame = stab.adjusted(fq_codel::MTU + spec.mac_header);
                    RootQdisc::Htb(htb::tree(shaped, *tiers, Some(stab), fq_codel, max_frame))
                }
            },
        };
        Plan {
            wan: spec.wan.clone(),
            egress: spec.egress.as_ref().map(|d| shaping(&spec.wan, d)),
            ingress: spec.ingress.as_ref().map(|d| IngressShaping {
                ifb: spec.ifb.clone(),
                redirect: Redirect {
                    restore_dscp: !spec.classify.is_empty(),
                    ..ingress::redirect(&spec.wan, &spec.ifb)
                },
                shaping: shaping(&spec.ifb, d),
            }),
            classify: (!spec.classify.is_empty()).then(|| Classifier {
                wan: spec.wan.clone(),
                rules: spec.classify.rules.clone(),
                auto: spec.classify.auto,
            }),
        }
    }

    /// The operations that create this plan, in order: the IFB is created and set up first (so the
    /// redirect never points at a missing or down device), then the egress tree, the IFB's tree,
    /// and last the ingress qdisc and redirect, which start sending traffic into the IFB's shaper.
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        if let Some(i) = &self.ingress {
            steps.push(Step::AddIfb {
                name: i.ifb.clone(),
            });
            steps.push(Step::SetUp {
                name: i.ifb.clone(),
            });
        }
        if let Some(e) = &self.egress {
            tree_steps(e, &mut steps);
        }
        if let Some(i) = &self.ingress {
            tree_steps(&i.shaping, &mut steps);
            steps.push(Step::AddIngressQdisc {
                dev: self.wan.clone(),
            });
            steps.push(Step::AddRedirect {
                redirect: i.redirect.clone(),
            });
        }
        steps
    }

    /// The operations that remove exactly what [`Plan::steps`] created, nothing else: the WAN
    /// device's ingress qdisc (with its redirect filter), the IFB (with its qdiscs), and the WAN
    /// device's root qdisc (the kernel then restores the device's default qdisc). Ingress goes
    /// first so no packet is redirected to a device being deleted.
    pub fn teardown_steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        if let Some(i) = &self.ingress {
            steps.push(Step::DeleteIngressQdisc {
                dev: self.wan.clone(),
            });
            steps.push(Step::DeleteLink {
                name: i.ifb.clone(),
            });
        }
        if self.egress.is_some() {
            steps.push(Step::DeleteRootQdisc {
                dev: self.wan.clone(),
            });
        }
        steps
    }

    /// The devices this plan shapes, WAN first.
    pub fn devices(&self) -> Vec<&IfName> {
        let mut d = vec![&self.wan];
        if let Some(i) = &self.ingress {
            d.push(&i.ifb);
        }
        d
    }
}

fn tree_steps(s: &Shaping, steps: &mut Vec<Step>) {
    match &s.root {
        RootQdisc::Cake(p) => steps.push(Step::AddRootQdisc {
            dev: s.dev.clone(),
            handle: None,
            stab: None,
            qdisc: QdiscKind::Cake(p.clone()),
        }),
        RootQdisc::Htb(t) => {
            steps.push(Step::AddRootQdisc {
                dev: s.dev.clone(),
                handle: Some(t.handle),
                stab: t.stab,
                qdisc: QdiscKind::Htb {
                    default_class: t.default_class,
                },
            });
            for class in &t.classes {
                steps.push(Step::AddClass {
                    dev: s.dev.clone(),
                    class: class.clone(),
                });
            }
            for leaf in &t.leaves {
                steps.push(Step::AddLeafQdisc {
                    dev: s.dev.clone(),
                    leaf: leaf.clone(),
                });
            }
            for filter in &t.filters {
                steps.push(Step::AddDscpFilter {
                    dev: s.dev.clone(),
                    filter: filter.clone(),
                });
            }
        }
    }
}
