//! The plan: every qdisc, class, filter and device unbloat will create, as typed values.
//!
//! A [`Plan`] is what a validated [`Spec`](crate::spec::Spec) turns into ([`Plan::build`]). It is
//! organised the way the kernel will hold it, device by device, so that verification can compare it
//! with `tc -j -s` output field by field: the WAN device's root qdisc (egress), and for ingress the
//! IFB device, the `ingress` qdisc on the WAN device with its mirred redirect, and the IFB's root
//! qdisc. [`Plan::steps`] flattens it into the ordered typed operations ([`Step`]) that
//! [`script`](crate::script) renders as `ip` argv and `tc -batch` text.
//!
//! The parameter structs hold final values, never "use the default": what is planned is what is
//! written to tc and what the kernel must report back. Callers can rely on the shape of these types
//! staying stable (fields may be added).

use crate::linklayer::LinkLayer;
use crate::spec::{DirectionSpec, ShaperSpec, Spec};
use crate::{fq_codel, htb, ingress, stab};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use unbloat_units::{Dscp, IfName, Rate, Size, Time};

/// A tc handle or class id `major:minor`. tc reads and prints both numbers in hex: `1:11` is
/// minor 0x11, `ffff:` the ingress qdisc. `Display` writes tc's form (`1:` when minor is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Handle {
    pub major: u16,
    pub minor: u16,
}

impl Handle {
    pub const fn new(major: u16, minor: u16) -> Handle {
        Handle { major, minor }
    }
    /// The handle of the `ingress` qdisc (tc(8): "handle ffff:").
    pub const INGRESS: Handle = Handle::new(0xffff, 0);
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.minor == 0 {
            write!(f, "{:x}:", self.major)
        } else {
            write!(f, "{:x}:{:x}", self.major, self.minor)
        }
    }
}

impl FromStr for Handle {
    type Err = String;
    /// Parses tc's spellings: `1:`, `1:0`, `1:11`, `ffff:`, `0x1:0x11` is not tc's and is refused.
    fn from_str(s: &str) -> Result<Handle, String> {
        let (maj, min) = s
            .split_once(':')
            .ok_or_else(|| format!("invalid handle {s:?}: expected MAJOR:MINOR in hex"))?;
        let hex = |t: &str| -> Result<u16, String> {
            if t.is_empty() {
                Ok(0)
            } else {
                u16::from_str_radix(t, 16)
                    .map_err(|_| format!("invalid handle {s:?}: {t:?} is not a 16-bit hex number"))
            }
        };
        Ok(Handle::new(hex(maj)?, hex(min)?))
    }
}

/// Which way traffic flows through a shaper, seen from the user's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Upload: leaving through the WAN device, shaped at its root.
    Egress,
    /// Download: arriving on the WAN device, redirected to the IFB and shaped at the IFB's root.
    Ingress,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Egress => "egress",
            Direction::Ingress => "ingress",
        })
    }
}

/// Everything unbloat sets up for one WAN interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The WAN device as the user named it.
    pub wan: IfName,
    /// Upload shaping on the WAN device's root, if the up rate is set.
    pub egress: Option<Shaping>,
    /// Download shaping through an IFB, if the down rate is set.
    pub ingress: Option<IngressShaping>,
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

/// cake's DSCP tin modes (tc -j key `diffserv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Diffserv {
    Besteffort,
    Diffserv3,
    Diffserv4,
    Diffserv8,
    Precedence,
}

/// cake's flow isolation modes (tc -j key `flowmode`, same spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowMode {
    Flowblind,
    Srchost,
    Dsthost,
    Hosts,
    Flows,
    DualSrchost,
    DualDsthost,
    TripleIsolate,
}

/// cake's ACK filter (tc -j key `ack-filter`: "disabled" | "enabled" | "aggressive").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckFilter {
    Disabled,
    Enabled,
    Aggressive,
}

