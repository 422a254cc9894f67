//! cake's parameters, each declared once ([`PARAMS`]): the words that set it on the tc line, how
//! the kernel reports it back (`tc -j`'s key in [`CakeOptions`], its netlink attribute in
//! [`CakeOptions::from_attrs`]), how a mismatch is named, how `unbloat status` and a plan's
//! summary show it, and whether the kernel keeps it once set. Its default, and why, is in
//! [`params`]. The script ([`CakeParams::words`]), the read-back check (`verify`), `status`
//! and the in-place change (`transition`) walk [`PARAMS`] and know no parameter by name.
//!
//! Adding a cake option: its field here in [`CakeParams`] (what is planned) and [`CakeOptions`]
//! (what is read back), its line in [`params`], [`CakeOptions::from_attrs`] and [`expected`],
//! its row in [`PARAMS`], and the option a user sets it with in `options/table.rs`.

use super::attr::{self, *};
use super::{CakeError, INGRESS_MODE_FROM, MEMLIMIT_MAX, RTT_MAX, RTT_MIN};
use crate::human::human_time;
use crate::linklayer::{Framing, LinkLayer};
use crate::model::{AckFilter, Diffserv, Direction, FlowMode};
use crate::options::{Isolation, ShapeOptions};
use crate::qdisc::netlink::OptionAttrs;
use crate::qdisc::setting::{Setting, Settings};
use crate::qdisc::tc_values::{bandwidth_or_unlimited, framing, micros, number_or_text};
use serde::{Deserialize, Serialize};
use unbloat_units::{Rate, Size, Time};

/// cake's default rtt, "internet" (tc/q_cake.c presets; sch_cake.c `q->interval = 100000`).
pub const CAKE_DEFAULT_RTT: Time = Time::from_millis(100);

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
    /// `fwmark MASK`: the mask of the firewall mark that picks a packet's tin; 0, not written:
    /// off. Left out of unbloat's records when off, so records written before it read back
    /// unchanged.
    #[serde(default, skip_serializing_if = "is_off")]
    pub fwmark: u32,
}

fn is_off(mask: &u32) -> bool {
    *mask == 0
}

/// cake's options as `tc -j` reports them (iproute2 tc/q_cake.c `cake_print_opt`), or as the
/// kernel's netlink answer holds them ([`CakeOptions::from_attrs`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CakeOptions {
    /// None when cake runs `unlimited` (no shaper).
    #[serde(deserialize_with = "bandwidth_or_unlimited")]
    pub bandwidth: Option<Rate>,
    pub diffserv: Diffserv,
    pub flowmode: FlowMode,
    pub nat: bool,
    pub wash: bool,
    pub ingress: bool,
    #[serde(rename = "ack-filter")]
    pub ack_filter: AckFilter,
    pub split_gso: bool,
    #[serde(deserialize_with = "micros")]
    pub rtt: Time,
    pub raw: bool,
    /// `noatm`/`atm`/`ptm`; tc leaves the key out in `raw` mode, which means no framing.
    #[serde(default, deserialize_with = "framing")]
    pub atm: Option<Framing>,
    #[serde(default)]
    pub overhead: i32,
    #[serde(default)]
    pub mpu: u32,
    #[serde(default, deserialize_with = "number_or_text")]
    pub fwmark: u64,
    /// Bytes, only when `memlimit` was set.
    #[serde(default)]
    pub memlimit: Option<u64>,
}

impl CakeOptions {
    /// The framing cake applies (none in raw mode, where tc omits `atm`).
    pub fn framing(&self) -> Framing {
        self.atm.unwrap_or(Framing::None)
    }

    /// `TCA_CAKE_*` (pkt_sched.h), read as `cake_print_opt` reads them.
    pub fn from_attrs(a: &dyn OptionAttrs) -> Result<CakeOptions, String> {
        let flag = |k| a.u32(k).unwrap_or(0) != 0;
        // TCA_CAKE_RAW is there (value 0) exactly when cake counts no overhead at all.
        let raw = a.has(RAW);
        let atm = match a.u32(ATM).unwrap_or(0) {
            ATM_ATM => Some(Framing::Atm),
            ATM_PTM => Some(Framing::Ptm),
            _ if raw => None,
            _ => Some(Framing::None),
        };
        let bandwidth = a.u64(BASE_RATE64).ok_or("no TCA_CAKE_BASE_RATE64")?;
        Ok(CakeOptions {
            bandwidth: (bandwidth != 0).then(|| Rate::from_bytes_per_sec(bandwidth)),
            diffserv: attr::diffserv(a.u32(DIFFSERV_MODE).unwrap_or(0))?,
            flowmode: attr::flow_mode(a.u32(FLOW_MODE).unwrap_or(0))?,
            nat: flag(NAT),
            wash: flag(WASH),
            ingress: flag(INGRESS),
            ack_filter: AckFilter::from_attr(a.u32(ACK_FILTER).unwrap_or(0))?,
            split_gso: flag(SPLIT_GSO),
            rtt: Time::from_micros(u64::from(a.u32(RTT).unwrap_or(0))),
            raw,
            atm,
            overhead: a.i32(OVERHEAD).unwrap_or(0),
            mpu: a.u32(MPU).unwrap_or(0),
            fwmark: u64::from(a.u32(FWMARK).unwrap_or(0)),
            memlimit: a.u32(MEMORY).filter(|&m| m != 0).map(u64::from),
        })
    }
}

