//! Every option of an interface, declared once: its field of [`ShapeOptions`] (and so its TOML
//! key), its flag and help, its words in cake's or fq_codel's grammar, which strategy and which
//! direction it is for, and where the forms show it. The command line (`crates/cli`), the config
//! file, the web page's form, the option strings, the sqm import and the spec's checks all read
//! this list; adding an option is one entry here, its kernel side in its qdisc's module
//! (`qdisc/cake/params.rs`, ...), and its tests.
//!
//! The order is the order a config file is written in (the sqm import's, the shipped example's);
//! `--help` and the forms keep it within their sections.

use super::decl::{Acc, Cli, Dir, Heading, Opt, Web, Word, Words};
use super::value::OptValue;
use super::{parse_rtt, Isolation, Qdisc};
use crate::linklayer::{Framing, LinkPreset};
use crate::model::{AckFilter, Diffserv, Direction};
use serde::{Deserialize, Deserializer, Serialize};
use unbloat_units::{Rate, Size, Time};

/// Declares [`ShapeOptions`] (one `Option<T>` member per entry, with the entry's attributes)
/// and [`OPTIONS`] (one [`Opt`] per entry, with the entry's declaration and typed access to its
/// member), so a member cannot be without its declaration or the other way round.
macro_rules! options {
    ($(
        $(#[$attr:meta])*
        $field:ident: $ty:ty $([parse = $parse:expr])? => { $($decl:tt)* }
    )*) => {
        /// Everything a user can say about one interface. `None` means "not said": the spec
        /// applies the field's default, and [`ShapeOptions::merge`] lets a later source (flags)
        /// override an earlier one (the config file, its `[defaults]`).
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct ShapeOptions {
            $( $(#[$attr])* pub $field: Option<$ty>, )*
        }

        /// Every option, in the order a config file lists them.
        pub static OPTIONS: &[Opt] = &[$(
            Opt {
                field: &Acc::<$ty> {
                    get: |o| &o.$field,
                    get_mut: |o| &mut o.$field,
                    parse: options!(@parse $ty $(, $parse)?),
                },
                $($decl)*
            },
        )*];
    };
    (@parse $ty:ty) => { <$ty as OptValue>::parse };
    (@parse $ty:ty, $parse:expr) => { $parse };
}

/// fq_codel's quantum: a size (`1514`, `1514b`), held in bytes.
fn quantum(text: &str) -> Result<u32, String> {
    let s: Size = OptValue::parse(text)?;
    u32::try_from(s.bytes()).map_err(|_| format!("{s}: too large"))
}

/// cake's fwmark: a mask, in hex (`0xff`) as firewalls write marks, or decimal.
fn mark_mask(text: &str) -> Result<u32, String> {
    super::tc_units::tc_unsigned(text)
        .ok_or_else(|| format!("{:?}: not a 32-bit mask (0xff)", crate::clip::clip(text)))
}

const FQ_AQM: &str = "cake tunes its AQM from --rtt";
const FQ_MEMORY: &str = "cake bounds its queue by memory: the config key memlimit, or the word \
                         memlimit in --egress-options/--ingress-options";
const FQ_ECN: &str = "cake always uses ECN when a flow has it";
const ON_OFF: &[Word] = &[Word::Means("ecn", "true"), Word::Means("noecn", "false")];

options! {
    /// Download shaper rate; 0 or absent: no ingress shaping.
    down: Rate => {
        key: "down",
        example: "30mbit",
        help: "Download shaper rate (ingress, through an IFB). Set it to ~95 % of a measured speed \
               test, or ~85 % of the advertised rate. SQM's 20000 (kbit/s) is 20000kbit or 20mbit \
               here.",
        short: "download shaper rate with its unit, e.g. 78mbit",
        cli: Cli::Value("RATE"), heading: Heading::Rates, qdisc: None, refusal: "",
        dir: Dir::Only(Direction::Ingress), words: Words::Cake(&[Word::Value("bandwidth")]),
        web: Web::Card,
        uci: None,
    }
    /// Upload shaper rate; 0 or absent: no egress shaping.
    up: Rate => {
        key: "up",
        example: "5mbit",
        help: "Upload shaper rate (egress, on the interface itself).",
        short: "upload shaper rate with its unit, e.g. 19950kbit",
        cli: Cli::Value("RATE"), heading: Heading::Rates, qdisc: None, refusal: "",
        dir: Dir::Only(Direction::Egress), words: Words::Cake(&[Word::Value("bandwidth")]),
        web: Web::Card,
        uci: None,
    }
    qdisc: Qdisc => {
        key: "qdisc",
        example: "fq_codel",
        help: "Queueing: cake (default), or fq_codel (HTB + fq_codel, where cake is missing).",
        short: "cake, or HTB + fq_codel",
        cli: Cli::Value("QDISC"), heading: Heading::Queueing, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::None, web: Web::Card,
        uci: None,
    }
    /// fq_codel only: 1 (one class) or 3 (priority / best effort / bulk by DSCP).
    tiers: u8 => {
        key: "tiers",
        example: "3",
        help: "fq_codel only: 1 class, or 3 classes by DSCP (priority, best effort, bulk) like \
               simple.qos.",
        short: "fq_codel: 1 or 3 classes",
        cli: Cli::Value("1|3"), heading: Heading::Queueing, qdisc: Some(Qdisc::FqCodel),
        refusal: "cake sorts DSCPs into tins itself (--diffserv)",
        dir: Dir::Both, words: Words::None, web: Web::More,
        uci: None,
    }
    link: LinkPreset => {
        key: "link",
        example: "vdsl2",
        help: "Link layer: ethernet, ether-vlan, docsis, vdsl2, bridged-ptm, pppoe-ptm, the ADSL \
               presets (pppoa-vcmux, pppoa-llc, pppoe-vcmux, pppoe-llcsnap, bridged-vcmux, \
               bridged-llcsnap, ipoa-vcmux, ipoa-llcsnap), conservative, raw. See `unbloat plan \
               --help`.",
        short: "the link's framing and overhead (man tc-cake)",
        cli: Cli::Value("PRESET"), heading: Heading::Link, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Keywords]), web: Web::Card,
        uci: None,
    }
    /// Bytes, -64..=256, overrides the preset's.
    overhead: i64 => {
        key: "overhead",
        example: "26",
        help: "Per-packet overhead in bytes on top of the IP packet (-64..256); overrides the \
               preset.",
        short: "bytes per packet, -64..256",
        cli: Cli::Value("BYTES"), heading: Heading::Link, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Value("overhead")]), web: Web::More,
        uci: None,
    }
    /// Bytes, 0..=256, overrides the preset's.
    mpu: i64 => {
        key: "mpu",
        example: "72",
        help: "Minimum packet unit in bytes (0..256); overrides the preset.",
        short: "minimum packet unit, bytes, 0..256",
        cli: Cli::Value("BYTES"), heading: Heading::Link, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Value("mpu")]), web: Web::More,
        uci: None,
    }
    /// atm | ptm | none, overrides an unframed preset; conflicts with a framed one.
    framing: Framing => {
        key: "framing",
        example: "atm",
        help: "Cell framing: atm (ADSL), ptm (VDSL2), none.",
        short: "cell framing",
        cli: Cli::Value("FRAMING"), heading: Heading::Link, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Keywords]), web: Web::More,
        uci: None,
    }
    /// Extra 802.1Q tags on top of the preset, 4 bytes each (cake's repeated `ether-vlan`).
    vlan: u32 => {
        key: "vlan",
        example: "1",
        help: "Extra 802.1Q VLAN tags (4 bytes each) on top of the preset.",
        short: "extra 802.1Q tags, 0..2",
        cli: Cli::Value("N"), heading: Heading::Link, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Counts("ether-vlan")]), web: Web::More,
        uci: None,
    }
    isolation: Isolation => {
        key: "isolation",
        example: "dual-host",
        help: "Flow isolation: dual-host (fair per LAN host: dual-srchost up, dual-dsthost down; \
               the default on a machine that forwards), triple-isolate (the default on one that \
               does not), hosts, flows, srchost, dsthost, dual-srchost, dual-dsthost, flowblind.",
        short: "flow isolation; dual-host: fair between LAN hosts",
        cli: Cli::Value("MODE"), heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Keywords]), web: Web::Card,
        uci: None,
    }
    nat: bool => {
        key: "nat",
        example: "true",
        help: "Look up NAT to find the real LAN hosts. The default: on when this machine \
               masquerades or source-NATs out of the interface (nftables or iptables), off \
               otherwise.",
        short: "look up NAT to see LAN hosts",
        cli: Cli::Pair("no-nat", "Never look up NAT, even where this machine masquerades."),
        heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both,
        words: Words::Cake(&[Word::Means("nat", "true"), Word::Means("nonat", "false")]),
        web: Web::Card,
        uci: None,
    }
    diffserv: Diffserv => {
        key: "diffserv",
        example: "diffserv8",
        help: "cake's DSCP tins: besteffort (default: one tin), diffserv3, diffserv4, diffserv8, \
               precedence.",
        short: "cake's DSCP tins",
        cli: Cli::Value("MODE"), heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both,
        // q_cake.c takes `diffserv` alone as diffserv4 (tc never prints it).
        words: Words::Cake(&[Word::Keywords, Word::Means("diffserv", "diffserv4")]),
        web: Web::Card,
        uci: None,
    }
    wash: bool => {
        key: "wash",
        example: "true",
        help: "Clear DSCP marks of incoming traffic (the ISP's marks mean nothing on your LAN).",
        short: "clear DSCP marks",
        cli: Cli::Switch, heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both,
        words: Words::Cake(&[Word::Means("wash", "true"), Word::Means("nowash", "false")]),
        web: Web::Card,
        uci: None,
    }
    /// true | false | "aggressive".
    #[serde(default, deserialize_with = "de_ack_filter")]
    ack_filter: AckFilter => {
        key: "ack-filter",
        example: "aggressive",
        help: "Drop redundant TCP ACKs on egress (more upload on very asymmetric links, burstier \
               downloads); `--ack-filter=aggressive`.",
        short: "cake's ACK filter (upload)",
        cli: Cli::Optional("MODE", "enabled"), heading: Heading::Queueing,
        qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::UploadKey, words: Words::Cake(&[Word::Keywords]), web: Web::Card,
        uci: None,
    }
    /// A time (`100ms`) or one of cake's names (`internet`, `metro`, ...).
    #[serde(default, deserialize_with = "de_rtt")]
    rtt: Time [parse = parse_rtt] => {
        key: "rtt",
        example: "50ms",
        help: "cake's rtt: a time with its unit (100ms) or internet, regional, metro, lan, \
               oceanic, satellite...",
        short: "cake's rtt: a time (100ms) or a name (internet)",
        cli: Cli::Value("TIME"), heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both,
        // tc/q_cake.c's `presets`, the interval column.
        words: Words::Cake(&[
            Word::Value("rtt"),
            Word::Means("datacentre", "100us"),
            Word::Means("lan", "1ms"),
            Word::Means("metro", "10ms"),
            Word::Means("regional", "30ms"),
            Word::Means("internet", "100ms"),
            Word::Means("oceanic", "300ms"),
            Word::Means("satellite", "1000ms"),
            Word::Means("interplanetary", "3600s"),
        ]),
        web: Web::More,
        uci: None,
    }
    /// cake's `ingress` mode on the IFB side (default from 4 Mbit/s).
    ingress_keyword: bool => {
        key: "ingress-keyword",
        example: "false",
        help: "Do not set cake's `ingress` mode on the download side (on by default from \
               4 Mbit/s).",
        short: "cake's ingress mode on the IFB",
        cli: Cli::Off("no-ingress-keyword"), heading: Heading::Queueing,
        qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Only(Direction::Ingress),
        words: Words::Cake(&[Word::Means("ingress", "true"), Word::Means("egress", "false")]),
        web: Web::More,
        uci: None,
    }
    split_gso: bool => {
        key: "split-gso",
        example: "false",
        help: "cake's split-gso (its default): segment GSO super-packets so that one does not \
               hold the link for long at low rates.",
        short: "cake's split-gso",
        cli: Cli::None, heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both,
        words: Words::Cake(&[
            Word::Means("split-gso", "true"),
            Word::Means("no-split-gso", "false"),
        ]),
        web: Web::More,
        uci: None,
    }
    memlimit: Size => {
        key: "memlimit",
        example: "32mb",
        help: "cake's memory limit for its queues (default: sized from the rate and rtt).",
        short: "cake's memory limit, e.g. 32mb",
        cli: Cli::None, heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Value("memlimit")]), web: Web::More,
        uci: None,
    }
    /// A mask of the packets' firewall mark that picks their tin; 0: off. Left out of unbloat's
    /// records when not said, so records written before it read back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fwmark: u32 [parse = mark_mask] => {
        key: "fwmark",
        example: "0xff",
        help: "Put packets in cake's tins by firewall mark: a mask (0xff) of the packet's mark; \
               where (mark & mask), shifted right past the mask's low zero bits, is N from 1 to \
               the number of tins, the packet goes to tin N (the first is bulk in diffserv4), \
               whatever its DSCP. Set the marks in your firewall (nftables `meta mark set`); needs \
               tins (--diffserv diffserv3, diffserv4 or diffserv8); 0 turns it off.",
        short: "cake's tin by firewall mark: a mask, e.g. 0xff",
        cli: Cli::Value("MASK"), heading: Heading::Queueing, qdisc: Some(Qdisc::Cake), refusal: "",
        dir: Dir::Both, words: Words::Cake(&[Word::Value("fwmark")]), web: Web::More,
        uci: None,
    }
    target: Time => {
        key: "target",
        example: "10ms",
        help: "fq_codel target delay, with its unit (default max(5ms, 1.5 packet times at the \
               rate)).",
        short: "fq_codel's target, e.g. 5ms",
        cli: Cli::Value("TIME"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_AQM,
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("target")]), web: Web::More,
        uci: None,
    }
    interval: Time => {
        key: "interval",
        example: "150ms",
        help: "fq_codel interval, with its unit (default 100ms + target - 5ms).",
        short: "fq_codel's interval, e.g. 100ms",
        cli: Cli::Value("TIME"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_AQM,
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("interval")]), web: Web::More,
        uci: None,
    }
    quantum: u32 [parse = quantum] => {
        key: "quantum",
        example: "1000",
        help: "fq_codel quantum in bytes (300 at low rates).",
        short: "fq_codel's quantum, bytes",
        cli: Cli::Value("BYTES"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: "cake sizes its quantum from the rate",
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("quantum")]), web: Web::More,
        uci: None,
    }
    limit: u32 => {
        key: "limit",
        example: "2000",
        help: "fq_codel queue limit in packets.",
        short: "fq_codel's packet limit",
        cli: Cli::Value("PACKETS"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_MEMORY,
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("limit")]), web: Web::More,
        uci: None,
    }
    flows: u32 => {
        key: "flows",
        example: "2048",
        help: "fq_codel's number of flow queues (the kernel's 1024).",
        short: "fq_codel's flows",
        cli: Cli::None, heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: "cake hashes into 1024 set-associative queues",
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("flows")]), web: Web::More,
        uci: None,
    }
    memory_limit: Size => {
        key: "memory-limit",
        example: "16mb",
        help: "fq_codel memory limit.",
        short: "fq_codel's memory limit",
        cli: Cli::Value("SIZE"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_MEMORY,
        dir: Dir::Both, words: Words::FqCodel(&[Word::Value("memory_limit")]), web: Web::More,
        uci: None,
    }
    ecn_egress: bool => {
        key: "ecn-egress",
        example: "false",
        help: "ECN on the upload side: on or off (default off at low rates).",
        short: "fq_codel: ECN upload",
        cli: Cli::Value("on|off"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_ECN,
        dir: Dir::Only(Direction::Egress), words: Words::FqCodel(ON_OFF), web: Web::More,
        uci: None,
    }
    ecn_ingress: bool => {
        key: "ecn-ingress",
        example: "false",
        help: "ECN on the download side: on or off (default on).",
        short: "fq_codel: ECN download",
        cli: Cli::Value("on|off"), heading: Heading::FqCodel, qdisc: Some(Qdisc::FqCodel),
        refusal: FQ_ECN,
        dir: Dir::Only(Direction::Ingress), words: Words::FqCodel(ON_OFF), web: Web::More,
        uci: None,
    }
    /// More options for the egress qdisc, in cake's / fq_codel's words.
    extra_egress: String => {
        key: "extra-egress",
        example: "wash",
        help: "More options for the upload qdisc in its own words (\"nat dual-srchost \
               ack-filter\"); each word is validated like a flag.",
        short: "more options for the upload qdisc, in its words",
        cli: Cli::Named("egress-options", "WORDS"), heading: Heading::Advanced, qdisc: None,
        refusal: "", dir: Dir::Only(Direction::Egress), words: Words::None, web: Web::More,
        uci: Some("eqdisc_opts"),
    }
    /// More options for the ingress (IFB) qdisc, in cake's / fq_codel's words.
    extra_ingress: String => {
        key: "extra-ingress",
        example: "ack-filter",
        help: "More options for the download qdisc in its own words (\"nat dual-dsthost \
               ingress\").",
        short: "more options for the download qdisc",
        cli: Cli::Named("ingress-options", "WORDS"), heading: Heading::Advanced, qdisc: None,
        refusal: "", dir: Dir::Only(Direction::Ingress), words: Words::None, web: Web::More,
        uci: Some("iqdisc_opts"),
    }
    /// The user confirms rates that could cut them off (`--i-mean-it`): below
    /// [`CUTOFF_RATE`](crate::spec::CUTOFF_RATE), or more than
    /// [`MAX_RATIO`](crate::spec::MAX_RATIO) times apart. Kept in unbloat's records with the rest,
    /// so the setup can be planned again from them.
    i_mean_it: bool => {
        key: "i-mean-it",
        example: "true",
        help: "Confirm rates that could cut you off from a remote box: below 64kbit, or one \
               direction over 1000 times the other (config key i-mean-it = true).",
        short: "confirm rates that could cut you off",
        cli: Cli::Switch, heading: Heading::Rates, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::None, web: Web::More,
        uci: None,
    }
    /// Classification rules and presets ([`crate::classify`]): `["gaming", "bulk lan-host
    /// 192.168.1.50"]`; the first rule that matches a connection chooses its tin. Left out of
    /// unbloat's records when not said, so records written before it read back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    classify: Vec<String> => {
        key: "classify",
        example: "gaming",
        help: "Put traffic in tins, both ways: a preset (gaming, video-calls) or a rule, TIN \
               (voice, video, besteffort, bulk) then what it matches: udp|tcp, port P[-Q][,...] \
               and addr PREFIX[,...] (the far end's), lan-host PREFIX[,...]. Repeat it; the first \
               rule that matches a connection wins; where none does, a LAN host's own mark (EF, \
               CS1, ...) is kept and its tin restored on the download. `auto` adds automatic \
               classes for the rest: past 500 packets/s one way for 5 s to bulk, at most 500 bytes \
               a packet on average to video (`auto bulk-pps N bulk-after Ns small-bytes N`). \
               Needs nftables and tc's ctinfo action; sets --diffserv diffserv4 (or --tiers 3) \
               unless chosen.",
        short: "classification rules and presets",
        cli: Cli::Repeated("RULE"), heading: Heading::Queueing, qdisc: None, refusal: "",
        dir: Dir::Both, words: Words::None, web: Web::Hidden,
        uci: None,
    }
}

