//! `unbloat status`: what the kernel is doing on one WAN device, for people and for `--json`.
//!
//! [`Status::from_live`] turns a [`LiveState`] into a plain, serializable summary: who shapes the
//! device (unbloat, something else, or nothing), and for each direction the shaper's settings and
//! counters: cake per tin (threshold rate, target, interval, peak/average/sparse delay, backlog,
//! drops, ECN marks, ACK drops, flows), HTB per class (rate, ceil, sent, drops, overlimits) with
//! its fq_codel leaf (drops, ECN marks, new flows). The JSON form keeps integers in base units
//! (bits/s, microseconds, bytes), named so (`threshold_bps`, `target_us`); [`render_text`] shows
//! human units (Mbit/s, ms, KiB) in aligned columns.
//!
//! Ownership is the caller's knowledge: it passes the [`Plan`] that unbloat's state says it
//! applied, or None. A device with only a qdisc the kernel attached by itself (handle 0:, e.g.
//! noqueue, pfifo_fast, mq) is "not shaped"; anything else without a plan is "shaped by something
//! other than unbloat", and is still shown.

mod render;

pub use render::{human_rate, human_size, human_time, render_text};

use crate::cake::params::{self, Line};
use crate::fq_codel;
use crate::model::Diffserv;
use crate::plan::Plan;
use crate::qdisc::setting::Settings;
use crate::tcjson::{DeviceState, LiveState, Qdisc, QdiscKind};
use serde::Serialize;

/// Who shapes the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ownership {
    Unbloat,
    Other,
    NotShaped,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub device: String,
    pub ownership: Ownership,
    /// One line: `eth0: not shaped (root qdisc noqueue)`, ...
    pub summary: String,
    /// Upload: the WAN device's root qdisc, when it is not the kernel's default.
    pub egress: Option<Side>,
    /// Download: the IFB's root qdisc, when there is one.
    pub ingress: Option<Side>,
    /// How the setup is fair, as `start` decided and recorded it: `per-host fair (dual-srchost
    /// up, dual-dsthost down, nat): masquerade on eth0 (nftables)`. Set by the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<String>,
    /// The classification's rules with what each matched (connections' first upload packets:
    /// each connection is classified once), from nftables. Set by the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classify: Option<Vec<crate::classify::RuleCount>>,
}

