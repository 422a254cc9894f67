//! What the page's graphs draw, read fresh at each poll: every shaped interface as the kernel
//! reports it, with the same reads as a Prometheus scrape (over rtnetlink, [`tcnl::read_plan`],
//! the records of the run directory naming the interfaces) and the same tin names
//! ([`crate::metrics::tin_label`]).
//!
//! The kernel's counters are sent as they are (totals since the qdisc was created); the page
//! turns two polls into rates. Delays are cake's own per-tin estimates (peak, average, and the
//! sparse flows' "base" delay), in microseconds.

use serde::Serialize;
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_shaper::tcjson::{DeviceState, LiveState};
use unbloat_system::rtnl::Rtnl;
use unbloat_system::state::{now_unix, StateDir};
use unbloat_system::tcnl;

use crate::metrics::{tin_label, Sample};

#[derive(Debug, Clone, Serialize)]
pub struct Live {
    /// When the kernel was read (milliseconds since the Unix epoch): the page's time axis.
    pub unix_ms: u64,
    pub interfaces: Vec<LiveIface>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LiveIface {
    pub iface: String,
    /// When its counters were read (ms since the epoch): the middle of the `tc` run, so that a
    /// slow read (a busy machine) does not skew the rates the page computes from two polls.
    pub unix_ms: u64,
    pub sides: Vec<LiveSide>,
    /// Why it could not be read this time (gone between the list and the read).
    pub error: Option<String>,
}

/// One direction: `up` is the WAN's root qdisc, `down` the IFB's. The qdisc's `sent_bytes` is
/// what left it; a cake tin's `sent_bytes` is what entered the tin (sch_cake.c counts a tin's
/// bytes in `cake_enqueue`), dropped packets included: the page shows it as "offered".
#[derive(Debug, Clone, Serialize)]
pub struct LiveSide {
    pub direction: &'static str,
    pub dev: String,
    /// The root qdisc's kind (`cake`, `htb`, or whatever else is there).
    pub qdisc: String,
    /// The planned shaper rate, bits per second.
    pub rate_bps: Option<u64>,
    pub sent_bytes: u64,
    pub drops: u64,
    pub backlog_bytes: u64,
    /// cake's tins, in the order cake dumps them; empty for other qdiscs.
    pub tins: Vec<LiveTin>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LiveTin {
    pub name: String,
    pub sent_bytes: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub backlog_bytes: u64,
    pub peak_delay_us: u64,
    pub avg_delay_us: u64,
    pub base_delay_us: u64,
}

/// Every interface the run directory's records name, read from the kernel now. An interface
/// that cannot be read keeps its place with the reason.
pub fn read(state: &StateDir) -> Live {
    let rtnl = Rtnl::open();
    let mut interfaces = vec![];
    for iface in state.list().unwrap_or_default() {
        let Ok(Some(record)) = state.load(&iface) else {
            continue;
        };
        let name = iface.to_string();
        let before = now_ms();
        let read = match &rtnl {
            Ok(rtnl) => tcnl::read_plan(rtnl, &record.plan).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let unix_ms = before + (now_ms().saturating_sub(before)) / 2;
        let iface = match read {
            Ok(live) => of_sample(
                &Sample {
                    iface: name,
                    live,
                    plan: Some(record.plan),
                },
                unix_ms,
            ),
            Err(e) => LiveIface {
                iface: name,
                unix_ms,
                sides: vec![],
                error: Some(e),
            },
        };
        interfaces.push(iface);
    }
    Live {
        unix_ms: now_ms(),
        interfaces,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(now_unix() * 1000, |d| d.as_millis() as u64)
}

/// The page's view of one sample read at `unix_ms` (pure).
pub fn of_sample(s: &Sample, unix_ms: u64) -> LiveIface {
    let LiveState { wan, ifb, .. } = &s.live;
    let mut sides = vec![side("up", wan, rate(s.plan.as_ref(), "up"))];
    if let Some(ifb) = ifb {
        sides.push(side("down", ifb, rate(s.plan.as_ref(), "down")));
    }
    LiveIface {
        iface: s.iface.clone(),
        unix_ms,
        sides,
        error: None,
    }
}

fn rate(plan: Option<&Plan>, direction: &str) -> Option<u64> {
    let plan = plan?;
    let root = match direction {
        "up" => &plan.egress.as_ref()?.root,
        _ => &plan.ingress.as_ref()?.shaping.root,
    };
    let rate = match root {
        RootQdisc::Cake(p) => p.bandwidth,
        RootQdisc::Htb(t) => t.classes.first()?.rate,
    };
    Some(rate.bits_per_sec())
}

fn side(direction: &'static str, dev: &DeviceState, rate_bps: Option<u64>) -> LiveSide {
    let root = dev.root();
    let stats = root.and_then(|q| q.stats).unwrap_or_default();
    let tins = root
        .and_then(|q| q.cake())
        .and_then(|(options, stats)| Some((options.diffserv, stats?)))
        .map(|(mode, stats)| {
            stats
                .tins
                .iter()
                .enumerate()
                .map(|(i, t)| LiveTin {
                    name: tin_label(mode, i),
                    sent_bytes: t.sent_bytes,
                    drops: t.drops,
                    ecn_marks: t.ecn_mark,
                    backlog_bytes: t.backlog_bytes,
                    peak_delay_us: t.peak_delay.micros(),
                    avg_delay_us: t.avg_delay.micros(),
                    base_delay_us: t.base_delay.micros(),
                })
                .collect()
        })
        .unwrap_or_default();
    LiveSide {
        direction,
        dev: dev.dev.to_string(),
        qdisc: root.map_or_else(|| "none".to_string(), |q| q.kind.clone()),
        rate_bps,
        sent_bytes: stats.bytes,
        drops: stats.drops,
        backlog_bytes: stats.backlog,
        tins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::tcjson::LiveTexts;

    #[test]
    fn a_cake_qdisc_gives_its_tins_with_names_delays_and_counters() {
        let qdisc = include_str!("../../../../fixtures/tc/cake-diffserv3.qdisc.json");
        let texts = LiveTexts {
            qdisc: qdisc.to_string(),
            ..LiveTexts::default()
        };
        let wan = "eth0".parse().unwrap();
        let sample = Sample {
            iface: "eth0".into(),
            live: LiveState::parse(&wan, &texts).unwrap(),
            plan: None,
        };
        let view = of_sample(&sample, 1);
        assert_eq!(view.sides.len(), 1, "no IFB: the upload only");
        let up = &view.sides[0];
        assert_eq!((up.direction, up.qdisc.as_str()), ("up", "cake"));
        assert_eq!((up.sent_bytes, up.drops), (24_288_771, 69));
        let names: Vec<&str> = up.tins.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["bulk", "best_effort", "voice"]);
        let bulk = &up.tins[0];
        assert_eq!(
            (
                bulk.peak_delay_us,
                bulk.avg_delay_us,
                bulk.base_delay_us,
                bulk.drops
            ),
            (26_766, 15_214, 5_856, 17)
        );
        assert_eq!(up.rate_bps, None, "no plan, no planned rate");
    }
}
