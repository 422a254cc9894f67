//! Prometheus metrics: what tc reports for each shaped interface, and the daemon's own counters,
//! in Prometheus's text format. Pure: [`render`] takes what one scrape read and returns the text;
//! [`crate::serve`] reads the kernel and answers HTTP.
//!
//! Heads up! This follows the text exposition format 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>) and the naming practices
//! (<https://prometheus.io/docs/practices/naming/>), checked with `promtool check metrics`:
//!
//! - A family (one metric name) appears once: `# HELP`, `# TYPE`, then all its samples together,
//!   whatever the number of interfaces. A family split in two is an error for promtool and for
//!   Prometheus's parser, so the text is written family by family from tables (`Metric`), never
//!   interface by interface.
//! - Counters end in `_total`. Values are in base units: seconds (cake reports microseconds,
//!   written exactly: 21073 µs is `0.021073`), bytes, and rates in BYTES per second. Bytes, not
//!   bits: bytes are Prometheus's base unit and every counter here counts bytes, so
//!   `rate(unbloat_qdisc_sent_bytes_total[1m])` compares with
//!   `unbloat_shaper_rate_bytes_per_second` without a factor; tc reports its rates in bytes per
//!   second too, so nothing is rounded on the way. Dashboards show bits with `* 8`.
//! - Label values escape backslash, double quote and line feed ([`escape_label_value`]).
//!
//! Labels:
//!
//! | label | values |
//! |---|---|
//! | `iface` | the WAN device, as unbloat's state names it |
//! | `direction` | `up`: egress, the WAN's root qdisc; `down`: ingress, the IFB's root qdisc |
//! | `qdisc` | the root qdisc's kind: `cake`, `htb`, or whatever else is there |
//! | `tin` | cake's tin ([`tin_label`]): `bulk`, `best_effort`, `video`, `voice`, `tin0`.. |
//! | `class` | an HTB class (`1:11`); for an fq_codel, the class it hangs under (`root` at root) |
//!
//! The counters are the kernel's: they start again from zero when unbloat replaces a qdisc (a
//! re-apply), which `rate()` and `increase()` read as a counter reset. Some are 32 bits in the
//! kernel (cake's per-tin packets, drops and marks) and wrap, which reads the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use unbloat_shaper::plan::{Diffserv, Plan, RootQdisc};
use unbloat_shaper::tcjson::{
    CakeStats, CakeTin, Class, ClassStats, DeviceState, FqCodelStats, LiveState, Qdisc, QdiscKind,
    QdiscStats,
};
use unbloat_units::{Rate, Time};

/// The port `unbloat daemon --metrics` suggests (it listens only where it is told).
///
/// Prometheus keeps a list of exporters' default ports, the wiki page "Default port allocations"
/// (<https://github.com/prometheus/prometheus/wiki/Default-port-allocations>), so that exporters
/// on one host do not collide. The live page could not be read when this was chosen; the newest
/// copies that could (a mirror of the wiki's history up to February 2020, and a later 2020 copy
/// that ends at 9745) mark 9723 `"FREE"`, between 9722 (Miele exporter) and 9724 (FreeSWITCH
/// exporter). 9934 is taken: gs1200-exporter listens there (nixpkgs' test of it). The 9100-9999
/// range was reported full in 2023, new exporters being placed above 10000: check the live page,
/// and register unbloat there, before relying on this number.
pub const DEFAULT_METRICS_PORT: u16 = 9723;

/// The daemon's own counters, kept by the daemon, rendered here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonCounters {
    /// Per interface: shaping applied again (at start, after a link event, a reload).
    pub reapplies: BTreeMap<String, u64>,
    /// Per interface: applies that failed.
    pub failures: BTreeMap<String, u64>,
    pub link_events: u64,
    pub reloads: u64,
    pub reload_failures: u64,
    /// When an apply last succeeded (Unix seconds).
    pub last_apply_unix: Option<u64>,
    /// When the daemon started (Unix seconds).
    pub start_unix: u64,
    /// The network each interface that follows one is on.
    #[cfg(feature = "networks")]
    pub networks: BTreeMap<String, crate::seen::Seen>,
}

/// One shaped interface as read at scrape time: the kernel's state, and the plan unbloat's state
/// says it applied there (None: unknown; "shaped" then means "something is at the root").
#[derive(Debug, Clone)]
pub struct Sample {
    pub iface: String,
    pub live: LiveState,
    pub plan: Option<Plan>,
}

