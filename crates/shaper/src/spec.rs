//! The validated specification of one shaped interface: every check that needs no system.
//!
//! [`Spec::new`] takes what the user said ([`ShapeOptions`], already merged from file and flags)
//! and either refuses it with a [`SpecError`] that names the flag (or config key, spelled the
//! same) and the value, or returns final parameters for each direction, defaults applied. What
//! needs the system (the interface exists, the kernel has cake, ...) is checked later, by the
//! system crate, before anything is touched.
//!
//! Checks, in order: the extra option strings parse with the chosen qdisc's grammar; at least one
//! direction has a rate; rates are sane (8 kbit/s..100 Gbit/s); rates that could cut the user
//! off (below [`CUTOFF_RATE`], or more than [`MAX_RATIO`] times apart) are confirmed by
//! `--i-mean-it`; every option suits the chosen
//! qdisc; tiers are 1 or 3; link-layer values are in cake's ranges and do not conflict; cake's
//! rtt and memlimit and fq_codel's values are in the ranges the kernel holds as written (each
//! limit is a named constant in [`cake`] or [`fq_codel`] citing its source), so nothing reaches tc
//! that tc would refuse, wrap, leave out (tc sends no rtt, memlimit or target of 0) or the kernel
//! would silently change. An option is named as [`option_name`] says: `--KEY` when there is such
//! a flag, the config key otherwise.

use crate::cake::CakeParams;
use crate::clip::clip;
use crate::linklayer::{LinkError, LinkLayer};
use crate::model::{Diffserv, Direction, FlowMode, FqCodelParams};
use crate::options::{option_name, parse_extra, Dir, ExtraError, Qdisc, ShapeOptions, OPTIONS};
use crate::{cake, fq_codel, ifb};
use unbloat_units::{IfName, Rate, UnitError};

/// Below this, one 1500-byte packet takes 1.5 s to send: no shaper (and no TCP) works sanely.
pub const MIN_RATE: Rate = Rate::from_kbit(8);
/// Above this it is surely a typo (no access link is faster; cake itself tops out near 40 Gbit/s).
pub const MAX_RATE: Rate = Rate::from_mbit(100_000);
/// Below this a shaped link can cut off the user who shapes it, often over SSH through that very
/// link: at 64 kbit/s (one ISDN channel, below any DSL line's upload; the seeds' 2002 ADSL
/// uploads at 220 kbit/s) a 1500-byte packet takes 188 ms to send, and every keystroke waits
/// behind the packets queued before it. It is also what the two common unit slips produce: SQM's
/// `20000` read as tc's bit/s is 20 kbit/s. Rates from [`MIN_RATE`] up to this need
/// `--i-mean-it` (issue 19).
pub const CUTOFF_RATE: Rate = Rate::from_kbit(64);
/// The most one direction may be faster than the other without `--i-mean-it`. A TCP download with
/// delayed ACKs sends one 66-byte ACK per two 1514-byte segments, about 1/46 of its rate, back the
/// other way: at 1000 to 1 the slow side carries the ACKs of only about 1/20 of the fast side's
/// rate, so such a pair is a unit typo (kbit for mbit) far more often than a link. The widest real ones (ADSL,
/// DOCSIS, GPON) are 10 to 40 to 1.
pub const MAX_RATIO: u64 = 1_000;
/// A shaper rate under 1/this of the interface's own speed (a 1 Gbit/s port shaped to under
/// 1 Mbit/s) needs `--i-mean-it`, when the system knows the speed ([`Spec::check_link_speed`]).
/// Not 1/100: an ADSL line of 6 Mbit/s behind a router's gigabit port is the common case, and
/// must not need the flag; a unit typo (`200kbit` for `200mbit`) is still 1/1000 or less.
pub const MIN_LINK_SHARE: u64 = 1_000;
/// The link-layer header Linux counts in a packet's length on Ethernet-type devices.
pub const ETHERNET_HEADER: u32 = 14;