/// cake's parameters for one direction from the merged options; `rate` is the direction's rate
/// (already checked by the spec), `link` its resolved compensation. Refuses an rtt or memlimit
/// the kernel cannot hold as written ([`RTT_MIN`], [`RTT_MAX`], [`MEMLIMIT_MAX`]). Each default
/// is unbloat's, for the reason its module documentation gives (`qdisc/cake.rs`).
pub fn params(
    rate: Rate,
    opts: &ShapeOptions,
    dir: Direction,
    link: LinkLayer,
) -> Result<CakeParams, CakeError> {
    let rtt = opts.rtt.unwrap_or(CAKE_DEFAULT_RTT);
    if !(RTT_MIN..=RTT_MAX).contains(&rtt) {
        return Err(CakeError::Range {
            option: "rtt",
            value: rtt.to_string(),
            range: format!("{RTT_MIN}..{RTT_MAX}"),
            why: "cake holds rtt as a 32-bit count of microseconds, and tc does not send 0",
        });
    }
    let diffserv = opts.diffserv.unwrap_or(Diffserv::Besteffort);
    let fwmark = opts.fwmark.unwrap_or(0);
    // sch_cake.c `cake_select_tin`: besteffort puts everything in its one tin before it looks
    // at the mark.
    if fwmark != 0 && diffserv == Diffserv::Besteffort {
        return Err(CakeError::Useless {
            option: "fwmark",
            value: format!("{fwmark:#x}"),
            why: "cake's besteffort has one tin, so a mark picks nothing; add --diffserv \
                  diffserv3, diffserv4 or diffserv8",
        });
    }
    if let Some(m) = opts.memlimit {
        if !(1..=MEMLIMIT_MAX).contains(&m.bytes()) {
            return Err(CakeError::Range {
                option: "memlimit",
                value: m.to_string(),
                range: format!("1..{MEMLIMIT_MAX} bytes"),
                why: "cake holds memlimit as a 32-bit byte count, and tc does not send 0",
            });
        }
    }
    Ok(CakeParams {
        bandwidth: rate,
        rtt,
        diffserv,
        flow_mode: FlowMode::for_direction(opts.isolation.unwrap_or(Isolation::TripleIsolate), dir),
        nat: opts.nat.unwrap_or(false),
        wash: opts.wash.unwrap_or(false),
        ingress: dir == Direction::Ingress
            && opts.ingress_keyword.unwrap_or(rate >= INGRESS_MODE_FROM),
        // cake's default, no-ack-filter. On adsl (9:1) the egress filter raised rrul's upload
        // from 79 % to 91 % of the theoretical goodput, but the stretch ACKs it leaves make the
        // server send bursts, and those queue in the modem's FIFO, upstream of the download
        // shaper: in five runs with and five without, the start-up peak went from 110-330 ms to
        // 170-480 ms and the p99 after the first 3 s from 43-51 ms to 54-120 ms. At docsis
        // rates it changed nothing measurable. The option is an upload key; `extra-ingress`
        // can ask for it on the download.
        ack_filter: opts.ack_filter.unwrap_or(AckFilter::Disabled),
        split_gso: opts.split_gso.unwrap_or(true),
        memlimit: opts.memlimit,
        link,
        fwmark,
    })
}

/// What the kernel reports back for `p`, in its own units (whole bytes per second).
pub fn expected(p: &CakeParams) -> CakeOptions {
    CakeOptions {
        bandwidth: Some(Rate::from_bytes_per_sec(p.bandwidth.bytes_per_sec())),
        diffserv: p.diffserv,
        flowmode: p.flow_mode,
        nat: p.nat,
        wash: p.wash,
        ingress: p.ingress,
        ack_filter: p.ack_filter,
        split_gso: p.split_gso,
        rtt: p.rtt,
        raw: p.link.raw,
        atm: Some(p.link.framing),
        overhead: p.link.overhead,
        mpu: p.link.mpu,
        fwmark: u64::from(p.fwmark),
        memlimit: p.memlimit.map(|m| m.bytes()),
    }
}