/// `direction` of the upload: the WAN device's egress.
const UP: &str = "up";
/// `direction` of the download: the WAN's ingress, redirected to the IFB and shaped at its root.
const DOWN: &str = "down";

/// The text Prometheus scrapes: every family once, in a fixed order; samples in the order of
/// `samples` (interfaces), then direction (up, down), then tin, class or qdisc. A family without
/// samples (no cake anywhere, say) is left out.
pub fn render(samples: &[Sample], daemon: &DaemonCounters) -> String {
    let sides = sides(samples);
    let mut out = String::new();
    write_family(&mut out, &SHAPED, &shaped_samples(samples));
    write_family(&mut out, &SHAPER_RATE, &shaper_rates(&sides));
    write_table(&mut out, ROOT_METRICS, &root_items(&sides));
    write_table(&mut out, CAKE_METRICS, &cake_items(&sides));
    write_table(&mut out, TIN_METRICS, &tin_items(&sides));
    write_table(&mut out, FQ_CODEL_METRICS, &fq_codel_items(&sides));
    write_table(&mut out, HTB_CLASS_METRICS, &htb_class_items(&sides));
    write_daemon(&mut out, samples, daemon);
    out
}

/// The label value of cake's tin `index` in `mode`. Cake dumps its tins in priority order
/// (net/sched/sch_cake.c `bulk_order` = {1, 0, 2, 3} for diffserv3/4, `normal_order` otherwise),
/// and tc names them by count (tc/q_cake.c `cake_print_xstats`: 3 are Bulk, Best Effort, Voice;
/// 4 are Bulk, Best Effort, Video, Voice; any other number `Tin N`). These are tc's names in
/// lower case with `_`, stable for queries; besteffort's one tin is `best_effort` (what it
/// carries), diffserv8's and precedence's eight are `tin0`..`tin7`.
pub fn tin_label(mode: Diffserv, index: usize) -> String {
    let names: &[&str] = match mode {
        Diffserv::Besteffort => &["best_effort"],
        Diffserv::Diffserv3 => &["bulk", "best_effort", "voice"],
        Diffserv::Diffserv4 => &["bulk", "best_effort", "video", "voice"],
        Diffserv::Diffserv8 | Diffserv::Precedence => &[],
    };
    names
        .get(index)
        .map_or_else(|| format!("tin{index}"), |n| n.to_string())
}

/// A label value as the text format wants it: backslash, double quote and line feed escaped.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and line feed only (the format's rule for docstrings).
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// `{a="x",b="y"}`, or nothing without labels.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// A sample's value, kept typed until it is written so that units convert exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A count, or bytes.
    Int(u64),
    /// Written in seconds, exactly: tc's microseconds are six decimals.
    Time(Time),
    /// Written in bytes per second, exactly: a bit is 0.125 bytes.
    Rate(Rate),
}

/// A family's name, help and type.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
}

/// A family read from items of type `T` (a tin, a class, a qdisc): `read` gives an item's value,
/// or None when the kernel did not report it (the item then has no sample).
struct Metric<T> {
    family: Family,
    read: fn(&T) -> Option<Value>,
}

const fn counter<T>(
    name: &'static str,
    read: fn(&T) -> Option<Value>,
    help: &'static str,
) -> Metric<T> {
    let kind = Kind::Counter;
    Metric {
        family: Family { name, help, kind },
        read,
    }
}

const fn gauge<T>(
    name: &'static str,
    read: fn(&T) -> Option<Value>,
    help: &'static str,
) -> Metric<T> {
    let kind = Kind::Gauge;
    Metric {
        family: Family { name, help, kind },
        read,
    }
}

// Readers for the tables, so that each row reads as data.
fn int(n: u64) -> Option<Value> {
    Some(Value::Int(n))
}
fn time(t: Time) -> Option<Value> {
    Some(Value::Time(t))
}
fn rate(r: Rate) -> Option<Value> {
    Some(Value::Rate(r))
}
fn qstat(q: &Qdisc, field: fn(&QdiscStats) -> u64) -> Option<Value> {
    q.stats.as_ref().map(|s| Value::Int(field(s)))
}
fn cstat(c: &Class, field: fn(&ClassStats) -> u64) -> Option<Value> {
    c.stats.as_ref().map(|s| Value::Int(field(s)))
}
fn fq(q: &Qdisc, field: fn(&FqCodelStats) -> u64) -> Option<Value> {
    let (_, stats) = q.fq_codel()?;
    stats.map(|s| Value::Int(field(s)))
}

