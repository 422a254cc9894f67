//! cake: shaper, DSCP tins, flow isolation and AQM (COBALT) in one qdisc.
//!
//! Heads up! Man page `tc-cake(8)`; kernel `net/sched/sch_cake.c`; tc's grammar in iproute2
//! `tc/q_cake.c`; the AQM is CoDel (RFC 8289) combined with BLUE, flow queueing after FQ-CoDel
//! (RFC 8290, DRR++). What cake reports in `tc -j qdisc` uses the same words as below, which is
//! why [`CakeParams::words`] writes every parameter explicitly, defaults included: the script says
//! exactly what the kernel will hold.
//!
//! unbloat's defaults, and why (measured with `unbloat-lab bench lab`, rrul, issue 4's note):
//! - `besteffort`: one tin, as sqm-scripts' piece_of_cake. DSCP marks from the internet mean
//!   little, and under diffserv3 a marked bulk flow takes the voice tin's priority: with rrul's
//!   EF and CS5 streams, best-effort probes waited behind them (adsl p50 30 ms against 21 ms,
//!   vdsl2 p99 19 ms against 9 ms). `--diffserv diffserv3` (or 4, 8) for a network that marks.
//! - Isolation and `nat` follow the machine unless told ([`crate::fairness`], issue 18): on a
//!   router (IPv4 or IPv6 forwarding on) `dual-host` (dual-srchost egress, dual-dsthost ingress),
//!   with `nat` when it masquerades or source-NATs out of the WAN, so a host's one stream keeps
//!   its half against another host's eight even when all go to one far end (where
//!   `triple-isolate` folds the hosts into one); on a machine that forwards nothing, cake's own
//!   `triple-isolate` and `nonat` (the NAT lookup only helps where conntrack holds the
//!   translation). The options here are the user's merged over those defaults; a spec warning
//!   says when host isolation is asked for with nat neither on nor explicitly off.
//! - `ingress` mode on the IFB side from 4 Mbit/s (seed 001's slow-link line): drops count
//!   against the rate, so the backlog in the ISP's buffer drains sooner after a burst (vdsl2 p99
//!   9 ms against 21 ms without). Below it TCP runs on windows of a few packets and needs drops
//!   of several percent, and charging them cost dsl-2002 a quarter of its download (70 % of the
//!   theoretical goodput against 93 %); `egress` on the WAN device.
//! - cake's default of its ACK filter (off): why, with the measurements, beside that default in
//!   [`params::params`].
//! - `nowash`, `split-gso`, `rtt 100ms` (cake's "internet"): cake's defaults, changed only when
//!   the user says so.

pub mod attr;
pub mod params;
pub mod words;

pub use params::{params, CakeOptions, CakeParams, CAKE_DEFAULT_RTT};

use crate::model::{Diffserv, Direction, FlowMode};
use crate::options::{option_name, Isolation};
use std::fmt;
use std::str::FromStr;
use unbloat_units::{Rate, Time};
/// The shortest rtt: tc sends no rtt at all for 0 (q_cake.c `if (interval) addattr_l(...
/// TCA_CAKE_RTT ...)`), so the kernel would keep the one it had (100 ms on a new qdisc) and the
/// plan would not be what runs. (sch_cake.c itself raises a 0 it is sent to 1 us.)
pub const RTT_MIN: Time = Time::from_micros(1);
/// The longest rtt: cake keeps it as a u32 count of microseconds (sch_cake.c `q->interval =
/// nla_get_u32(tb[TCA_CAKE_RTT])`; tc's `get_time` stores an unsigned int, and wraps a longer
/// time silently). u32::MAX us is 4294.967295 s; whole seconds below it, so the limit reads as
/// it is written. cake's own longest preset, `interplanetary`, is 3600 s.
pub const RTT_MAX: Time = Time::from_secs(4294);
/// cake's `memlimit` in bytes: tc's `get_size` holds an unsigned int and refuses more
/// (lib/utils_math.c), and sch_cake.c reads `TCA_CAKE_MEMORY` as a u32. A memlimit of 0 is not
/// sent at all (q_cake.c `if (memlimit)`): cake would size its buffer itself, not as planned.
pub const MEMLIMIT_MAX: u64 = u32::MAX as u64;