/// cake's ACK filter in its words, its `tc -j` value and its netlink value.
impl AckFilter {
    /// cake's keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            AckFilter::Disabled => "no-ack-filter",
            AckFilter::Enabled => "ack-filter",
            AckFilter::Aggressive => "ack-filter-aggressive",
        }
    }
    /// The value of `ack-filter` in `tc -j` (tc/q_cake.c `cake_print_opt`).
    pub fn json_value(self) -> &'static str {
        match self {
            AckFilter::Disabled => "disabled",
            AckFilter::Enabled => "enabled",
            AckFilter::Aggressive => "aggressive",
        }
    }
    /// `TCA_CAKE_ACK_FILTER`'s value (`enum { CAKE_ACK_NONE, CAKE_ACK_FILTER,
    /// CAKE_ACK_AGGRESSIVE }`).
    pub fn from_attr(n: u32) -> Result<AckFilter, String> {
        Ok(match n {
            0 => AckFilter::Disabled,
            1 => AckFilter::Enabled,
            2 => AckFilter::Aggressive,
            n => return Err(format!("ack-filter {n} unknown to this unbloat")),
        })
    }
}

/// One of cake's parameters: see the module's documentation.
pub struct Param {
    /// How a mismatch names it: `egress cake: overhead is 18, expected 26`.
    pub what: &'static str,
    /// Its words on the tc line, in this order.
    pub words: fn(&CakeParams) -> Vec<String>,
    /// The value read back, as a mismatch shows it.
    pub read: fn(&CakeOptions) -> String,
    /// Whether the read-back check compares it (a value unbloat leaves to cake is not).
    pub checked: fn(&CakeParams) -> bool,
    /// Its word in a plan's one-line summary, when it has one.
    pub summary: fn(&CakeParams) -> Option<String>,
    /// Its key and value in `unbloat status --json`.
    pub status: Option<(&'static str, StatusValue)>,
    /// Its text in `unbloat status`: which line, and the text (None: not shown).
    pub text: Option<(Line, StatusText)>,
    /// The kernel keeps it once set: going back is a replace, not a change (q_cake.c sends it
    /// only when set, and `cake_change` keeps what it is not sent).
    pub sticky: fn(&CakeParams) -> bool,
}

/// A parameter's value in `unbloat status --json`, from what the kernel reports.
pub type StatusValue = fn(&CakeOptions) -> Setting;
/// A parameter's words in `unbloat status`'s text, from what the kernel reports.
pub type StatusText = fn(&CakeOptions) -> Option<String>;

/// The line of `unbloat status` a parameter is shown on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// `shaped at 19.95 Mbit/s, rtt 100 ms, diffserv4, dual-srchost, nat`.
    Shaping,
    /// `link layer: overhead 26 bytes, mpu 72, ptm`.
    Link,
}

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_string()
}
fn word(b: bool, on: &str, off: &str) -> Vec<String> {
    vec![if b { on } else { off }.to_string()]
}
fn when(b: bool, text: &str) -> Option<String> {
    b.then(|| text.to_string())
}
const ALWAYS: fn(&CakeParams) -> bool = |_| true;
const NEVER: fn(&CakeParams) -> bool = |_| false;
const NO_SUMMARY: fn(&CakeParams) -> Option<String> = |_| None;