/// Each metric of `table` as one family over all `items` (rendered labels, item).
fn write_table<T>(out: &mut String, table: &[Metric<T>], items: &[(String, &T)]) {
    for m in table {
        let samples: Vec<(String, Value)> = items
            .iter()
            .filter_map(|(l, item)| (m.read)(item).map(|v| (l.clone(), v)))
            .collect();
        write_family(out, &m.family, &samples);
    }
}

/// HELP and TYPE once, then every sample; nothing at all without samples.
fn write_family(out: &mut String, f: &Family, samples: &[(String, Value)]) {
    if samples.is_empty() {
        return;
    }
    let kind = match f.kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
    let _ = writeln!(out, "# TYPE {} {kind}", f.name);
    for (l, v) in samples {
        let _ = writeln!(out, "{}{l} {}", f.name, value_text(*v));
    }
}

fn value_text(v: Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Time(t) => decimal(t.micros() / 1_000_000, t.micros() % 1_000_000, 6),
        // 1/8 = 0.125: three decimals hold any bit rate exactly.
        Value::Rate(r) => decimal(r.bits_per_sec() / 8, r.bits_per_sec() % 8 * 125, 3),
    }
}

/// `whole.frac`, `frac` written with `digits` decimals and its trailing zeros cut.
fn decimal(whole: u64, frac: u64, digits: usize) -> String {
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:0digits$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// One direction of one interface: the device whose root qdisc shapes it.
struct Side<'a> {
    iface: &'a str,
    direction: &'static str,
    dev: &'a DeviceState,
}

impl<'a> Side<'a> {
    /// The root qdisc, unless it is only the kernel's default (noqueue, pfifo_fast, mq, ...).
    fn root(&self) -> Option<&'a Qdisc> {
        self.dev.root().filter(|q| !q.is_kernel_default())
    }
    fn labels(&self, more: &[(&str, &str)]) -> String {
        let mut pairs = vec![("iface", self.iface), ("direction", self.direction)];
        pairs.extend_from_slice(more);
        labels(&pairs)
    }
}

fn sides(samples: &[Sample]) -> Vec<Side<'_>> {
    let mut out = Vec::new();
    for s in samples {
        let iface = s.iface.as_str();
        out.push(Side {
            iface,
            direction: UP,
            dev: &s.live.wan,
        });
        if let Some(ifb) = &s.live.ifb {
            out.push(Side {
                iface,
                direction: DOWN,
                dev: ifb,
            });
        }
    }
    out
}

static SHAPED: Family = Family {
    name: "unbloat_shaped",
    help: "1 when the direction is shaped as planned (the planned root qdisc kind; for down also \
           the redirect to the IFB), 0 when not.",
    kind: Kind::Gauge,
};

/// Each direction the plan configures: whether its shaper is in place. Upload: the WAN's root
/// qdisc is of the planned kind. Download: the IFB's root is, and the WAN has its ingress qdisc
/// with a redirect to the IFB (without the redirect nothing reaches the IFB's shaper). A
/// direction the plan leaves alone has no sample: it is not "absent". Without a plan, each
/// direction that has a device: whether anything but the kernel's default is at its root.
fn shaped(s: &Sample) -> Vec<(&'static str, bool)> {
    let live = &s.live;
    let kind_at = |dev: Option<&DeviceState>, root: &RootQdisc| {
        let want = match root {
            RootQdisc::Cake(_) => "cake",
            RootQdisc::Htb(_) => "htb",
        };
        dev.and_then(DeviceState::root)
            .is_some_and(|q| q.kind == want)
    };
    let redirected_to = |ifb: &str| {
        live.wan.ingress().is_some()
            && live
                .ingress_filters
                .iter()
                .filter_map(|f| f.u32_key())
                .flat_map(|k| k.mirred())
                .any(|m| m.action == "redirect" && m.to_dev == ifb)
    };
    let Some(plan) = &s.plan else {
        let mut out = vec![(UP, live.wan.is_shaped())];
        if let Some(ifb) = &live.ifb {
            out.push((DOWN, ifb.is_shaped() && redirected_to(ifb.dev.as_str())));
        }
        return out;
    };
    let mut out = Vec::new();
    if let Some(e) = &plan.egress {
        out.push((UP, kind_at(Some(&live.wan), &e.root)));
    }
    if let Some(i) = &plan.ingress {
        let ifb = live.ifb.as_ref().filter(|d| d.dev == i.ifb);
        let on = kind_at(ifb, &i.shaping.root) && redirected_to(i.ifb.as_str());
        out.push((DOWN, on));
    }
    out
}