/// Why the options cannot be planned. Each message names the flag (or config key) and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("interface {0}")]
    Interface(UnitError),
    #[error("interface {name:?}: contains {ch:?}, which tc -batch would read as syntax")]
    InterfaceChar { name: String, ch: char },
    #[error(
        "{iface}: nothing to shape: --down and --up are both 0 or absent; give at least one rate"
    )]
    NothingToShape { iface: String },
    #[error("--{flag} {rate}: below 8kbit, the slowest rate unbloat shapes (one 1500-byte packet would take over 1.5 s to send)")]
    RateTooLow { flag: &'static str, rate: Rate },
    #[error("--{flag} {rate}: above 100gbit, faster than any access link; a unit typo (kbit/mbit/gbit)?")]
    RateTooHigh { flag: &'static str, rate: Rate },
    #[error(
        "--{flag} {rate}: below {}, slow enough to cut off a session through this link (a \
         1500-byte packet takes {:.0} ms to send); a unit typo (kbit for mbit)? If you mean it, \
         add --i-mean-it",
        CUTOFF_RATE,
        .rate.seconds_for(1500) * 1e3
    )]
    CutOff { flag: &'static str, rate: Rate },
    #[error(
        "--{fast_flag} {fast} is {ratio} times --{slow_flag} {slow}: over {} to 1, the slow \
         side cannot even carry the fast side's TCP acknowledgements; a unit typo (kbit for \
         mbit)? If you mean it, add --i-mean-it",
        MAX_RATIO
    )]
    Lopsided {
        fast_flag: &'static str,
        fast: Rate,
        slow_flag: &'static str,
        slow: Rate,
        ratio: u64,
    },
    #[error(
        "--{flag} {rate}: under 1/{} of the interface's speed, {link}; a unit typo (kbit for \
         mbit)? If you mean it, add --i-mean-it",
        MIN_LINK_SHARE
    )]
    BelowLinkShare {
        flag: &'static str,
        rate: Rate,
        link: Rate,
    },
    #[error("--tiers {0}: use 1 (one class) or 3 (priority, best effort, bulk by DSCP)")]
    Tiers(u8),
    #[error("--tiers {0}: tiers are for --qdisc fq_codel; cake sorts DSCPs into tins itself (--diffserv)")]
    TiersWithCake(u8),
    #[error(
        "{} {value}: a cake option, which --qdisc fq_codel cannot take; use --qdisc cake",
        option_name(.option)
    )]
    CakeOnly { option: &'static str, value: String },
    #[error(
        "{} {value}: an fq_codel option, which --qdisc cake cannot take ({hint})",
        option_name(.option)
    )]
    FqCodelOnly {
        option: &'static str,
        value: String,
        hint: &'static str,
    },
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(transparent)]
    Extra(#[from] ExtraError),
    #[error(transparent)]
    Cake(#[from] cake::CakeError),
    #[error(transparent)]
    FqCodel(#[from] fq_codel::FqCodelError),
    #[error("--classify: {0}")]
    Rule(#[from] crate::classify::RuleError),
    #[error("--classify with {shaper}: {why}")]
    ClassifyNeeds { shaper: String, why: &'static str },
}

impl SpecError {
    /// The config key the error is about (`down`, `overhead`, `extra-egress`, ...), for a form
    /// that shows each error beside its field; `None` when it is about the interface as a whole
    /// (its name, no rate at all). A lopsided pair names the slower rate, the usual typo.
    pub fn key(&self) -> Option<&'static str> {
        Some(match self {
            SpecError::Interface(_)
            | SpecError::InterfaceChar { .. }
            | SpecError::NothingToShape { .. } => return None,
            SpecError::RateTooLow { flag, .. }
            | SpecError::RateTooHigh { flag, .. }
            | SpecError::CutOff { flag, .. }
            | SpecError::BelowLinkShare { flag, .. } => flag,
            SpecError::Lopsided { slow_flag, .. } => slow_flag,
            SpecError::Tiers(_) | SpecError::TiersWithCake(_) => "tiers",
            SpecError::CakeOnly { option, .. } | SpecError::FqCodelOnly { option, .. } => option,
            SpecError::Link(LinkError::Overhead(_)) => "overhead",
            SpecError::Link(LinkError::Mpu(_)) => "mpu",
            SpecError::Link(LinkError::FramingConflict { .. }) => "framing",
            SpecError::Link(LinkError::Vlan(_)) => "vlan",
            SpecError::Extra(e) => {
                let (ExtraError::Unknown { key, .. }
                | ExtraError::MissingValue { key, .. }
                | ExtraError::BadValue { key, .. }) = e;
                // The spec names the string by option_name("extra-egress") or "-ingress".
                if key.ends_with("extra-egress") {
                    "extra-egress"
                } else {
                    "extra-ingress"
                }
            }
            SpecError::Cake(e) => e.option(),
            SpecError::FqCodel(e) => e.option(),
            SpecError::Rule(_) | SpecError::ClassifyNeeds { .. } => "classify",
        })
    }
}

/// What shapes one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShaperSpec {
    Cake(CakeParams),
    /// HTB with `tiers` leaf classes, each with this fq_codel, compensated for `link` by a stab.
    HtbFqCodel {
        rate: Rate,
        tiers: u8,
        link: LinkLayer,
        fq_codel: FqCodelParams,
    },
}

/// One direction's final parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectionSpec {
    pub direction: Direction,
    pub rate: Rate,
    pub shaper: ShaperSpec,
}

/// A validated interface setup: what [`Plan::build`](crate::plan::Plan::build) turns into steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub wan: IfName,
    /// The IFB for ingress (named even when ingress is off, for messages and stop).
    pub ifb: IfName,
    pub qdisc: Qdisc,
    pub egress: Option<DirectionSpec>,
    pub ingress: Option<DirectionSpec>,
    /// Bytes of link-layer header in the length Linux counts on `wan` (14 on Ethernet-type
    /// devices, the default; 0 on ppp, tun, wireguard). Only the stab of the HTB strategy depends
    /// on it; set it with [`Spec::with_mac_header`] if the device is not Ethernet-like.
    pub mac_header: u32,
    /// Things that are allowed but probably not meant (shown by `plan` and `start`).
    pub warnings: Vec<String>,
    /// The user confirmed rates that could cut them off (`--i-mean-it`, config key `i-mean-it`).
    pub i_mean_it: bool,
    /// The classification rules, in order, and the automatic classes ([`crate::classify`]).
    pub classify: crate::classify::Classes,
}