/// `rtt` in a file: a number is read as if typed without a unit, so `rtt = 100` is refused as
/// `--rtt 100` is (write 100ms). `null` is what `Serialize` writes for an unset field.
fn de_rtt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum T {
        N(i64),
        F(f64),
        S(String),
    }
    let text = match Option::<T>::deserialize(d)? {
        None => return Ok(None),
        Some(T::N(n)) => n.to_string(),
        Some(T::F(f)) => f.to_string(),
        Some(T::S(s)) => s,
    };
    parse_rtt(&text).map(Some).map_err(serde::de::Error::custom)
}

/// `ack-filter` in a file: true, false or "aggressive"; "enabled" and "disabled" too, which is
/// what `Serialize` writes, so a stored ShapeOptions reads back (unbloat's state records).
fn de_ack_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AckFilter>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum A {
        B(bool),
        S(String),
    }
    match Option::<A>::deserialize(d)? {
        None => Ok(None),
        Some(A::B(b)) => Ok(Some(if b {
            AckFilter::Enabled
        } else {
            AckFilter::Disabled
        })),
        Some(A::S(s)) if s == "aggressive" => Ok(Some(AckFilter::Aggressive)),
        Some(A::S(s)) if s == "enabled" => Ok(Some(AckFilter::Enabled)),
        Some(A::S(s)) if s == "disabled" => Ok(Some(AckFilter::Disabled)),
        Some(A::S(s)) => Err(serde::de::Error::custom(format!(
            "invalid ack-filter {:?}: use true, false or \"aggressive\"",
            crate::clip::clip(&s)
        ))),
    }
}