fn shaped_samples(samples: &[Sample]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for s in samples {
        for (direction, on) in shaped(s) {
            let l = labels(&[("iface", &s.iface), ("direction", direction)]);
            out.push((l, Value::Int(u64::from(on))));
        }
    }
    out
}

static SHAPER_RATE: Family = Family {
    name: "unbloat_shaper_rate_bytes_per_second",
    help: "The rate the root qdisc shapes to, as the kernel holds it: cake's bandwidth, or the \
           ceil of the HTB root class.",
    kind: Kind::Gauge,
};

/// cake's `bandwidth` (none when `unlimited`), or the ceil of HTB's root class (1:1 in unbloat's
/// tree, which caps everything below it).
fn shaper_rate(dev: &DeviceState, root: &Qdisc) -> Option<Rate> {
    match &root.details {
        QdiscKind::Cake { options, .. } => options.bandwidth,
        QdiscKind::Htb(_) => dev
            .classes
            .iter()
            .filter(|c| c.parent.is_none())
            .filter_map(|c| c.htb().map(|o| o.ceil))
            .max(),
        _ => None,
    }
}

fn shaper_rates(sides: &[Side]) -> Vec<(String, Value)> {
    sides
        .iter()
        .filter_map(|s| {
            let q = s.root()?;
            let rate = shaper_rate(s.dev, q)?;
            Some((s.labels(&[("qdisc", &q.kind)]), Value::Rate(rate)))
        })
        .collect()
}

/// The root qdisc's totals (`tc -s`: Sent, dropped, overlimits, requeues, backlog).
#[rustfmt::skip]
static ROOT_METRICS: &[Metric<Qdisc>] = &[
    counter("unbloat_qdisc_sent_bytes_total", |q| qstat(q, |s| s.bytes),
        "Bytes the root qdisc sent."),
    counter("unbloat_qdisc_sent_packets_total", |q| qstat(q, |s| s.packets),
        "Packets the root qdisc sent."),
    counter("unbloat_qdisc_drops_total", |q| qstat(q, |s| s.drops),
        "Packets the root qdisc dropped (AQM and overflow)."),
    counter("unbloat_qdisc_overlimits_total", |q| qstat(q, |s| s.overlimits),
        "Times the root qdisc held a packet back because the shaper was over its rate."),
    counter("unbloat_qdisc_requeues_total", |q| qstat(q, |s| s.requeues),
        "Packets the driver handed back to the root qdisc."),
    gauge("unbloat_qdisc_backlog_bytes", |q| qstat(q, |s| s.backlog),
        "Bytes queued in the root qdisc."),
    gauge("unbloat_qdisc_backlog_packets", |q| qstat(q, |s| s.qlen),
        "Packets queued in the root qdisc."),
];

fn root_items<'a>(sides: &[Side<'a>]) -> Vec<(String, &'a Qdisc)> {
    sides
        .iter()
        .filter_map(|s| {
            let q = s.root()?;
            Some((s.labels(&[("qdisc", &q.kind)]), q))
        })
        .collect()
}

/// cake's statistics of the whole qdisc.
#[rustfmt::skip]
static CAKE_METRICS: &[Metric<CakeStats>] = &[
    gauge("unbloat_cake_memory_used_bytes", |c| int(c.memory_used),
        "Memory cake's queues use."),
    gauge("unbloat_cake_memory_limit_bytes", |c| int(c.memory_limit),
        "cake's memory limit (memlimit, or sized from rate and rtt)."),
    gauge("unbloat_cake_capacity_estimate_bytes_per_second", |c| rate(c.capacity_estimate),
        "cake's estimate of the link's capacity (its bandwidth unless autorate-ingress)."),
];

fn cake_items<'a>(sides: &[Side<'a>]) -> Vec<(String, &'a CakeStats)> {
    sides
        .iter()
        .filter_map(|s| {
            let (_, stats) = s.root()?.cake()?;
            Some((s.labels(&[]), stats?))
        })
        .collect()
}