/// The classification rules of `opts`, and `opts` with the tins they need where the user chose
/// none: cake's diffserv4 (its default, besteffort, has one tin), fq_codel's three tiers. A choice
/// that cannot hold a rule's tin is refused: the rule would do nothing.
fn classify_rules(
    qdisc: Qdisc,
    opts: &ShapeOptions,
) -> Result<(crate::classify::Classes, ShapeOptions), SpecError> {
    use crate::classify::Tin;
    let entries = opts.classify.as_deref().unwrap_or_default();
    let classes = crate::classify::classes(entries)?;
    let mut o = opts.clone();
    if classes.is_empty() {
        return Ok((classes, o));
    }
    let refuse = |shaper: String, why| Err(SpecError::ClassifyNeeds { shaper, why });
    match qdisc {
        Qdisc::Cake => match *o.diffserv.get_or_insert(Diffserv::Diffserv4) {
            d @ (Diffserv::Besteffort | Diffserv::Precedence) => {
                return refuse(
                    format!("--diffserv {}", d.keyword()),
                    "its tins do not follow the DSCP a rule sets; leave --diffserv out (diffserv4) or choose diffserv3, 4 or 8",
                )
            }
            Diffserv::Diffserv3 if classes.uses(Tin::Video) => {
                return refuse(
                    "--diffserv diffserv3".into(),
                    "it has no video tin; use diffserv4 or diffserv8",
                )
            }
            _ => {}
        },
        Qdisc::FqCodel => {
            if *o.tiers.get_or_insert(3) == 1 {
                return refuse(
                    "--tiers 1".into(),
                    "one class has nowhere to put a rule's traffic; use --tiers 3",
                );
            }
            if classes.auto.is_some() {
                return refuse(
                    "--qdisc fq_codel".into(),
                    "automatic classes put small-packet connections in the video tin, and its three tiers (priority, best effort, bulk) have none; use --qdisc cake",
                );
            }
            if classes.uses(Tin::Video) {
                return refuse(
                    "--qdisc fq_codel".into(),
                    "its three tiers (priority, best effort, bulk) have no video tier; use voice, or --qdisc cake",
                );
            }
        }
    }
    Ok((classes, o))
}

/// Parse a user's interface name, with the message of [`SpecError`]. A name longer than
/// [`MAX_ECHO`](crate::clip::MAX_ECHO) characters is refused as too long (names have at most 15
/// bytes) with the name cut, so a huge one is never repeated whole.
pub fn parse_iface(text: &str) -> Result<IfName, SpecError> {
    let name: IfName = clip(text).parse().map_err(SpecError::Interface)?;
    check_iface(&name)?;
    Ok(name)
}

/// Characters the kernel allows in a name but `tc -batch` would misread: `#` starts a comment
/// (lib/utils.c `getcmdline`), a leading quote starts a quoted word (`makeargs`), `\` continues.
fn check_iface(name: &IfName) -> Result<(), SpecError> {
    match name
        .as_str()
        .chars()
        .find(|c| matches!(c, '#' | '\'' | '"' | '\\'))
    {
        Some(ch) => Err(SpecError::InterfaceChar {
            name: clip(name.as_str()).into_owned(),
            ch,
        }),
        None => Ok(()),
    }
}

