//! The keys of an `[interface.NAME]` table as the page's form shows them: kind, choices, help,
//! and whether they sit under "more options". The order is the example config's.

use serde::Serialize;
use unbloat_shaper::cake;
use unbloat_shaper::options::ISOLATION_NAMES;

/// How the page edits a key.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A rate with its unit (`78mbit`): written as a TOML string.
    Rate,
    /// Any other string (a time, a size, an option string).
    Text,
    /// A whole number, written as a TOML integer when it is one.
    Int,
    /// true or false.
    Bool,
    /// One of `choices` (`true`/`false` are written as booleans: ack-filter's values).
    Choice,
}

/// One key of an `[interface.NAME]` table, as the form shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Field {
    pub key: &'static str,
    pub kind: Kind,
    pub choices: &'static [&'static str],
    pub help: &'static str,
    /// Shown under "more options" rather than on the card.
    pub more: bool,
}

const fn f(key: &'static str, kind: Kind, help: &'static str) -> Field {
    Field {
        key,
        kind,
        choices: &[],
        help,
        more: false,
    }
}

const fn choice(key: &'static str, choices: &'static [&'static str], help: &'static str) -> Field {
    Field {
        key,
        kind: Kind::Choice,
        choices,
        help,
        more: false,
    }
}

const fn flag(key: &'static str, help: &'static str) -> Field {
    Field {
        key,
        kind: Kind::Bool,
        choices: &["true", "false"],
        help,
        more: false,
    }
}

const fn more(mut field: Field) -> Field {
    field.more = true;
    field
}

/// Every key of ShapeOptions (a test checks that none is missing and that every choice is one
/// the validator takes), in the order of the example config.
pub const FIELDS: &[Field] = &[
    f(
        "down",
        Kind::Rate,
        "download shaper rate with its unit, e.g. 78mbit",
    ),
    f(
        "up",
        Kind::Rate,
        "upload shaper rate with its unit, e.g. 19950kbit",
    ),
    choice("qdisc", &["cake", "fq_codel"], "cake, or HTB + fq_codel"),
    choice(
        "link",
        &[
            "ethernet",
            "ether-vlan",
            "docsis",
            "vdsl2",
            "bridged-ptm",
            "pppoe-ptm",
            "ipoa-vcmux",
            "ipoa-llcsnap",
            "bridged-vcmux",
            "bridged-llcsnap",
            "pppoa-vcmux",
            "pppoa-llc",
            "pppoe-vcmux",
            "pppoe-llcsnap",
            "conservative",
            "raw",
            "none",
        ],
        "the link's framing and overhead (man tc-cake)",
    ),
    // cake's words and unbloat's isolations, from the shaper's one list of each.
    choice("diffserv", cake::words::DIFFSERV_WORDS, "cake's DSCP tins"),
    choice(
        "isolation",
        ISOLATION_NAMES,
        "flow isolation; dual-host: fair between LAN hosts",
    ),
    flag("nat", "look up NAT to see LAN hosts"),
    choice(
        "ack-filter",
        &["true", "false", "aggressive"],
        "cake's ACK filter (upload)",
    ),
    flag("wash", "clear DSCP marks"),
    more(f("overhead", Kind::Int, "bytes per packet, -64..256")),
    more(f("mpu", Kind::Int, "minimum packet unit, bytes, 0..256")),
    more(choice("framing", &["none", "atm", "ptm"], "cell framing")),
    more(f("vlan", Kind::Int, "extra 802.1Q tags, 0..2")),
    more(f(
        "rtt",
        Kind::Text,
        "cake's rtt: a time (100ms) or a name (internet)",
    )),
    more(f("tiers", Kind::Int, "fq_codel: 1 or 3 classes")),
    more(flag("ingress-keyword", "cake's ingress mode on the IFB")),
    more(flag("split-gso", "cake's split-gso")),
    more(f("memlimit", Kind::Text, "cake's memory limit, e.g. 32mb")),
    more(f("target", Kind::Text, "fq_codel's target, e.g. 5ms")),
    more(f("interval", Kind::Text, "fq_codel's interval, e.g. 100ms")),
    more(f("quantum", Kind::Int, "fq_codel's quantum, bytes")),
    more(f("limit", Kind::Int, "fq_codel's packet limit")),
    more(f("flows", Kind::Int, "fq_codel's flows")),
    more(f("memory-limit", Kind::Text, "fq_codel's memory limit")),
    more(flag("ecn-egress", "fq_codel: ECN upload")),
    more(flag("ecn-ingress", "fq_codel: ECN download")),
    more(f(
        "extra-egress",
        Kind::Text,
        "more options for the upload qdisc, in its words",
    )),
    more(f(
        "extra-ingress",
        Kind::Text,
        "more options for the download qdisc",
    )),
    more(flag("i-mean-it", "confirm rates that could cut you off")),
];