/// cake per tin: tc's table under `tc -s qdisc show` (thresh, target, pk_delay, ...).
#[rustfmt::skip]
static TIN_METRICS: &[Metric<CakeTin>] = &[
    counter("unbloat_cake_tin_sent_bytes_total", |t| int(t.sent_bytes),
        "Bytes that entered the tin (cake counts its per-tin \"sent\" at enqueue: dropped packets are in it)."),
    counter("unbloat_cake_tin_sent_packets_total", |t| int(t.sent_packets),
        "Packets that entered the tin (cake counts its per-tin \"sent\" at enqueue: dropped packets are in it)."),
    counter("unbloat_cake_tin_drops_total", |t| int(t.drops),
        "Packets the tin dropped (AQM and overflow)."),
    counter("unbloat_cake_tin_ecn_marks_total", |t| int(t.ecn_mark),
        "Packets the tin marked with ECN CE instead of dropping."),
    counter("unbloat_cake_tin_ack_drops_total", |t| int(t.ack_drops),
        "Redundant TCP ACKs the ACK filter dropped."),
    gauge("unbloat_cake_tin_backlog_bytes", |t| int(t.backlog_bytes),
        "Bytes queued in the tin."),
    gauge("unbloat_cake_tin_peak_delay_seconds", |t| time(t.peak_delay),
        "Peak queueing delay in the tin (a decaying maximum, tc's pk_delay)."),
    gauge("unbloat_cake_tin_average_delay_seconds", |t| time(t.avg_delay),
        "Average queueing delay in the tin (a moving average, tc's av_delay; kept while idle)."),
    gauge("unbloat_cake_tin_base_delay_seconds", |t| time(t.base_delay),
        "Queueing delay of the tin's sparse flows (tc's sp_delay)."),
    gauge("unbloat_cake_tin_target_seconds", |t| time(t.target),
        "The tin's AQM target delay."),
    gauge("unbloat_cake_tin_interval_seconds", |t| time(t.interval),
        "The tin's AQM interval."),
    gauge("unbloat_cake_tin_threshold_rate_bytes_per_second", |t| rate(t.threshold_rate),
        "The tin's share of the rate when all tins are busy (tc's thresh)."),
    gauge("unbloat_cake_tin_sparse_flows", |t| int(t.sparse_flows),
        "Sparse flows (short, low-rate) queued in the tin."),
    gauge("unbloat_cake_tin_bulk_flows", |t| int(t.bulk_flows),
        "Bulk flows (long-running) queued in the tin."),
    gauge("unbloat_cake_tin_unresponsive_flows", |t| int(t.unresponsive_flows),
        "Flows in the tin that do not slow down when marked or dropped."),
    gauge("unbloat_cake_tin_max_packet_bytes", |t| int(t.max_pkt_len),
        "The largest packet the tin has seen."),
    counter("unbloat_cake_tin_way_indirect_hits_total", |t| int(t.way_indirect_hits),
        "Flow lookups that found their queue in another way of the set-associative hash."),
    counter("unbloat_cake_tin_way_misses_total", |t| int(t.way_misses),
        "Flow lookups that found no queue and took a free one."),
    counter("unbloat_cake_tin_way_collisions_total", |t| int(t.way_collisions),
        "Flow lookups that found no free queue and shared one with another flow."),
];

fn tin_items<'a>(sides: &[Side<'a>]) -> Vec<(String, &'a CakeTin)> {
    let mut out = Vec::new();
    for s in sides {
        let Some((options, Some(stats))) = s.root().and_then(Qdisc::cake) else {
            continue;
        };
        for (i, tin) in stats.tins.iter().enumerate() {
            let name = tin_label(options.diffserv, i);
            out.push((s.labels(&[("tin", &name)]), tin));
        }
    }
    out
}