/// Why a cake option cannot be used. The message names the option and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CakeError {
    #[error("{} {value}: {why}", option_name(.option))]
    Useless {
        option: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("{} {value}: out of range {range} ({why})", option_name(.option))]
    Range {
        option: &'static str,
        value: String,
        range: String,
        why: &'static str,
    },
}
impl CakeError {
    /// The config key the error is about.
    pub fn option(&self) -> &'static str {
        match self {
            CakeError::Range { option, .. } | CakeError::Useless { option, .. } => option,
        }
    }
}

/// From this download rate up, cake's `ingress` mode is on by default.
pub const INGRESS_MODE_FROM: Rate = Rate::from_mbit(4);

impl Diffserv {
    /// cake's keyword, and the value of `diffserv` in `tc -j`.
    pub fn keyword(self) -> &'static str {
        match self {
            Diffserv::Besteffort => "besteffort",
            Diffserv::Diffserv3 => "diffserv3",
            Diffserv::Diffserv4 => "diffserv4",
            Diffserv::Diffserv8 => "diffserv8",
            Diffserv::Precedence => "precedence",
        }
    }
    /// How many tins cake creates (sch_cake.c `cake_config_*`).
    pub fn tins(self) -> usize {
        match self {
            Diffserv::Besteffort => 1,
            Diffserv::Diffserv3 => 3,
            Diffserv::Diffserv4 => 4,
            Diffserv::Diffserv8 | Diffserv::Precedence => 8,
        }
    }
}

impl fmt::Display for Diffserv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

impl FromStr for Diffserv {
    type Err = String;
    fn from_str(s: &str) -> Result<Diffserv, String> {
        words::DIFFSERV
            .into_iter()
            .find(|d| d.keyword() == s)
            .ok_or_else(|| format!("unknown diffserv mode {:?}; use besteffort, diffserv3, diffserv4, diffserv8 or precedence", crate::clip::clip(s)))
    }
}

