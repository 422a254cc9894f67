//! The shared vocabulary of the planner: tc handles, directions, and the final parameters of each
//! kernel piece unbloat creates (cake, the HTB tree and its classes, fq_codel leaves, the size
//! table, DSCP filters, the ingress redirect).
//!
//! Data flows one way through the crate: this module imports none of the modules that build or
//! read these values ([`options`](crate::options), the per-qdisc builders [`cake`](crate::cake),
//! [`fq_codel`](crate::fq_codel), [`htb`](crate::htb), [`stab`](crate::stab),
//! [`ingress`](crate::ingress), then [`spec`](crate::spec), [`plan`](crate::plan), and the readers
//! [`script`](crate::script), [`verify`](crate::verify), [`status`](crate::status)); they all
//! import it. Its only dependency inside the crate is [`linklayer`](crate::linklayer), the
//! link-layer numbers cake's parameters carry.
//!
//! What callers can rely on:
//! - The parameter structs hold final values, never "use the default": what is held here is what
//!   is written to tc and what the kernel must report back (each builder module says how it
//!   chooses them; [`verify`](crate::verify) compares them with `tc -j` output).
//! - The serde names of the enums are tc's own keywords (`diffserv4`, `dual-srchost`, `ingress`),
//!   so JSON state records and messages spell them as tc does.
//! - Fields may be added; existing ones keep their meaning. The same types are re-exported from
//!   [`plan`](crate::plan), so `unbloat_shaper::plan::Handle` and `unbloat_shaper::model::Handle`
//!   are one type.
//!
//! The tc words of each piece (`CakeParams::words`, `Stab::words`, ...) and its keyword tables
//! live with its builder, which knows the kernel's grammar; this module only says what the values
//! are.

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
    /// Classification is on: `ctinfo` writes each classified connection's DSCP back into its
    /// packets before the redirect ([`crate::classify`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore_dscp: bool,
}