/// Every fq_codel on a shaped device: one under each leaf class of unbloat's HTB tree, or one
/// at the root.
#[rustfmt::skip]
static FQ_CODEL_METRICS: &[Metric<Qdisc>] = &[
    counter("unbloat_fq_codel_sent_bytes_total", |q| qstat(q, |s| s.bytes),
        "Bytes the fq_codel sent."),
    counter("unbloat_fq_codel_sent_packets_total", |q| qstat(q, |s| s.packets),
        "Packets the fq_codel sent."),
    counter("unbloat_fq_codel_drops_total", |q| qstat(q, |s| s.drops),
        "Packets the fq_codel dropped (CoDel and overflow)."),
    gauge("unbloat_fq_codel_backlog_bytes", |q| qstat(q, |s| s.backlog),
        "Bytes queued in the fq_codel."),
    gauge("unbloat_fq_codel_backlog_packets", |q| qstat(q, |s| s.qlen),
        "Packets queued in the fq_codel."),
    counter("unbloat_fq_codel_drop_overlimit_total", |q| fq(q, |s| s.drop_overlimit),
        "Packets dropped because the fq_codel was full (limit or memory_limit), not by CoDel."),
    counter("unbloat_fq_codel_ecn_marks_total", |q| fq(q, |s| s.ecn_mark),
        "Packets CoDel marked with ECN CE instead of dropping."),
    counter("unbloat_fq_codel_new_flows_total", |q| fq(q, |s| s.new_flow_count),
        "Flows that arrived at an empty queue (tc's new_flow_count)."),
    gauge("unbloat_fq_codel_flows_new", |q| fq(q, |s| s.new_flows_len),
        "Flows in the new (sparse, served first) list."),
    gauge("unbloat_fq_codel_flows_old", |q| fq(q, |s| s.old_flows_len),
        "Flows in the old (bulk) list."),
    gauge("unbloat_fq_codel_max_packet_bytes", |q| fq(q, |s| s.maxpacket),
        "The largest packet the fq_codel has seen (tc's maxpacket)."),
];

fn fq_codel_items<'a>(sides: &[Side<'a>]) -> Vec<(String, &'a Qdisc)> {
    let mut out = Vec::new();
    for s in sides.iter().filter(|s| s.root().is_some()) {
        let mut qs: Vec<&Qdisc> = s
            .dev
            .qdiscs
            .iter()
            .filter(|q| q.fq_codel().is_some() && !q.is_kernel_default())
            .collect();
        // tc lists them in hash order; by handle they follow the classes (110:, 120:, 130:).
        qs.sort_by_key(|q| q.handle);
        for q in qs {
            let class = q
                .parent
                .map_or_else(|| "root".to_string(), |p| p.to_string());
            out.push((s.labels(&[("class", &class)]), q));
        }
    }
    out
}

/// HTB's classes: counters, and the rate and ceil they were given.
#[rustfmt::skip]
static HTB_CLASS_METRICS: &[Metric<Class>] = &[
    counter("unbloat_htb_class_sent_bytes_total", |c| cstat(c, |s| s.bytes),
        "Bytes the HTB class sent."),
    counter("unbloat_htb_class_sent_packets_total", |c| cstat(c, |s| s.packets),
        "Packets the HTB class sent."),
    counter("unbloat_htb_class_drops_total", |c| cstat(c, |s| s.drops),
        "Packets the HTB class dropped (its leaf qdisc counts its own, e.g. fq_codel's)."),
    counter("unbloat_htb_class_overlimits_total", |c| cstat(c, |s| s.overlimits),
        "Times the HTB class was over its rate when asked to send."),
    gauge("unbloat_htb_class_backlog_bytes", |c| cstat(c, |s| s.backlog_bytes),
        "Bytes queued in the HTB class."),
    gauge("unbloat_htb_class_backlog_packets", |c| cstat(c, |s| s.backlog_packets),
        "Packets queued in the HTB class."),
    counter("unbloat_htb_class_lended_total", |c| c.htb()?.lended.and_then(int),
        "Packets the HTB class sent within its own rate (tc's lended)."),
    counter("unbloat_htb_class_borrowed_total", |c| c.htb()?.borrowed.and_then(int),
        "Packets the HTB class sent on rate borrowed from its parent (tc's borrowed)."),
    gauge("unbloat_htb_class_rate_bytes_per_second", |c| rate(c.htb()?.rate),
        "The rate the HTB class is guaranteed."),
    gauge("unbloat_htb_class_ceil_bytes_per_second", |c| rate(c.htb()?.ceil),
        "The most the HTB class may send, borrowing."),
];

fn htb_class_items<'a>(sides: &[Side<'a>]) -> Vec<(String, &'a Class)> {
    let mut out = Vec::new();
    for s in sides.iter().filter(|s| s.root().is_some()) {
        let mut classes: Vec<&Class> = s.dev.classes.iter().filter(|c| c.htb().is_some()).collect();
        // The root class first, then by class id (tc lists them in hash order), as status does.
        classes.sort_by_key(|c| (c.parent.is_some(), c.handle));
        for c in classes {
            out.push((s.labels(&[("class", &c.handle.to_string())]), c));
        }
    }
    out
}