impl Spec {
    /// Validate `opts` for `iface` and apply the defaults (see each qdisc module for why).
    pub fn new(iface: IfName, opts: &ShapeOptions) -> Result<Spec, SpecError> {
        check_iface(&iface)?;
        let qdisc = opts.qdisc.unwrap_or_default();
        let (classify, with_tins) = classify_rules(qdisc, opts)?;
        let opts = &with_tins;
        check_qdisc_fit(qdisc, opts)?;
        let i_mean_it = opts.i_mean_it == Some(true);
        let mut warnings = Vec::new();
        let mut dirs = [None, None];
        for (i, dir) in [Direction::Egress, Direction::Ingress]
            .into_iter()
            .enumerate()
        {
            let (extra, key) = match dir {
                Direction::Egress => (&opts.extra_egress, "extra-egress"),
                Direction::Ingress => (&opts.extra_ingress, "extra-ingress"),
            };
            // An upload key (cake's ACK filter: the download's ACKs go up) does not reach the
            // download qdisc; extra-ingress's words can ask for it there.
            let mut base = opts.clone();
            if dir == Direction::Ingress {
                for opt in OPTIONS.iter().filter(|d| d.dir == Dir::UploadKey) {
                    opt.field.clear(&mut base);
                }
            }
            let merged = match extra {
                Some(text) => {
                    ShapeOptions::merge(&base, &parse_extra(text, qdisc, dir, &option_name(key))?)
                }
                None => base,
            };
            let (rate, flag) = match dir {
                Direction::Egress => (merged.up, "up"),
                Direction::Ingress => (merged.down, "down"),
            };
            let Some(rate) = rate.filter(|r| !r.is_zero()) else {
                continue;
            };
            if rate < MIN_RATE {
                return Err(SpecError::RateTooLow { flag, rate });
            }
            if rate > MAX_RATE {
                return Err(SpecError::RateTooHigh { flag, rate });
            }
            if rate < CUTOFF_RATE {
                if !i_mean_it {
                    return Err(SpecError::CutOff { flag, rate });
                }
                warnings.push(format!(
                    "--{flag} {rate}: below {CUTOFF_RATE}, as --i-mean-it confirms"
                ));
            }
            // The kernel keeps rates in bytes per second (tc's get_rate64 divides by 8).
            let rate_b = Rate::from_bytes_per_sec(rate.bytes_per_sec());
            if rate_b != rate {
                warnings.push(format!("--{flag} {rate}: the kernel counts whole bytes per second; shaping at {rate_b}"));
            }
            dirs[i] = Some(direction(rate_b, dir, qdisc, &merged, &mut warnings)?);
        }
        let [egress, ingress] = dirs;
        if egress.is_none() && ingress.is_none() {
            return Err(SpecError::NothingToShape {
                iface: iface.to_string(),
            });
        }
        if let (Some(up), Some(down)) = (&egress, &ingress) {
            let ((fast_flag, fast), (slow_flag, slow)) = if down.rate >= up.rate {
                (("down", down.rate), ("up", up.rate))
            } else {
                (("up", up.rate), ("down", down.rate))
            };
            let ratio = fast.bits_per_sec() / slow.bits_per_sec().max(1);
            if fast.bits_per_sec() > slow.bits_per_sec().saturating_mul(MAX_RATIO) {
                if !i_mean_it {
                    return Err(SpecError::Lopsided {
                        fast_flag,
                        fast,
                        slow_flag,
                        slow,
                        ratio,
                    });
                }
                warnings.push(format!(
                    "--{fast_flag} {fast} is {ratio} times --{slow_flag} {slow}, as --i-mean-it confirms"
                ));
            }
        }
        Ok(Spec {
            ifb: ifb::ifb_name(&iface),
            wan: iface,
            qdisc,
            egress,
            ingress,
            mac_header: ETHERNET_HEADER,
            warnings,
            i_mean_it,
            classify,
        })
    }

    /// The check of issue 19 that needs the system: a shaper rate under 1/[`MIN_LINK_SHARE`] of
    /// the interface's own speed (`link`: ethtool's speed, `/sys/class/net/IFACE/speed` in
    /// Mbit/s) is refused unless confirmed. Pure: the caller reads the speed and passes it, or
    /// does not call this when the speed is unknown (a zero `link` counts as unknown: virtual
    /// devices report none, or -1).
    pub fn check_link_speed(&self, link: Rate) -> Result<(), SpecError> {
        if self.i_mean_it || link.is_zero() {
            return Ok(());
        }
        for (dir, flag) in [(&self.egress, "up"), (&self.ingress, "down")] {
            if let Some(d) = dir {
                if d.rate.bits_per_sec().saturating_mul(MIN_LINK_SHARE) < link.bits_per_sec() {
                    return Err(SpecError::BelowLinkShare {
                        flag,
                        rate: d.rate,
                        link,
                    });
                }
            }
        }
        Ok(())
    }

    /// The same spec for a device whose Linux length includes `bytes` of link-layer header;
    /// recomputes nothing but the stab later built from it.
    pub fn with_mac_header(mut self, bytes: u32) -> Spec {
        self.mac_header = bytes;
        self
    }
}