/// cake's parameters, in the order of the tc line (`bandwidth 19950kbit rtt 100ms diffserv3
/// dual-srchost nat nowash egress no-ack-filter split-gso overhead 26 mpu 64 ptm`): every one is
/// written, defaults included, so the script says exactly what the kernel will hold.
pub static PARAMS: &[Param] = &[
    Param {
        what: "bandwidth",
        words: |p| vec!["bandwidth".into(), p.bandwidth.to_string()],
        read: |o| o.bandwidth.map_or("unlimited".into(), |r| r.to_string()),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: None,
        text: None,
        sticky: NEVER,
    },
    Param {
        what: "rtt",
        words: |p| vec!["rtt".into(), p.rtt.to_string()],
        read: |o| o.rtt.to_string(),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("rtt_us", |o| Setting::Int(o.rtt.micros() as i64))),
        text: Some((Line::Shaping, |o| {
            Some(format!("rtt {}", human_time(o.rtt.micros())))
        })),
        sticky: NEVER,
    },
    Param {
        what: "diffserv mode",
        words: |p| vec![p.diffserv.keyword().into()],
        read: |o| o.diffserv.keyword().into(),
        checked: ALWAYS,
        summary: |p| Some(p.diffserv.keyword().into()),
        status: Some(("diffserv", |o| Setting::Word(o.diffserv.keyword().into()))),
        text: Some((Line::Shaping, |o| Some(o.diffserv.keyword().into()))),
        sticky: NEVER,
    },
    Param {
        what: "isolation",
        words: |p| vec![p.flow_mode.keyword().into()],
        read: |o| o.flowmode.keyword().into(),
        checked: ALWAYS,
        summary: |p| Some(p.flow_mode.keyword().into()),
        status: Some(("isolation", |o| Setting::Word(o.flowmode.keyword().into()))),
        text: Some((Line::Shaping, |o| Some(o.flowmode.keyword().into()))),
        sticky: NEVER,
    },
    Param {
        what: "nat",
        words: |p| word(p.nat, "nat", "nonat"),
        read: |o| on_off(o.nat),
        checked: ALWAYS,
        summary: |p| when(p.nat, "nat"),
        status: Some(("nat", |o| Setting::Bool(o.nat))),
        text: Some((Line::Shaping, |o| when(o.nat, "nat"))),
        sticky: NEVER,
    },
    Param {
        what: "wash",
        words: |p| word(p.wash, "wash", "nowash"),
        read: |o| on_off(o.wash),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("wash", |o| Setting::Bool(o.wash))),
        text: Some((Line::Shaping, |o| when(o.wash, "wash"))),
        sticky: NEVER,
    },
    Param {
        what: "ingress mode",
        words: |p| word(p.ingress, "ingress", "egress"),
        read: |o| on_off(o.ingress),
        checked: ALWAYS,
        // Whether drops count against the rate: the default differs by rate (cake.rs).
        summary: |p| when(p.ingress, "ingress"),
        status: Some(("ingress_mode", |o| Setting::Bool(o.ingress))),
        text: Some((Line::Shaping, |o| when(o.ingress, "ingress"))),
        sticky: NEVER,
    },
    Param {
        what: "ack-filter",
        words: |p| vec![p.ack_filter.keyword().into()],
        read: |o| o.ack_filter.json_value().into(),
        checked: ALWAYS,
        summary: |p| when(p.ack_filter != AckFilter::Disabled, "ack-filter"),
        status: Some(("ack_filter", |o| {
            Setting::Word(o.ack_filter.json_value().into())
        })),
        text: Some((Line::Shaping, |o| {
            (o.ack_filter != AckFilter::Disabled)
                .then(|| format!("ack-filter {}", o.ack_filter.json_value()))
        })),
        sticky: NEVER,
    },
    Param {
        what: "fwmark",
        words: |p| match p.fwmark {
            0 => vec![],
            m => vec!["fwmark".into(), format!("{m:#x}")],
        },
        read: |o| format!("{:#x}", o.fwmark),
        checked: ALWAYS,
        summary: |p| (p.fwmark != 0).then(|| format!("fwmark {:#x}", p.fwmark)),
        status: Some(("fwmark", |o| Setting::Int(o.fwmark as i64))),
        text: Some((Line::Shaping, |o| {
            (o.fwmark != 0).then(|| format!("tins by fwmark {:#x}", o.fwmark))
        })),
        // Written only when set, and `cake_change` keeps a mask it is not sent.
        sticky: |p| p.fwmark != 0,
    },
    Param {
        what: "split-gso",
        words: |p| word(p.split_gso, "split-gso", "no-split-gso"),
        read: |o| on_off(o.split_gso),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("split_gso", |o| Setting::Bool(o.split_gso))),
        text: None,
        sticky: NEVER,
    },
    Param {
        what: "raw",
        words: |p| {
            if p.link.raw {
                vec!["raw".into()]
            } else {
                vec![]
            }
        },
        read: |o| on_off(o.raw),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("raw", |o| Setting::Bool(o.raw))),
        text: Some((Line::Link, |o| when(o.raw, "raw"))),
        sticky: NEVER,
    },
    Param {
        what: "overhead",
        words: |p| vec!["overhead".into(), p.link.overhead.to_string()],
        read: |o| o.overhead.to_string(),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("overhead", |o| Setting::Int(i64::from(o.overhead)))),
        text: Some((Line::Link, |o| {
            Some(format!("overhead {} bytes", o.overhead))
        })),
        sticky: NEVER,
    },
    Param {
        what: "mpu",
        words: |p| vec!["mpu".into(), p.link.mpu.to_string()],
        read: |o| o.mpu.to_string(),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("mpu", |o| Setting::Int(i64::from(o.mpu)))),
        text: Some((Line::Link, |o| Some(format!("mpu {}", o.mpu)))),
        // q_cake.c sends TCA_CAKE_MPU only above 0.
        sticky: |p| p.link.mpu > 0,
    },
    Param {
        what: "framing",
        words: |p| vec![p.link.framing.cake_keyword().into()],
        read: |o| o.framing().cake_keyword().into(),
        checked: ALWAYS,
        summary: NO_SUMMARY,
        status: Some(("framing", |o| {
            Setting::Word(o.framing().cake_keyword().into())
        })),
        text: Some((Line::Link, |o| Some(o.framing().cake_keyword().into()))),
        sticky: NEVER,
    },
    Param {
        what: "memlimit",
        words: |p| match p.memlimit {
            Some(m) => vec!["memlimit".into(), m.bytes().to_string()],
            None => vec![],
        },
        read: |o| o.memlimit.map_or("unset".into(), |b| format!("{b} bytes")),
        // Left to cake (sized from the rate and rtt) unless the user set one.
        checked: |p| p.memlimit.is_some(),
        summary: NO_SUMMARY,
        status: None,
        text: None,
        sticky: |p| p.memlimit.is_some(),
    },
];