/// One direction's shaper.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// `egress (upload)` or `ingress (download)`.
    pub direction: String,
    pub device: String,
    /// `cake 8001:`, `htb 1:`, ...
    pub qdisc: String,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub backlog_bytes: u64,
    pub shaper: Shaper,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shaper {
    Cake(CakeStatus),
    Htb(HtbStatus),
    /// A qdisc unbloat does not create: only its kind and counters are shown.
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CakeStatus {
    /// None: `unlimited`.
    pub bandwidth_bps: Option<u64>,
    /// cake's parameters as the kernel holds them, keyed as their declarations say
    /// ([`crate::cake::params::PARAMS`]: `rtt_us`, `diffserv`, `isolation`, `nat`,
    /// `overhead`, `framing`, ...).
    #[serde(flatten)]
    pub settings: Settings,
    /// The same, as `unbloat status` writes them: the shaping line and the link-layer line.
    #[serde(skip)]
    pub shaping_text: Vec<String>,
    #[serde(skip)]
    pub link_text: Vec<String>,
    pub memory_used_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub tins: Vec<TinStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TinStatus {
    /// tc's name for the tin: `Bulk`, `Best Effort`, `Video`, `Voice`, or `Tin N`.
    pub name: String,
    pub threshold_bps: u64,
    pub target_us: u64,
    pub interval_us: u64,
    pub peak_delay_us: u64,
    pub avg_delay_us: u64,
    /// The delay of sparse flows (tc's `sp_delay`, the kernel's `base_delay`).
    pub sparse_delay_us: u64,
    pub backlog_bytes: u64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub ack_drops: u64,
    pub sparse_flows: u64,
    pub bulk_flows: u64,
    pub unresponsive_flows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HtbStatus {
    /// `linklayer ethernet overhead 26 mpu 72`, when a size table is attached.
    pub stab: Option<String>,
    pub default_class: Option<String>,
    pub classes: Vec<ClassStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassStatus {
    pub classid: String,
    /// None: the class is at the root of the qdisc.
    pub parent: Option<String>,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    /// The fq_codel (or other qdisc) below the class.
    pub leaf: Option<LeafStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeafStatus {
    /// `fq_codel 110:`.
    pub qdisc: String,
    /// fq_codel's parameters as the kernel holds them, keyed as their declarations say
    /// ([`crate::fq_codel::params::PARAMS`]: `limit`, `target_us`, `ecn`, ...); none for
    /// another kind.
    #[serde(flatten)]
    pub settings: Settings,
    /// The same as `unbloat status` writes them.
    #[serde(skip)]
    pub text: Vec<String>,
    pub drops: u64,
    pub ecn_marks: Option<u64>,
    pub new_flows: Option<u64>,
    pub backlog_bytes: u64,
}

impl Status {
    /// Summarises `live`; `owned_by_unbloat` is the plan unbloat's state says it applied there.
    pub fn from_live(live: &LiveState, owned_by_unbloat: Option<&Plan>) -> Status {
        let dev = live.wan.dev.to_string();
        let egress = live
            .wan
            .root()
            .filter(|q| !q.is_kernel_default())
            .map(|q| side("egress (upload)", &live.wan, q));
        let ingress = live.ifb.as_ref().and_then(|ifb| {
            ifb.root()
                .filter(|q| !q.is_kernel_default())
                .map(|q| side("ingress (download)", ifb, q))
        });
        let root = live.wan.root().map_or("none".to_string(), |q| q.label());
        let has_ingress = live.wan.ingress().is_some();
        let (ownership, summary) = if owned_by_unbloat.is_some() {
            let part = |s: &Option<Side>, what: &str| match s {
                Some(s) => format!("{what} {} ({} on {})", side_rate(s), s.qdisc, s.device),
                None => format!("{what} not shaped"),
            };
            (
                Ownership::Unbloat,
                format!(
                    "{dev}: shaped by unbloat: {}, {}",
                    part(&egress, "upload"),
                    part(&ingress, "download")
                ),
            )
        } else if egress.is_none() && ingress.is_none() && !has_ingress {
            let kind = live
                .wan
                .root()
                .map_or("none".to_string(), |q| q.kind.clone());
            (
                Ownership::NotShaped,
                format!("{dev}: not shaped (root qdisc {kind})"),
            )
        } else {
            let what = if egress.is_some() {
                format!("root qdisc {root}")
            } else {
                "ingress qdisc ffff:".to_string()
            };
            (
                Ownership::Other,
                format!("{dev}: shaped by something other than unbloat ({what}, not created by unbloat)"),
            )
        };
        Status {
            device: dev,
            ownership,
            summary,
            egress,
            ingress,
            fairness: None,
            classify: None,
        }
    }
}

fn side_rate(s: &Side) -> String {
    match &s.shaper {
        Shaper::Cake(c) => c.bandwidth_bps.map_or("unlimited".into(), human_rate),
        Shaper::Htb(h) => h
            .classes
            .iter()
            .find(|c| c.parent.is_none())
            .map_or("?".into(), |c| human_rate(c.ceil_bps)),
        Shaper::Other => "?".into(),
    }
}

fn side(direction: &str, dev: &DeviceState, q: &Qdisc) -> Side {
    let st = q.stats.unwrap_or_default();
    let shaper = match &q.details {
        QdiscKind::Cake { options: o, stats } => Shaper::Cake(CakeStatus {
            bandwidth_bps: o.bandwidth.map(|r| r.bits_per_sec()),
            settings: params::settings(o),
            shaping_text: params::text(o, Line::Shaping),
            link_text: params::text(o, Line::Link),
            memory_used_bytes: stats.as_ref().map(|s| s.memory_used),
            memory_limit_bytes: stats.as_ref().map(|s| s.memory_limit),
            tins: stats.as_ref().map_or_else(Vec::new, |s| {
                s.tins
                    .iter()
                    .enumerate()
                    .map(|(i, t)| TinStatus {
                        name: tin_name(o.diffserv, i),
                        threshold_bps: t.threshold_rate.bits_per_sec(),
                        target_us: t.target.micros(),
                        interval_us: t.interval.micros(),
                        peak_delay_us: t.peak_delay.micros(),
                        avg_delay_us: t.avg_delay.micros(),
                        sparse_delay_us: t.base_delay.micros(),
                        backlog_bytes: t.backlog_bytes,
                        sent_packets: t.sent_packets,
                        sent_bytes: t.sent_bytes,
                        drops: t.drops,
                        ecn_marks: t.ecn_mark,
                        ack_drops: t.ack_drops,
                        sparse_flows: t.sparse_flows,
                        bulk_flows: t.bulk_flows,
                        unresponsive_flows: t.unresponsive_flows,
                    })
                    .collect()
            }),
        }),
        QdiscKind::Htb(o) => Shaper::Htb(HtbStatus {
            stab: q.stab.as_ref().map(|s| {
                format!(
                    "linklayer {} overhead {} mpu {}",
                    s.linklayer, s.overhead, s.mpu
                )
            }),
            default_class: Some(format!("{:x}:{:x}", q.handle.major, o.default_class)),
            classes: htb_classes(dev),
        }),
        _ => Shaper::Other,
    };
    Side {
        direction: direction.to_string(),
        device: dev.dev.to_string(),
        qdisc: q.label(),
        sent_bytes: st.bytes,
        sent_packets: st.packets,
        drops: st.drops,
        overlimits: st.overlimits,
        backlog_bytes: st.backlog,
        shaper,
    }
}

/// HTB classes in tree order: the root classes, then by class id (tc lists them in hash order).
fn htb_classes(dev: &DeviceState) -> Vec<ClassStatus> {
    let mut classes: Vec<_> = dev.classes.iter().filter(|c| c.htb().is_some()).collect();
    classes.sort_by_key(|c| (c.parent.is_some(), c.handle));
    classes
        .into_iter()
        .filter_map(|c| {
            let o = c.htb()?;
            let s = c.stats.unwrap_or_default();
            let leaf = c
                .leaf
                .and_then(|h| dev.qdisc(h))
                .or_else(|| dev.qdisc_under(c.handle));
            Some(ClassStatus {
                classid: c.handle.to_string(),
                parent: c.parent.map(|p| p.to_string()),
                rate_bps: o.rate.bits_per_sec(),
                ceil_bps: o.ceil.bits_per_sec(),
                sent_bytes: s.bytes,
                sent_packets: s.packets,
                drops: s.drops,
                overlimits: s.overlimits,
                leaf: leaf.map(|q| {
                    let fq = q.fq_codel().and_then(|(_, s)| s);
                    let options = q.fq_codel().map(|(o, _)| o);
                    let qs = q.stats.unwrap_or_default();
                    LeafStatus {
                        qdisc: q.label(),
                        settings: options.map(fq_codel::params::settings).unwrap_or_default(),
                        text: options.map(fq_codel::params::text).unwrap_or_default(),
                        drops: qs.drops,
                        ecn_marks: fq.map(|s| s.ecn_mark),
                        new_flows: fq.map(|s| s.new_flow_count),
                        backlog_bytes: qs.backlog,
                    }
                }),
            })
        })
        .collect()
}

/// tc's own names for cake's tins (iproute2 tc/q_cake.c).
fn tin_name(mode: Diffserv, i: usize) -> String {
    let names: &[&str] = match mode {
        Diffserv::Besteffort => &["Best Effort"],
        Diffserv::Diffserv3 => &["Bulk", "Best Effort", "Voice"],
        Diffserv::Diffserv4 => &["Bulk", "Best Effort", "Video", "Voice"],
        _ => &[],
    };
    names
        .get(i)
        .map_or_else(|| format!("Tin {i}"), |n| n.to_string())
}