impl FlowMode {
    /// cake's keyword, and the value of `flowmode` in `tc -j`.
    pub fn keyword(self) -> &'static str {
        match self {
            FlowMode::Flowblind => "flowblind",
            FlowMode::Srchost => "srchost",
            FlowMode::Dsthost => "dsthost",
            FlowMode::Hosts => "hosts",
            FlowMode::Flows => "flows",
            FlowMode::DualSrchost => "dual-srchost",
            FlowMode::DualDsthost => "dual-dsthost",
            FlowMode::TripleIsolate => "triple-isolate",
        }
    }

    /// The user's isolation for one direction: `dual-host` is dual-srchost on egress (the LAN
    /// hosts are the sources) and dual-dsthost on ingress (they are the destinations).
    pub fn for_direction(iso: Isolation, dir: Direction) -> FlowMode {
        match iso {
            Isolation::Flows => FlowMode::Flows,
            Isolation::Hosts => FlowMode::Hosts,
            Isolation::Srchost => FlowMode::Srchost,
            Isolation::Dsthost => FlowMode::Dsthost,
            Isolation::DualSrchost => FlowMode::DualSrchost,
            Isolation::DualDsthost => FlowMode::DualDsthost,
            Isolation::TripleIsolate => FlowMode::TripleIsolate,
            Isolation::Flowblind => FlowMode::Flowblind,
            Isolation::DualHost => match dir {
                Direction::Egress => FlowMode::DualSrchost,
                Direction::Ingress => FlowMode::DualDsthost,
            },
        }
    }

    /// Modes where fairness is between hosts, which behind NAT needs cake's `nat`.
    pub fn is_per_host(self) -> bool {
        !matches!(self, FlowMode::Flowblind | FlowMode::Flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linklayer::LinkPreset;
    use crate::options::ShapeOptions;

    #[test]
    fn defaults_follow_the_field() {
        let o = ShapeOptions::default();
        let l = LinkPreset::Ethernet.link_layer();
        let e = params(Rate::from_mbit(20), &o, Direction::Egress, l).expect("valid");
        let i = params(Rate::from_mbit(80), &o, Direction::Ingress, l).expect("valid");
        assert_eq!(e.diffserv, Diffserv::Besteffort);
        assert_eq!(e.flow_mode, FlowMode::TripleIsolate);
        assert!(!e.nat && !e.wash && !e.ingress);
        assert!(
            i.ingress,
            "cake's ingress keyword on the IFB side at 80mbit"
        );
        assert_eq!(
            e.words().join(" "),
            "bandwidth 20mbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 38 mpu 84 noatm"
        );
    }

    #[test]
    fn ingress_mode_from_4mbit_unless_told() {
        let l = LinkPreset::PppoaVcmux.link_layer();
        let at = |kbit: u64, o: &ShapeOptions| {
            params(Rate::from_kbit(kbit), o, Direction::Ingress, l)
                .expect("valid")
                .ingress
        };
        let none = ShapeOptions::default();
        assert!(!at(760, &none) && !at(3999, &none));
        assert!(at(4000, &none) && at(6650, &none));
        let on = ShapeOptions {
            ingress_keyword: Some(true),
            ..Default::default()
        };
        let off = ShapeOptions {
            ingress_keyword: Some(false),
            ..Default::default()
        };
        assert!(at(760, &on) && !at(80_000, &off));
    }

    #[test]
    fn dual_host_flips_with_direction() {
        let o = ShapeOptions {
            isolation: Some(Isolation::DualHost),
            nat: Some(true),
            ..Default::default()
        };
        let l = LinkPreset::Docsis.link_layer();
        assert_eq!(
            params(Rate::from_mbit(5), &o, Direction::Egress, l)
                .expect("valid")
                .flow_mode,
            FlowMode::DualSrchost
        );
        assert_eq!(
            params(Rate::from_mbit(5), &o, Direction::Ingress, l)
                .expect("valid")
                .flow_mode,
            FlowMode::DualDsthost
        );
    }

    #[test]
    fn keywords_parse_back() {
        for d in [
            "besteffort",
            "diffserv3",
            "diffserv4",
            "diffserv8",
            "precedence",
        ] {
            assert_eq!(d.parse::<Diffserv>().unwrap().keyword(), d);
        }
        assert!("diffserv5".parse::<Diffserv>().is_err());
    }

    #[test]
    fn rtt_and_memlimit_outside_what_the_kernel_holds_are_refused() {
        let l = LinkPreset::Ethernet.link_layer();
        let err = |o: ShapeOptions| {
            params(Rate::from_mbit(10), &o, Direction::Egress, l)
                .expect_err("refused")
                .to_string()
        };
        let rtt = |t: Time| ShapeOptions {
            rtt: Some(t),
            ..Default::default()
        };
        assert_eq!(
            err(rtt(Time::from_secs(5000))),
            "--rtt 5000s: out of range 1us..4294s (cake holds rtt as a 32-bit count of \
             microseconds, and tc does not send 0)"
        );
        assert!(err(rtt(Time::from_micros(0))).starts_with("--rtt 0us: out of range 1us..4294s"));
        let mem = |b: u64| ShapeOptions {
            memlimit: Some(unbloat_units::Size::from_bytes(b)),
            ..Default::default()
        };
        let e = err(mem(0));
        assert!(e.starts_with("memlimit 0"), "{e}");
        assert!(e.contains("out of range 1..4294967295 bytes"), "{e}");
        assert!(err(mem(1 << 32)).contains("out of range 1..4294967295 bytes"));
        // The limits themselves are fine, and so is cake's longest preset.
        for o in [
            rtt(RTT_MIN),
            rtt(RTT_MAX),
            rtt(Time::from_secs(3600)),
            mem(1),
            mem(MEMLIMIT_MAX),
        ] {
            assert!(params(Rate::from_mbit(10), &o, Direction::Egress, l).is_ok());
        }
    }
}