static REAPPLIES: Family = Family {
    name: "unbloat_daemon_reapplies_total",
    help: "Times the daemon applied the interface's shaping again (link event, reload).",
    kind: Kind::Counter,
};
static FAILURES: Family = Family {
    name: "unbloat_daemon_apply_failures_total",
    help: "Times applying the interface's shaping failed.",
    kind: Kind::Counter,
};
static LINK_EVENTS: Family = Family {
    name: "unbloat_daemon_link_events_total",
    help: "Link events (up, down, new, gone) the daemon received.",
    kind: Kind::Counter,
};
static RELOADS: Family = Family {
    name: "unbloat_daemon_reloads_total",
    help: "Reloads of the configuration (SIGHUP or unbloat reload).",
    kind: Kind::Counter,
};
static RELOAD_FAILURES: Family = Family {
    name: "unbloat_daemon_reload_failures_total",
    help: "Reloads that failed (the configuration did not read or apply).",
    kind: Kind::Counter,
};
static START_TIME: Family = Family {
    name: "unbloat_daemon_start_time_seconds",
    help: "When the daemon started, in Unix seconds.",
    kind: Kind::Gauge,
};
static LAST_APPLY: Family = Family {
    name: "unbloat_daemon_last_apply_time_seconds",
    help: "When an apply last succeeded, in Unix seconds.",
    kind: Kind::Gauge,
};

/// The daemon's counters. Every interface has its per-interface counters, 0 until something
/// happens, so that `increase()` sees the first failure (a series that appears at 1 shows none).
fn write_daemon(out: &mut String, samples: &[Sample], d: &DaemonCounters) {
    let ifaces: BTreeSet<&str> = samples
        .iter()
        .map(|s| s.iface.as_str())
        .chain(d.reapplies.keys().map(String::as_str))
        .chain(d.failures.keys().map(String::as_str))
        .collect();
    let per_iface = |counts: &BTreeMap<String, u64>| -> Vec<(String, Value)> {
        ifaces
            .iter()
            .map(|i| {
                let n = counts.get(*i).copied().unwrap_or(0);
                (labels(&[("iface", i)]), Value::Int(n))
            })
            .collect()
    };
    let one = |n: u64| vec![(String::new(), Value::Int(n))];
    write_family(out, &REAPPLIES, &per_iface(&d.reapplies));
    write_family(out, &FAILURES, &per_iface(&d.failures));
    write_family(out, &LINK_EVENTS, &one(d.link_events));
    write_family(out, &RELOADS, &one(d.reloads));
    write_family(out, &RELOAD_FAILURES, &one(d.reload_failures));
    write_family(out, &START_TIME, &one(d.start_unix));
    if let Some(t) = d.last_apply_unix {
        write_family(out, &LAST_APPLY, &one(t));
    }
    #[cfg(feature = "networks")]
    write_family(out, &NETWORK, &network_samples(d));
}

#[cfg(feature = "networks")]
static NETWORK: Family = Family {
    name: "unbloat_daemon_network_info",
    help: "The network an interface is on (network empty: unknown), the shaping it gets (network, interface, none), its gateway's MAC (empty: not resolved) and on Wi-Fi the SSID and access point it is associated with (empty: none).",
    kind: Kind::Gauge,
};