fn direction(
    rate: Rate,
    dir: Direction,
    qdisc: Qdisc,
    o: &ShapeOptions,
    warnings: &mut Vec<String>,
) -> Result<DirectionSpec, SpecError> {
    let link = LinkLayer::resolve(o.link, o.overhead, o.mpu, o.framing, o.vlan)?;
    let shaper = match qdisc {
        Qdisc::Cake => {
            let p = cake::params(rate, o, dir, link)?;
            // An explicit `nonat` (the user's, or the fairness default of a router found without
            // NAT) is a decision, not an oversight.
            if p.flow_mode.is_per_host()
                && p.flow_mode != FlowMode::TripleIsolate
                && !p.nat
                && o.nat != Some(false)
            {
                warnings.push(format!(
                    "{dir}: isolation {} without --nat: if this machine does the NAT, all LAN hosts look like one; add --nat",
                    p.flow_mode.keyword()
                ));
            }
            ShaperSpec::Cake(p)
        }
        Qdisc::FqCodel => ShaperSpec::HtbFqCodel {
            rate,
            tiers: o.tiers.unwrap_or(1),
            link,
            fq_codel: fq_codel::params(rate, &link, ETHERNET_HEADER, o, dir)?,
        },
    };
    Ok(DirectionSpec {
        direction: dir,
        rate,
        shaper,
    })
}