impl CakeParams {
    /// The words after `cake` on the tc line, every parameter explicit (see [`PARAMS`]).
    pub fn words(&self) -> Vec<String> {
        PARAMS.iter().flat_map(|p| (p.words)(self)).collect()
    }

    /// What the kernel keeps once set that `next` no longer sets: `next` needs a replace.
    pub fn sticks_in(&self, next: &CakeParams) -> bool {
        PARAMS.iter().any(|p| (p.sticky)(self) && !(p.sticky)(next))
    }
}

/// cake's parameters in `unbloat status --json`, keyed as [`PARAMS`] says, in its order.
pub fn settings(o: &CakeOptions) -> Settings {
    Settings(
        PARAMS
            .iter()
            .filter_map(|p| p.status.map(|(key, value)| (key, value(o))))
            .collect(),
    )
}

/// `unbloat status`'s text of cake's parameters on `line`, in [`PARAMS`]' order.
pub fn text(o: &CakeOptions, line: Line) -> Vec<String> {
    PARAMS
        .iter()
        .filter_map(|p| p.text.filter(|(l, _)| *l == line))
        .filter_map(|(_, text)| text(o))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linklayer::LinkPreset;
    use crate::options::parse_extra;

    fn with(opts: &str) -> Result<CakeParams, CakeError> {
        let o: ShapeOptions = crate::tomlread::from_str(opts).expect("options");
        params(
            Rate::from_mbit(20),
            &o,
            Direction::Egress,
            LinkPreset::Ethernet.link_layer(),
        )
    }

    /// Tins by firewall mark: written as the mask, read back, shown, and kept by the kernel
    /// until a replace.
    #[test]
    fn fwmark_is_a_mask_written_only_when_set() {
        let p = with("diffserv = \"diffserv4\"\nfwmark = 0xff").expect("valid");
        let words = p.words().join(" ");
        assert!(
            words.contains(" no-ack-filter fwmark 0xff split-gso "),
            "{words}"
        );
        let back = expected(&p);
        assert_eq!(back.fwmark, 0xff);
        let plain = with("diffserv = \"diffserv4\"").expect("valid");
        assert!(!plain.words().contains(&"fwmark".to_string()));
        assert!(p.sticks_in(&plain) && !plain.sticks_in(&p));
        let shown = text(&back, Line::Shaping).join(", ");
        assert!(shown.contains("tins by fwmark 0xff"), "{shown}");
        // The same from an option string, in hex or decimal.
        let cake = crate::options::Qdisc::Cake;
        let o = parse_extra("diffserv4 fwmark 255", cake, Direction::Egress, "x").expect("valid");
        assert_eq!(o.fwmark, Some(0xff));
    }

    #[test]
    fn fwmark_with_one_tin_is_refused() {
        let e = with("fwmark = 0xff").unwrap_err().to_string();
        assert!(
            e.starts_with("--fwmark 0xff: cake's besteffort has one tin"),
            "{e}"
        );
        assert!(
            e.contains("--diffserv diffserv3, diffserv4 or diffserv8"),
            "{e}"
        );
        assert!(with("fwmark = 0").is_ok(), "0 is off");
    }
}