#[cfg(feature = "networks")]
fn network_samples(d: &DaemonCounters) -> Vec<(String, Value)> {
    d.networks
        .iter()
        .map(|(iface, s)| {
            let shaping = match s.shaping {
                crate::seen::Shaping::Network => "network",
                crate::seen::Shaping::Interface => "interface",
                crate::seen::Shaping::None => "none",
            };
            let l = labels(&[
                ("iface", iface),
                ("network", s.network.as_deref().unwrap_or("")),
                ("shaping", shaping),
                ("gateway_mac", s.mac.as_deref().unwrap_or("")),
                ("ssid", s.ssid.as_deref().unwrap_or("")),
                ("bssid", s.bssid.as_deref().unwrap_or("")),
            ]);
            (l, Value::Int(1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label_value("two\nlines"), "two\\nlines");
        assert_eq!(escape_label_value("eth0.7"), "eth0.7");
        assert_eq!(
            labels(&[("iface", "x\"y"), ("direction", "up")]),
            r#"{iface="x\"y",direction="up"}"#
        );
        assert_eq!(labels(&[]), "");
        assert_eq!(escape_help("a\\b\nc \"q\""), "a\\\\b\\nc \"q\"");
    }

    #[test]
    fn units_convert_exactly() {
        let t = |us| value_text(Value::Time(Time::from_micros(us)));
        assert_eq!(t(21_073), "0.021073");
        assert_eq!(t(100_000), "0.1");
        assert_eq!(t(0), "0");
        assert_eq!(t(2_500_001), "2.500001");
        let r = |bps| value_text(Value::Rate(Rate::from_bits_per_sec(bps)));
        assert_eq!(r(19_950_000), "2493750");
        assert_eq!(r(9), "1.125");
        assert_eq!(r(12), "1.5");
        assert_eq!(value_text(Value::Int(u64::MAX)), "18446744073709551615");
    }

    #[test]
    fn tin_labels_follow_tc_order() {
        let four = |m| (0..4).map(|i| tin_label(m, i)).collect::<Vec<_>>();
        assert_eq!(
            four(Diffserv::Diffserv4),
            ["bulk", "best_effort", "video", "voice"]
        );
        assert_eq!(
            four(Diffserv::Diffserv3),
            ["bulk", "best_effort", "voice", "tin3"]
        );
        assert_eq!(tin_label(Diffserv::Besteffort, 0), "best_effort");
        assert_eq!(tin_label(Diffserv::Diffserv8, 7), "tin7");
        assert_eq!(tin_label(Diffserv::Precedence, 0), "tin0");
    }

    #[test]
    fn daemon_counters_alone_give_each_family_once_with_zeros_for_quiet_interfaces() {
        let mut d = DaemonCounters {
            start_unix: 1_700_000_000,
            link_events: 3,
            ..DaemonCounters::default()
        };
        d.reapplies.insert("eth0".into(), 2);
        d.failures.insert("eth1".into(), 1);
        let text = render(&[], &d);
        for l in [
            "unbloat_daemon_reapplies_total{iface=\"eth0\"} 2",
            "unbloat_daemon_reapplies_total{iface=\"eth1\"} 0",
            "unbloat_daemon_apply_failures_total{iface=\"eth0\"} 0",
            "unbloat_daemon_apply_failures_total{iface=\"eth1\"} 1",
            "unbloat_daemon_link_events_total 3",
            "unbloat_daemon_start_time_seconds 1700000000",
        ] {
            assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
        }
        let types = text.matches("# TYPE unbloat_daemon_reapplies_total counter");
        assert_eq!(types.count(), 1);
        assert!(!text.contains("last_apply"), "no apply yet:\n{text}");
        assert!(
            !text.contains("unbloat_cake"),
            "no cake without samples:\n{text}"
        );
    }

    #[cfg(feature = "networks")]
    #[test]
    fn the_network_of_each_interface_is_a_labelled_gauge() {
        use crate::seen::{Seen, Shaping};
        let mut d = DaemonCounters::default();
        let seen = |network: Option<&str>, shaping, mac: Option<&str>| Seen {
            network: network.map(str::to_string),
            shaping,
            gateway: None,
            mac: mac.map(str::to_string),
            ssid: None,
            bssid: None,
            why: String::new(),
        };
        d.networks.insert(
            "wlan0".into(),
            seen(Some("home"), Shaping::Network, Some("aa:bb:cc:dd:ee:01")),
        );
        d.networks
            .insert("eth0".into(), seen(None, Shaping::None, None));
        let mut cafe = seen(None, Shaping::Interface, None);
        cafe.ssid = Some("Caf\\x22\"".into());
        cafe.bssid = Some("02:00:00:00:09:00".into());
        d.networks.insert("wlan1".into(), cafe);
        let text = render(&[], &d);
        for l in [
            "# TYPE unbloat_daemon_network_info gauge",
            "unbloat_daemon_network_info{iface=\"eth0\",network=\"\",shaping=\"none\",gateway_mac=\"\",ssid=\"\",bssid=\"\"} 1",
            "unbloat_daemon_network_info{iface=\"wlan0\",network=\"home\",shaping=\"network\",gateway_mac=\"aa:bb:cc:dd:ee:01\",ssid=\"\",bssid=\"\"} 1",
            "unbloat_daemon_network_info{iface=\"wlan1\",network=\"\",shaping=\"interface\",gateway_mac=\"\",ssid=\"Caf\\\\x22\\\"\",bssid=\"02:00:00:00:09:00\"} 1",
        ] {
            assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
        }
    }
}