/// Options the chosen qdisc cannot take are refused, naming the option and the qdisc that can.
fn check_qdisc_fit(qdisc: Qdisc, o: &ShapeOptions) -> Result<(), SpecError> {
    if let Some(t) = o.tiers {
        if t != 1 && t != 3 {
            return Err(SpecError::Tiers(t));
        }
        if qdisc == Qdisc::Cake {
            return Err(SpecError::TiersWithCake(t));
        }
    }
    // The options the other strategy takes (their declarations say which, and why).
    for opt in OPTIONS
        .iter()
        .filter(|d| d.qdisc.is_some_and(|q| q != qdisc))
    {
        if let Some(value) = opt.shown(o) {
            return Err(match qdisc {
                Qdisc::FqCodel => SpecError::CakeOnly {
                    option: opt.key,
                    value,
                },
                Qdisc::Cake => SpecError::FqCodelOnly {
                    option: opt.key,
                    value,
                    hint: opt.refusal,
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AckFilter, Diffserv};
    use crate::options::Isolation;

    fn toml_opts(t: &str) -> ShapeOptions {
        crate::tomlread::from_str(t).expect("test options parse")
    }

    #[test]
    fn each_error_names_the_config_key_of_its_field() {
        let r = "down = \"10mbit\"\n";
        for (opts, want) in [
            ("down = \"5kbit\"".to_string(), Some("down")),
            ("up = \"200gbit\"".into(), Some("up")),
            ("down = \"50kbit\"".into(), Some("down")),
            ("down = \"100mbit\"\nup = \"80kbit\"".into(), Some("up")),
            (format!("{r}tiers = 3"), Some("tiers")),
            (format!("{r}overhead = 999"), Some("overhead")),
            (format!("{r}mpu = 999"), Some("mpu")),
            (format!("{r}vlan = 3"), Some("vlan")),
            (
                format!("{r}link = \"vdsl2\"\nframing = \"atm\""),
                Some("framing"),
            ),
            (
                format!("{r}extra-ingress = \"bogus\""),
                Some("extra-ingress"),
            ),
            (
                "up = \"10mbit\"\nextra-egress = \"bogus\"".into(),
                Some("extra-egress"),
            ),
            (
                format!("{r}qdisc = \"fq_codel\"\ndiffserv = \"diffserv4\""),
                Some("diffserv"),
            ),
            (
                format!("{r}qdisc = \"fq_codel\"\ntarget = \"50ms\"\ninterval = \"10ms\""),
                Some("interval"),
            ),
            (format!("{r}rtt = \"7200s\""), Some("rtt")),
            ("nat = true".into(), None),
        ] {
            let e = Spec::new("eth0".parse().expect("name"), &toml_opts(&opts)).unwrap_err();
            assert_eq!(e.key(), want, "{opts}: {e}");
        }
    }
    fn err(t: &str) -> String {
        Spec::new("eth0".parse().expect("name"), &toml_opts(t))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_units_are_refused_naming_the_value() {
        let e = crate::tomlread::from_str::<ShapeOptions>("down = \"78mbitz\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid rate \"78mbitz\""), "{e}");
        let e = crate::tomlread::from_str::<ShapeOptions>("rtt = \"5 parsecs\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"5 parsecs\""), "{e}");
    }

    #[test]
    fn zero_both_is_nothing_to_shape() {
        assert_eq!(
            err("down = 0\nup = \"0mbit\""),
            "eth0: nothing to shape: --down and --up are both 0 or absent; give at least one rate"
        );
        assert!(err("").contains("nothing to shape"));
    }

    #[test]
    fn negative_rates_are_refused() {
        let e = crate::tomlread::from_str::<ShapeOptions>("up = -5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("may not be negative: -5"), "{e}");
        assert!("-5mbit".parse::<Rate>().is_err());
    }

    #[test]
    fn absurd_rates_are_refused_with_the_reason() {
        let e = err("up = \"4kbit\"");
        assert!(e.starts_with("--up 4kbit: below 8kbit"), "{e}");
        assert!(e.contains("1.5 s"), "{e}");
        let e = err("down = \"200gbit\"");
        assert!(e.starts_with("--down 200gbit: above 100gbit"), "{e}");
        let eight = toml_opts("up = \"8kbit\"\ni-mean-it = true");
        assert!(Spec::new("eth0".parse().expect("name"), &eight).is_ok());
    }

    fn ok(t: &str) -> Spec {
        Spec::new("eth0".parse().expect("name"), &toml_opts(t))
            .unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    /// Issue 19: `--up 20000` read as tc reads it (20 kbit/s) would leave a remote user 20 kbit/s
    /// to undo it; below 64kbit a rate needs --i-mean-it, and the refusal says why.
    #[test]
    fn rates_that_could_cut_the_user_off_need_i_mean_it() {
        let e = err("up = \"20kbit\"");
        assert_eq!(
            e,
            "--up 20kbit: below 64kbit, slow enough to cut off a session through this link (a \
             1500-byte packet takes 600 ms to send); a unit typo (kbit for mbit)? If you mean it, \
             add --i-mean-it"
        );
        assert!(err("down = \"63999bit\"").starts_with("--down 63999bit: below 64kbit"));
        assert!(
            err("down = \"10mbit\"\nextra-ingress = \"bandwidth 20kbit\"")
                .starts_with("--down 20kbit: below 64kbit")
        );
        let s = ok("up = \"64kbit\"");
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let s = ok("up = \"20kbit\"\ni-mean-it = true");
        assert_eq!(s.egress.as_ref().map(|d| d.rate), Some(Rate::from_kbit(20)));
        assert!(
            s.warnings[0].contains("as --i-mean-it confirms"),
            "{:?}",
            s.warnings
        );
        // i-mean-it = false is no confirmation.
        assert!(err("up = \"20kbit\"\ni-mean-it = false").contains("--i-mean-it"));
    }

    #[test]
    fn directions_over_1000_to_1_apart_need_i_mean_it() {
        let e = err("down = \"100mbit\"\nup = \"99kbit\"");
        assert!(
            e.starts_with("--down 100mbit is 1010 times --up 99kbit: over 1000 to 1"),
            "{e}"
        );
        assert!(e.ends_with("add --i-mean-it"), "{e}");
        let e = err("down = \"64kbit\"\nup = \"1gbit\"");
        assert!(
            e.starts_with("--up 1gbit is 15625 times --down 64kbit"),
            "{e}"
        );
        ok("down = \"100mbit\"\nup = \"100kbit\"");
        let s = ok("down = \"100mbit\"\nup = \"99kbit\"\ni-mean-it = true");
        assert!(s.warnings[0].contains("1010 times"), "{:?}", s.warnings);
        // One direction off is no ratio.
        ok("down = \"100gbit\"\nup = 0");
    }

    #[test]
    fn rates_under_a_thousandth_of_the_interface_speed_need_i_mean_it() {
        let s = ok("down = \"9mbit\"\nup = \"900kbit\"");
        let e = s.check_link_speed(Rate::from_mbit(1000)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--up 900kbit: under 1/1000 of the interface's speed, 1gbit; a unit typo (kbit for mbit)? \
             If you mean it, add --i-mean-it"
        );
        // ADSL behind a gigabit port needs no flag.
        assert!(ok("down = \"6mbit\"\nup = \"1mbit\"")
            .check_link_speed(Rate::from_mbit(1000))
            .is_ok());
        assert!(s.check_link_speed(Rate::from_mbit(100)).is_ok());
        assert!(s.check_link_speed(Rate::ZERO).is_ok(), "unknown speed");
        let s = ok("down = \"9mbit\"\nup = \"900kbit\"\ni-mean-it = true");
        assert!(s.check_link_speed(Rate::from_mbit(10_000)).is_ok());
        let s = ok("down = \"900kbit\"");
        assert!(s
            .check_link_speed(Rate::from_mbit(1000))
            .unwrap_err()
            .to_string()
            .starts_with("--down 900kbit: under 1/1000"));
    }

    #[test]
    fn interface_names_too_long_or_unsafe_for_tc_batch() {
        let e = parse_iface("averyveryverylongname")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"averyveryverylongname\"") && e.contains("longer than 15 bytes"),
            "{e}"
        );
        let e = parse_iface("wan#1").unwrap_err().to_string();
        assert!(e.contains("\"wan#1\"") && e.contains("'#'"), "{e}");
        assert!(parse_iface("eth0.2").is_ok());
    }

    #[test]
    fn overhead_and_mpu_ranges() {
        assert_eq!(
            err("up = \"1mbit\"\noverhead = 300"),
            "--overhead 300: out of range -64..256 (cake's limit)"
        );
        assert!(err("up = \"1mbit\"\noverhead = -65").starts_with("--overhead -65: out of range"));
        assert!(err("up = \"1mbit\"\nmpu = 257").starts_with("--mpu 257: out of range 0..256"));
        assert!(err("up = \"1mbit\"\nmpu = -1").starts_with("--mpu -1: out of range 0..256"));
        assert!(
            err("up = \"1mbit\"\nextra-egress = \"overhead 999\"").starts_with("--overhead 999:")
        );
    }

    #[test]
    fn atm_with_ptm_is_a_conflict() {
        let e = err("up = \"1mbit\"\nlink = \"vdsl2\"\nframing = \"atm\"");
        assert!(
            e.starts_with("--framing atm conflicts with --link vdsl2"),
            "{e}"
        );
        let e = err("up = \"1mbit\"\nlink = \"pppoe-llcsnap\"\nextra-egress = \"ptm\"");
        assert!(
            e.starts_with("--framing ptm conflicts with --link pppoe-llcsnap"),
            "{e}"
        );
    }

    #[test]
    fn cake_options_with_fq_codel_name_the_option_and_the_fix() {
        for (line, option) in [
            ("ack-filter = true", "--ack-filter ack-filter"),
            ("diffserv = \"diffserv4\"", "--diffserv diffserv4"),
            ("isolation = \"dual-host\"", "--isolation dual-host"),
            ("nat = true", "--nat true"),
            ("wash = true", "--wash true"),
            ("rtt = \"metro\"", "--rtt 10ms"),
        ] {
            let e = err(&format!("qdisc = \"fq_codel\"\nup = \"1mbit\"\n{line}"));
            assert!(e.starts_with(option), "{e}");
            assert!(e.contains("use --qdisc cake"), "{e}");
        }
        let e = err("qdisc = \"fq_codel\"\nup = \"1mbit\"\nextra-egress = \"ack-filter\"");
        assert!(
            e.contains("\"ack-filter\" is not a fq_codel option") && e.contains("--qdisc cake"),
            "{e}"
        );
    }

    #[test]
    fn fq_codel_options_and_tiers_with_cake_are_refused() {
        let e = err("up = \"1mbit\"\ntiers = 3");
        assert!(
            e.starts_with("--tiers 3: tiers are for --qdisc fq_codel"),
            "{e}"
        );
        let e = err("up = \"1mbit\"\ntarget = \"5ms\"");
        assert!(e.starts_with("--target 5ms: an fq_codel option"), "{e}");
        let e = err("qdisc = \"fq_codel\"\nup = \"1mbit\"\ntiers = 2");
        assert!(e.starts_with("--tiers 2: use 1"), "{e}");
    }

    #[test]
    fn unknown_extra_words_are_refused() {
        let e = err("up = \"1mbit\"\nextra-egress = \"nat frobnicate\"");
        assert!(
            e.starts_with("--egress-options/extra-egress: \"frobnicate\" is not a cake option"),
            "{e}"
        );
        let e = err("down = \"1mbit\"\nextra-ingress = \"autorate-ingress\"");
        assert!(
            e.starts_with("--ingress-options/extra-ingress: \"autorate-ingress\"")
                && e.contains("unbloat set-rate"),
            "{e}"
        );
    }

    /// Values tc or the kernel would refuse, wrap or silently change are refused here (exit 2 in
    /// the binary), naming the option and the value, whether they come from a config key (the
    /// same key as the flag) or a word of an option string.
    #[test]
    fn values_the_kernel_cannot_hold_are_refused_before_the_kernel() {
        let cake = "up = \"10mbit\"";
        let fq = "qdisc = \"fq_codel\"\nup = \"10mbit\"";
        for (opts, line, want) in [
            (
                cake,
                "rtt = \"5000s\"",
                "--rtt 5000s: out of range 1us..4294s",
            ),
            (cake, "rtt = \"0ms\"", "--rtt 0us: out of range 1us..4294s"),
            (cake, "rtt = 0", "--rtt 0us: out of range"),
            (
                cake,
                "extra-egress = \"rtt 5000s\"",
                "--rtt 5000s: out of range",
            ),
            (cake, "memlimit = 0", "memlimit 0"),
            (
                cake,
                "memlimit = \"8gb\"",
                "memlimit 8589934592b: out of range",
            ),
            (cake, "extra-egress = \"memlimit 0\"", "memlimit 0"),
            (
                fq,
                "target = \"5000s\"",
                "--target 5000s: out of range 1us..2199s",
            ),
            (
                fq,
                "interval = \"5000s\"",
                "--interval 5000s: out of range 1us..2199s",
            ),
            (fq, "target = \"0ms\"", "--target 0us: out of range"),
            (
                fq,
                "extra-egress = \"target 5000s\"",
                "--target 5000s: out of range",
            ),
            (
                fq,
                "extra-egress = \"interval 5000s\"",
                "--interval 5000s: out of range",
            ),
            (
                fq,
                "memory-limit = \"3gb\"",
                "--memory-limit 3221225472b: out of range",
            ),
            (fq, "extra-egress = \"memory_limit 0\"", "--memory-limit 0"),
            (fq, "flows = 0", "flows 0: out of range 1..65536"),
            (fq, "quantum = 70000000", "--quantum 70000000: out of range"),
            (fq, "limit = 0", "--limit 0: out of range"),
        ] {
            let e = err(&format!("{opts}\n{line}"));
            assert!(e.starts_with(want), "{line}: {e}");
            if e.contains("out of range") {
                assert!(e.contains(".."), "{line}: names the allowed range: {e}");
            }
        }
        // The ingress side's option string is checked the same way.
        let e = err("down = \"10mbit\"\nextra-ingress = \"rtt 5000s\"");
        assert!(e.starts_with("--rtt 5000s: out of range"), "{e}");
    }

    #[test]
    fn defaults_follow_the_field() {
        let s = Spec::new(
            "eth0".parse().expect("name"),
            &toml_opts("down = \"78mbit\"\nup = \"19950kbit\""),
        )
        .expect("valid");
        let (Some(e), Some(i)) = (&s.egress, &s.ingress) else {
            panic!("both directions")
        };
        let (ShaperSpec::Cake(e), ShaperSpec::Cake(i)) = (&e.shaper, &i.shaper) else {
            panic!("cake")
        };
        assert_eq!(e.diffserv, Diffserv::Besteffort);
        assert_eq!(e.ack_filter, AckFilter::Disabled);
        assert!(!e.nat && !e.ingress && i.ingress);
        assert_eq!(s.ifb.as_str(), "ifb4eth0");
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn ack_filter_is_an_upload_option() {
        let filters = |text: &str| {
            let s = Spec::new("eth0".parse().expect("name"), &toml_opts(text)).expect("valid");
            let f = |d: &Option<DirectionSpec>| match d.as_ref().map(|d| &d.shaper) {
                Some(ShaperSpec::Cake(c)) => Some(c.ack_filter),
                _ => None,
            };
            (f(&s.egress), f(&s.ingress))
        };
        use AckFilter::{Disabled, Enabled};
        let rates = "down = \"95mbit\"\nup = \"9500kbit\"";
        assert_eq!(filters(rates), (Some(Disabled), Some(Disabled)));
        // The download filters only through extra-ingress.
        assert_eq!(
            filters(&format!("{rates}\nack-filter = true")),
            (Some(Enabled), Some(Disabled))
        );
        assert_eq!(
            filters(&format!("{rates}\nextra-ingress = \"ack-filter\"")),
            (Some(Disabled), Some(Enabled))
        );
    }

    #[test]
    fn host_isolation_without_nat_warns() {
        let mut o = toml_opts("up = \"10mbit\"");
        o.isolation = Some(Isolation::DualHost);
        let s = Spec::new("eth0".parse().expect("name"), &o).expect("valid");
        assert!(s.warnings[0].contains("without --nat"), "{:?}", s.warnings);
    }

    #[test]
    fn extra_strings_apply_to_their_direction_only() {
        let s = Spec::new(
            "eth0".parse().expect("name"),
            &toml_opts("down = \"78mbit\"\nup = \"20mbit\"\nextra-egress = \"nat dual-srchost ack-filter mpu 64\""),
        )
        .expect("valid");
        let (Some(e), Some(i)) = (&s.egress, &s.ingress) else {
            panic!("both")
        };
        let (ShaperSpec::Cake(e), ShaperSpec::Cake(i)) = (&e.shaper, &i.shaper) else {
            panic!("cake")
        };
        assert!(e.nat && e.ack_filter == AckFilter::Enabled && e.link.mpu == 64);
        assert!(!i.nat && i.ack_filter == AckFilter::Disabled && i.link.mpu == 84);
    }
}