/// Every cake parameter unbloat sets, as cake will report it (`tc -j qdisc` `options`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeParams {
    /// `bandwidth` (tc -j: bytes per second... see tcjson; here bits per second).
    pub bandwidth: Rate,
    /// `rtt`; cake's default is 100 ms ("internet"), always written explicitly.
    pub rtt: Time,
    pub diffserv: Diffserv,
    pub flow_mode: FlowMode,
    pub nat: bool,
    pub wash: bool,
    /// cake's `ingress` mode (count dropped packets against the rate): on for the IFB side.
    pub ingress: bool,
    pub ack_filter: AckFilter,
    /// `split-gso` (cake's default, true) or `no-split-gso`.
    pub split_gso: bool,
    /// `memlimit`, if the user set one; otherwise cake sizes it from rate and rtt.
    pub memlimit: Option<Size>,
    /// `overhead`, `mpu`, `atm`/`ptm`/`noatm`, `raw`.
    pub link: LinkLayer,
}

/// The HTB tree of the fq_codel strategy: root `handle 1:`, a parent class 1:1 at the full rate,
/// leaf classes under it, an fq_codel on each leaf, and (three tiers) DSCP filters on the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbTree {
    /// The root qdisc's handle (`1:`).
    pub handle: Handle,
    /// `default N`: the class unclassified traffic goes to (its minor number).
    pub default_class: Handle,
    /// Link-layer compensation for HTB's rate tables, on the root qdisc.
    pub stab: Option<Stab>,
    /// Parent first, then the leaves, in the order they are created.
    pub classes: Vec<HtbClass>,
    /// One fq_codel per leaf class.
    pub leaves: Vec<FqCodelLeaf>,
    /// DSCP classifiers (empty for one tier: everything goes to the default class).
    pub filters: Vec<DscpFilter>,
}

/// `tc class add dev DEV parent P classid C htb rate R ceil R burst B cburst B quantum Q [prio N]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClass {
    pub parent: Handle,
    pub classid: Handle,
    pub rate: Rate,
    pub ceil: Rate,
    pub burst: Size,
    pub cburst: Size,
    pub quantum: Size,
    /// Lower is served first among classes borrowing from their parent; None on the parent class.
    pub prio: Option<u8>,
    /// What the class is for, for people ("priority", "best effort", "bulk", "all traffic").
    pub label: String,
}

/// An fq_codel qdisc attached to a leaf class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelLeaf {
    /// The HTB class it hangs from.
    pub parent: Handle,
    /// Its own handle (`110:` under class 1:11, and so on).
    pub handle: Handle,
    pub params: FqCodelParams,
}

/// Every fq_codel parameter unbloat sets (tc -j `options`: limit, flows, quantum, target,
/// interval, memory_limit, ecn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelParams {
    /// Packets.
    pub limit: u32,
    pub flows: u32,
    pub target: Time,
    pub interval: Time,
    /// Bytes served per round per flow.
    pub quantum: u32,
    pub ecn: bool,
    /// Bytes; None keeps the kernel's 32 MB.
    pub memory_limit: Option<Size>,
}

/// The size table on the HTB root (`man tc-stab`): `stab mtu M tsize T mpu P overhead O
/// linklayer ethernet|atm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stab {
    pub mtu: u32,
    pub tsize: u32,
    pub mpu: u32,
    /// Added to the length Linux counts (which includes the MAC header on Ethernet devices).
    pub overhead: i32,
    pub linklayer: StabLinkLayer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StabLinkLayer {
    Ethernet,
    Atm,
}

/// The network protocol a filter matches (tc's `protocol ip` / `protocol ipv6` / `protocol all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterProtocol {
    Ip,
    Ipv6,
    All,
}

impl fmt::Display for FilterProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterProtocol::Ip => "ip",
            FilterProtocol::Ipv6 => "ipv6",
            FilterProtocol::All => "all",
        })
    }
}

/// A u32 filter on the HTB root sending one DSCP to a class: for IPv4 `match ip dsfield TOS 0xfc`,
/// for IPv6 `match ip6 priority TOS 0xfc` (the mask keeps the six DSCP bits, ignores ECN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DscpFilter {
    pub parent: Handle,
    pub protocol: FilterProtocol,
    pub prio: u16,
    pub dscp: Dscp,
    pub flowid: Handle,
}

/// The catch-all redirect on the WAN device's ingress qdisc:
/// `tc filter add dev WAN parent ffff: protocol all prio 10 u32 match u32 0 0
///  action mirred egress redirect dev IFB`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirect {
    pub dev: IfName,
    pub parent: Handle,
    pub protocol: FilterProtocol,
    pub prio: u16,
    pub to: IfName,
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
                redirect: ingress::redirect(&spec.wan, &spec.ifb),
                shaping: shaping(&spec.ifb, d),
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
