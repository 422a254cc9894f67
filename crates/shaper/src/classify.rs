//! Classification on the router (issue 40): rules that put a connection in a tin, both ways.
//!
//! Heads up! `nft(8)` (ct mark, `th`, sets, `return`), `tc-ctinfo(8)`; kernel
//! `net/sched/act_ctinfo.c` (`tcf_ctinfo_dscp_set`), `net/sched/sch_cake.c` (`cake_select_tin`,
//! the diffserv4 table); RFC 4594 (which DSCP for which service), RFC 8325 (the same classes on
//! Wi-Fi). The field's tools do the same with the same bits: qosify (eBPF), cake-qos-simple,
//! dscpclassify and qosmate (nftables + ctinfo).
//!
//! Almost nothing arrives marked: applications send DSCP 0 and ISPs bleach the download. So the
//! router decides, once per connection, and remembers it in the connection:
//!
//! - An nftables table of unbloat's own per WAN device (`inet unbloat_<dev>`), one chain at
//!   `postrouting` priority `mangle`: before masquerade (priority `srcnat`), so a LAN host's rule
//!   still sees the host's own address. The first rule that matches a connection's upload packet
//!   stores its tin's DSCP in the top six bits of the connection's mark, with a "set" bit
//!   ([`MARK_SET`]); the low 23 bits ([`MARK_KEEP`]) stay whatever other tools keep there.
//! - Each upload packet of a classified connection leaves with that DSCP, and the shaper's own
//!   DSCP table sorts it: cake's diffserv4 tins, or HTB's three tiers.
//! - The download: `ctinfo` on the WAN device's ingress filter, before the mirred redirect,
//!   writes the stored DSCP back into each packet of a classified connection ([`CTINFO_WORDS`]),
//!   so the IFB's cake sorts it too. A mark the ISP set or washed is overwritten.
//! - A client's own mark is kept unless a rule says otherwise. A connection no rule matched,
//!   whose upload packets the LAN host marked for a tin other than best effort (a VoIP phone's
//!   EF, a backup's CS1), is stored by that tin ([`CLIENT_TINS`], cake's diffserv4 table) with a
//!   "client" bit ([`MARK_CLIENT`]): its upload leaves with the client's own DSCP, untouched, and
//!   its download gets the tin's DSCP back, whatever the ISP wrote. A connection marked 0 (or
//!   best effort) no rule matched keeps the marks it arrives with both ways, unless the
//!   automatic classes ([`auto`]) place it later.
//!
//! Why nftables and ctinfo rather than an eBPF classifier like qosify's: both come with OpenWrt
//! (fw4 is nftables; `kmod-sched-ctinfo`) and with Debian's kernel and `nftables` package, need
//! no compiler or loader at build or run time, and `nft list table` shows exactly what runs.
//!
//! A rule is one line of words: the tin first, then what it matches, each at most once:
//! `voice udp port 3074-3079`, `video port 3478-3481,8801-8810`, `bulk lan-host 192.168.1.50`,
//! `voice addr 2001:db8::/32`. `port` and `addr` are the far end's (the internet side's);
//! `lan-host` is the LAN side's address before NAT. A rule must match something: a rule for
//! everything prioritises nothing. Presets ([`PRESETS`]) are named lists of rules.

pub mod auto;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use unbloat_units::{Dscp, IfName};

/// The connection mark's bits unbloat uses: DSCP << 26, and the "set" bit below it. ctinfo's
/// `dscp MASK STATEMASK` restores the DSCP from exactly these.
pub const MARK_DSCP_MASK: u32 = 0xfc00_0000;
pub const MARK_SET: u32 = 0x0100_0000;
/// Set beside [`MARK_SET`] when the tin came from the client's own mark, not a rule. The
/// postrouting chain's `dscp set` lines compare this bit too, so they pass over such a
/// connection and its upload keeps the client's DSCP.
pub const MARK_CLIENT: u32 = 0x0200_0000;
/// Set beside [`MARK_SET`] when the tin came from the automatic classes ([`auto`]), which keep
/// watching the connection.
pub const MARK_AUTO: u32 = 0x0080_0000;
/// The bits of the mark unbloat leaves alone.
pub const MARK_KEEP: u32 = !(MARK_DSCP_MASK | MARK_CLIENT | MARK_SET | MARK_AUTO);

/// The DSCPs a client may send that cake's diffserv4 puts outside best effort, by tin
/// (`net/sched/sch_cake.c`, `diffserv4[]`): a connection no rule matched is stored by these.
pub const CLIENT_TINS: [(Tin, &[u8]); 3] = [
    // CS4, CS5, VA, EF, CS6, CS7.
    (Tin::Voice, &[32, 40, 44, 46, 48, 56]),
    // TOS4, CS2, AF2x, CS3, AF3x, AF4x.
    (Tin::Video, &[4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38]),
    // LE, CS1.
    (Tin::Bulk, &[1, 8]),
];

/// The ingress filter's action before the redirect: the DSCP back from the connection's mark.
pub const CTINFO_WORDS: [&str; 6] = [
    "action",
    "ctinfo",
    "dscp",
    "0xfc000000",
    "0x01000000",
    "pipe",
];

/// The four classes a rule can choose, cake's diffserv4 tins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tin {
    Voice,
    Video,
    Besteffort,
    Bulk,
}

impl Tin {
    pub const ALL: [Tin; 4] = [Tin::Voice, Tin::Video, Tin::Besteffort, Tin::Bulk];

    pub fn word(self) -> &'static str {
        match self {
            Tin::Voice => "voice",
            Tin::Video => "video",
            Tin::Besteffort => "besteffort",
            Tin::Bulk => "bulk",
        }
    }

    /// The DSCP that puts a packet in this tin with cake's diffserv3/4/8 and HTB's tiers
    /// (RFC 4594: EF for telephony, AF41 for interactive video, CS1 for low-priority data).
    pub fn dscp(self) -> Dscp {
        match self {
            Tin::Voice => Dscp::EF,
            Tin::Video => Dscp::new(34).unwrap_or(Dscp::BE),
            Tin::Besteffort => Dscp::BE,
            Tin::Bulk => Dscp::CS1,
        }
    }

    /// The connection mark that stores this tin (before the bits unbloat leaves alone).
    pub fn mark(self) -> u32 {
        (u32::from(self.dscp().value()) << 26) | MARK_SET
    }

    fn parse(w: &str) -> Option<Tin> {
        match w {
            "voice" => Some(Tin::Voice),
            "video" => Some(Tin::Video),
            "besteffort" | "best-effort" => Some(Tin::Besteffort),
            "bulk" => Some(Tin::Bulk),
            _ => None,
        }
    }
}

impl fmt::Display for Tin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// The transport a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

/// An address or prefix, host bits clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == full {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

/// One rule, as the user wrote it and as it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub tin: Tin,
    pub proto: Option<Proto>,
    /// The far end's ports, each `(first, last)`.
    pub ports: Vec<(u16, u16)>,
    /// The far end's addresses.
    pub addr: Vec<Prefix>,
    /// The LAN side's addresses (before NAT).
    pub lan_host: Vec<Prefix>,
    /// The words it was read from, for `plan`, `status` and nft's comment.
    pub text: String,
}

/// Presets users can read: each a name and its rules.
pub const PRESETS: &[(&str, &[&str])] = &[
    (
        // Console and PC game traffic: Xbox Live and Call of Duty (3074-3079), Valve's game
        // servers (27000-27100). PlayStation Network's STUN ports (3478-3480) are the calls'.
        "gaming",
        &["voice udp port 3074-3079", "voice udp port 27000-27100"],
    ),
    (
        // Video calls' media: STUN/TURN as WebRTC, Teams and FaceTime use it (3478-3481), Zoom
        // (8801-8810), Google Meet (19302-19309).
        "video-calls",
        &[
            "video udp port 3478-3481",
            "video udp port 8801-8810",
            "video udp port 19302-19309",
        ],
    ),
];

/// Why a rule was refused: the rule, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {rule:?}: {why}")]
pub struct RuleError {
    pub rule: String,
    pub why: String,
}

/// What the entries of `--classify` ask for: rules, and the automatic classes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classes {
    pub rules: Vec<Rule>,
    pub auto: Option<auto::Auto>,
}

impl Classes {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.auto.is_none()
    }

    /// Whether a rule or the automatic classes put connections in `tin`.
    pub fn uses(&self, tin: Tin) -> bool {
        self.rules.iter().any(|r| r.tin == tin)
            || (self.auto.is_some() && matches!(tin, Tin::Video | Tin::Bulk))
    }
}

/// The classes of `entries` (preset names, rule lines, `auto`), the rules in order: the first
/// that matches wins.
pub fn classes(entries: &[String]) -> Result<Classes, RuleError> {
    let mut out = Classes::default();
    for entry in entries {
        let entry = entry.trim();
        if let Some((_, lines)) = PRESETS.iter().find(|(name, _)| *name == entry) {
            for line in lines.iter() {
                out.rules.push(parse(line)?);
            }
        } else if entry.split_whitespace().next() == Some(auto::WORD) {
            let err = |why: String| RuleError {
                rule: crate::clip::clip(entry).into_owned(),
                why,
            };
            if out.auto.is_some() {
                return Err(err("automatic classes named twice".into()));
            }
            out.auto = Some(auto::parse(entry).map_err(err)?);
        } else {
            out.rules.push(parse(entry)?);
        }
    }
    Ok(out)
}

/// One rule line.
pub fn parse(line: &str) -> Result<Rule, RuleError> {
    let err = |why: String| RuleError {
        rule: crate::clip::clip(line).into_owned(),
        why,
    };
    let presets: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
    let mut words = line.split_whitespace();
    let first = words.next().ok_or_else(|| err("empty".into()))?;
    let tin = Tin::parse(first).ok_or_else(|| {
        err(format!(
            "starts with {:?}, which is neither a tin ({}), a preset ({}) nor {:?}",
            crate::clip::clip(first),
            Tin::ALL.map(Tin::word).join(", "),
            presets.join(", "),
            auto::WORD
        ))
    })?;
    let mut rule = Rule {
        tin,
        proto: None,
        ports: vec![],
        addr: vec![],
        lan_host: vec![],
        text: words_joined(line),
    };
    let mut seen = vec![];
    while let Some(w) = words.next() {
        if seen.contains(&w) {
            return Err(err(format!(
                "{w:?} twice; list several values after one {w:?} with commas"
            )));
        }
        seen.push(w);
        let mut value = |what: &str| {
            words
                .next()
                .ok_or_else(|| err(format!("{w:?} needs {what} after it")))
        };
        match w {
            "udp" | "tcp" if rule.proto.is_some() => {
                return Err(err("one of udp or tcp, not both (or neither: both)".into()))
            }
            "udp" => rule.proto = Some(Proto::Udp),
            "tcp" => rule.proto = Some(Proto::Tcp),
            "port" => rule.ports = ports(value("a port or a range, like 3074-3079")?).map_err(err)?,
            "addr" => rule.addr = prefixes(value("an address or prefix")?).map_err(err)?,
            "lan-host" => rule.lan_host = prefixes(value("an address or prefix")?).map_err(err)?,
            _ => {
                return Err(err(format!(
                    "unknown word {:?}; a rule is TIN then any of udp|tcp, port P[-Q][,...], addr PREFIX[,...], lan-host PREFIX[,...]",
                    crate::clip::clip(w)
                )))
            }
        }
    }
    if rule.ports.is_empty() && rule.addr.is_empty() && rule.lan_host.is_empty() {
        return Err(err(
            "matches everything (or only a protocol); a rule must name a port, an addr or a lan-host: prioritising everything helps nothing".into(),
        ));
    }
    let families: Vec<bool> = rule
        .addr
        .iter()
        .chain(&rule.lan_host)
        .map(|p| p.addr.is_ipv4())
        .collect();
    if families.windows(2).any(|w| w[0] != w[1]) {
        return Err(err(
            "mixes IPv4 and IPv6 addresses; write one rule for each".into(),
        ));
    }
    Ok(rule)
}

fn words_joined(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn ports(text: &str) -> Result<Vec<(u16, u16)>, String> {
    let one = |p: &str| -> Result<u16, String> {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("port {p:?} is not a number 1..65535")),
        }
    };
    text.split(',')
        .map(|part| {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (one(a)?, one(b)?),
                None => (one(part)?, one(part)?),
            };
            if a > b {
                return Err(format!("port range {part:?} runs backwards; write {b}-{a}"));
            }
            Ok((a, b))
        })
        .collect()
}

fn prefixes(text: &str) -> Result<Vec<Prefix>, String> {
    text.split(',').map(prefix).collect()
}

fn prefix(text: &str) -> Result<Prefix, String> {
    let bad = || {
        format!(
            "{:?} is not an address or prefix (192.168.1.0/24, 2001:db8::/32)",
            crate::clip::clip(text)
        )
    };
    let (a, l) = text.split_once('/').unwrap_or((text, ""));
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let full = if addr.is_ipv4() { 32 } else { 128 };
    let len = if l.is_empty() {
        full
    } else {
        l.parse::<u8>().map_err(|_| bad())?
    };
    if len > full {
        return Err(format!(
            "{text:?}: a prefix of {len} bits is longer than the address ({full})"
        ));
    }
    let masked = mask(addr, len);
    if masked != addr {
        return Err(format!(
            "{text:?} has host bits set; the prefix is {masked}/{len}"
        ));
    }
    Ok(Prefix { addr, len })
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// What a plan classifies on one WAN device: its nftables table and its rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classifier {
    pub wan: IfName,
    pub rules: Vec<Rule>,
    /// The automatic classes, if asked for (absent from the state files of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<auto::Auto>,
}

impl Classifier {
    /// unbloat's table for this device: `unbloat_` and the name with every byte but a letter or
    /// digit written `_xx` in hex, so two devices never share one and nft reads it unquoted.
    pub fn table(&self) -> String {
        table_name(&self.wan)
    }

    /// `nft -f` text that puts the table in place in one transaction: created if missing (so the
    /// delete cannot fail), deleted, and written whole.
    pub fn nft_text(&self) -> String {
        let t = self.table();
        let mut s = format!("table inet {t}\ndelete table inet {t}\ntable inet {t} {{\n");
        s.push_str("\tchain postrouting {\n\t\ttype filter hook postrouting priority mangle; policy accept;\n");
        s.push_str(&format!("\t\toifname != \"{}\" return\n", self.wan));
        // Each connection is classified once; the rules' chain returns at the first match, and
        // a connection none matched goes by the client's own mark, if it has one.
        s.push_str(&format!("\t\tct mark & {MARK_SET:#010x} == 0 jump rules\n"));
        s.push_str(&format!(
            "\t\tct mark & {MARK_SET:#010x} == 0 jump client\n"
        ));
        if let Some(a) = &self.auto {
            s.push_str(&format!("\t\t{}", a.upload_jump()));
        }
        for tin in Tin::ALL {
            let dscp = tin.dscp().name().unwrap_or("cs0").to_ascii_lowercase();
            for family in ["ip", "ip6"] {
                s.push_str(&format!(
                    "\t\tct mark & {:#010x} == {:#010x} {family} dscp set {dscp}\n",
                    MARK_DSCP_MASK | MARK_CLIENT | MARK_SET,
                    tin.mark()
                ));
            }
        }
        s.push_str("\t}\n\tchain rules {\n");
        for (i, r) in self.rules.iter().enumerate() {
            s.push_str(&format!("\t\t{}\n", rule_line(i + 1, r)));
        }
        s.push_str("\t}\n\tchain client {\n");
        for (tin, dscps) in CLIENT_TINS {
            let set: Vec<String> = dscps.iter().map(u8::to_string).collect();
            for family in ["ip", "ip6"] {
                s.push_str(&format!(
                    "\t\t{family} dscp {{ {} }} counter ct mark set ct mark & {MARK_KEEP:#010x} | {:#010x} comment \"{}\"\n",
                    set.join(", "),
                    tin.mark() | MARK_CLIENT,
                    client_comment(tin)
                ));
            }
        }
        s.push_str("\t}\n");
        if let Some(a) = &self.auto {
            s.push_str(&a.nft_text(self.wan.as_str()));
        }
        s.push_str("}\n");
        s
    }
}

/// One rule's counter, as `nft -j list table` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCount {
    /// The rule's number and words (its comment).
    pub rule: String,
    pub packets: u64,
    pub bytes: u64,
}

/// The counters from `nft -j list table inet unbloat_<dev>`, in order: the rules', then the
/// client's own marks', one per tin (its IPv4 and IPv6 lines added up), then the automatic
/// classes', one per class (both directions added up). Each counts connections: a line runs once
/// per connection it places.
pub fn counters(json: &str) -> Result<Vec<RuleCount>, String> {
    let items = listing(json)?;
    let mut out = chain_counters(&items, "rules");
    out.extend(chain_counters(&items, "client"));
    let mut auto = chain_counters(&items, "auto_up");
    for c in chain_counters(&items, "auto_down") {
        match auto.iter_mut().find(|a| a.rule == c.rule) {
            Some(a) => {
                a.packets += c.packets;
                a.bytes += c.bytes;
            }
            None => auto.push(c),
        }
    }
    out.extend(auto);
    Ok(out)
}

/// The items of `nft -j list table`, read once for every question asked of them.
fn listing(json: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("nft -j: {e}"))?;
    match v["nftables"].take() {
        serde_json::Value::Array(items) => Ok(items),
        _ => Err("nft -j: no \"nftables\" list".into()),
    }
}

/// One chain's counters, lines with the same comment next to each other added up.
fn chain_counters(items: &[serde_json::Value], chain: &str) -> Vec<RuleCount> {
    let mut out: Vec<RuleCount> = vec![];
    for r in items
        .iter()
        .filter_map(|i| i.get("rule"))
        .filter(|r| r["chain"] == chain)
    {
        // Lines without a counter only steer (the automatic classes' early return).
        let Some(counter) = r["expr"]
            .as_array()
            .and_then(|e| e.iter().find_map(|x| x.get("counter")))
        else {
            continue;
        };
        let n = |k: &str| counter[k].as_u64().unwrap_or(0);
        let rule = r["comment"].as_str().unwrap_or("").to_string();
        match out.last_mut() {
            Some(last) if last.rule == rule => {
                last.packets += n("packets");
                last.bytes += n("bytes");
            }
            _ => out.push(RuleCount {
                rule,
                packets: n("packets"),
                bytes: n("bytes"),
            }),
        }
    }
    out
}

/// The comment of the client chain's lines for `tin`, as `status` shows it.
fn client_comment(tin: Tin) -> String {
    format!("no rule: the client's own mark, {tin}")
}

impl Classifier {
    /// How the table nft lists differs from this one: its hook chain, its rules and the client
    /// chain's lines, in order, by their comments (nft prints the matches its own way, so those
    /// are not compared).
    pub fn mismatches(&self, json: &str) -> Vec<String> {
        let table = self.table();
        let items = match listing(json) {
            Ok(items) => items,
            Err(e) => return vec![format!("table inet {table}: no postrouting chain"), e],
        };
        let mut out = vec![];
        // A base chain of ours, named after its hook.
        let hooked = |hook: &str| {
            items
                .iter()
                .filter_map(|i| i.get("chain"))
                .any(|c| c["name"] == hook && c["hook"] == hook && c["table"] == table)
        };
        if !hooked("postrouting") {
            out.push(format!("table inet {table}: no postrouting chain"));
        }
        let rules: Vec<String> = (1..).zip(&self.rules).map(|(n, r)| r.comment(n)).collect();
        let client: Vec<String> = CLIENT_TINS
            .iter()
            .map(|(t, _)| client_comment(*t))
            .collect();
        let mut chains = vec![("rules", rules), ("client", client)];
        if let Some(a) = &self.auto {
            chains.push(("auto_up", a.comments().to_vec()));
            chains.push(("auto_down", a.comments().to_vec()));
            if !hooked("prerouting") {
                out.push(format!("table inet {table}: no prerouting chain"));
            }
        }
        for (chain, want) in chains {
            let got: Vec<String> = chain_counters(&items, chain)
                .into_iter()
                .map(|c| c.rule)
                .collect();
            if got != want {
                out.push(format!(
                    "table inet {table}: chain {chain} has {got:?}, expected {want:?}"
                ));
            }
        }
        out
    }
}

impl Rule {
    /// nft's comment of the `n`th rule: its number and words, cut to nft's 128 bytes (the words
    /// are ASCII: every one was checked).
    pub fn comment(&self, n: usize) -> String {
        let mut c = format!("{n} {}", self.text);
        c.truncate(120);
        c
    }
}

/// `nft -f` text that removes the table of `wan`, and succeeds when there is none.
pub fn delete_text(wan: &IfName) -> String {
    let t = table_name(wan);
    format!("table inet {t}\ndelete table inet {t}\n")
}

pub fn table_name(wan: &IfName) -> String {
    let mut t = String::from("unbloat_");
    for b in wan.as_str().bytes() {
        if b.is_ascii_alphanumeric() {
            t.push(b as char);
        } else {
            t.push_str(&format!("_{b:02x}"));
        }
    }
    t
}

fn set<T: fmt::Display>(items: &[T]) -> String {
    if items.len() == 1 {
        items[0].to_string()
    } else {
        let v: Vec<String> = items.iter().map(|i| i.to_string()).collect();
        format!("{{ {} }}", v.join(", "))
    }
}

/// One rule's nft line: its matches, a counter, the mark, and `return` (first match wins). The
/// comment carries the rule's number and words, which `status` reads back with the counter.
fn rule_line(n: usize, r: &Rule) -> String {
    let mut m: Vec<String> = vec![];
    let ports: Vec<String> = r
        .ports
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    match (r.proto, ports.is_empty()) {
        (Some(Proto::Udp), _) => m.push("meta l4proto udp".into()),
        (Some(Proto::Tcp), _) => m.push("meta l4proto tcp".into()),
        (None, false) => m.push("meta l4proto { tcp, udp }".into()),
        (None, true) => {}
    }
    if !ports.is_empty() {
        m.push(format!("th dport {}", set(&ports)));
    }
    let family = |p: &[Prefix]| if p[0].addr.is_ipv4() { "ip" } else { "ip6" };
    if !r.addr.is_empty() {
        m.push(format!("{} daddr {}", family(&r.addr), set(&r.addr)));
    }
    if !r.lan_host.is_empty() {
        m.push(format!(
            "{} saddr {}",
            family(&r.lan_host),
            set(&r.lan_host)
        ));
    }
    format!(
        "{} counter ct mark set ct mark & {MARK_KEEP:#010x} | {:#010x} return comment \"{}\"",
        m.join(" "),
        r.tin.mark(),
        r.comment(n)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_rule_reads_as_the_user_wrote_it() {
        let r = parse("voice  udp port 3074-3079,3478 addr 203.0.113.0/24").unwrap();
        assert_eq!(r.tin, Tin::Voice);
        assert_eq!(r.proto, Some(Proto::Udp));
        assert_eq!(r.ports, [(3074, 3079), (3478, 3478)]);
        assert_eq!(r.addr[0].to_string(), "203.0.113.0/24");
        assert_eq!(r.text, "voice udp port 3074-3079,3478 addr 203.0.113.0/24");
        let h = parse("bulk lan-host 2001:db8::10").unwrap();
        assert_eq!(h.lan_host[0].to_string(), "2001:db8::10");
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (line, says) in [
            ("urgent udp port 1", "neither a tin"),
            ("voice udp port 0", "not a number 1..65535"),
            ("voice udp port 70000", "not a number 1..65535"),
            ("voice port 3079-3074", "runs backwards; write 3074-3079"),
            ("voice addr 10.0.0.300", "not an address or prefix"),
            (
                "voice addr 192.168.1.5/24",
                "host bits set; the prefix is 192.168.1.0/24",
            ),
            ("voice addr 10.0.0.0/33", "longer than the address"),
            ("voice udp", "must name a port"),
            ("voice", "must name a port"),
            ("voice udp tcp port 1", "not both"),
            ("voice port 1 port 2", "twice"),
            ("voice port", "needs a port"),
            ("voice dport 1", "unknown word \"dport\""),
            (
                "voice addr 10.0.0.0/8 lan-host fd00::/8",
                "mixes IPv4 and IPv6",
            ),
        ] {
            let e = parse(line).expect_err(line).to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn presets_expand_in_place_and_a_rule_beside_them_keeps_its_order() {
        let r = classes(&s(&["bulk lan-host 192.168.1.50", "gaming"]))
            .unwrap()
            .rules;
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].tin, Tin::Bulk);
        assert!(r[1..].iter().all(|r| r.tin == Tin::Voice));
        assert!(classes(&s(&["video-calls"]))
            .unwrap()
            .rules
            .iter()
            .all(|r| r.tin == Tin::Video));
    }

    #[test]
    fn the_table_stores_the_tin_in_the_connection_and_sets_it_on_the_upload() {
        let c = Classifier {
            wan: "wan0".parse().unwrap(),
            rules: classes(&s(&[
                "voice udp port 3074",
                "bulk lan-host 192.168.1.50,192.168.1.64/26",
            ]))
            .unwrap()
            .rules,
            auto: None,
        };
        let text = c.nft_text();
        assert!(text.starts_with(
            "table inet unbloat_wan0\ndelete table inet unbloat_wan0\ntable inet unbloat_wan0 {\n"
        ));
        assert!(text.contains("oifname != \"wan0\" return\n"), "{text}");
        assert!(text.contains(
            "meta l4proto udp th dport 3074 counter ct mark set ct mark & 0x007fffff | 0xb9000000 return comment \"1 voice udp port 3074\""
        ), "{text}");
        assert!(text.contains(
            "ip saddr { 192.168.1.50, 192.168.1.64/26 } counter ct mark set ct mark & 0x007fffff | 0x21000000 return comment \"2 bulk"
        ), "{text}");
        // The rules' tins set the upload's DSCP; a client's own mark (its bit set) is left.
        assert!(
            text.contains("ct mark & 0xff000000 == 0xb9000000 ip6 dscp set ef\n"),
            "{text}"
        );
        assert!(
            text.contains("ct mark & 0xff000000 == 0x89000000 ip dscp set af41\n"),
            "{text}"
        );
        assert!(
            text.contains("ct mark & 0xff000000 == 0x01000000 ip dscp set cs0\n"),
            "{text}"
        );
        // A connection no rule matched goes by the client's mark, stored with its bit.
        let jumps = text.find("jump rules\n").unwrap();
        assert!(
            text[jumps..].starts_with("jump rules\n\t\tct mark & 0x01000000 == 0 jump client\n"),
            "{text}"
        );
        assert!(text.contains(
            "\t\tip6 dscp { 32, 40, 44, 46, 48, 56 } counter ct mark set ct mark & 0x007fffff | 0xbb000000 comment \"no rule: the client's own mark, voice\"\n"
        ), "{text}");
        assert!(text.contains(
            "\t\tip dscp { 1, 8 } counter ct mark set ct mark & 0x007fffff | 0x23000000 comment \"no rule: the client's own mark, bulk\"\n"
        ), "{text}");
        assert_eq!(
            delete_text(&c.wan),
            "table inet unbloat_wan0\ndelete table inet unbloat_wan0\n"
        );
    }

    /// nft 1.0.6's `-j list table` of a table like ours (trimmed to what is read).
    const LISTING: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
      {"table": {"family": "inet", "name": "unbloat_wan0", "handle": 3}},
      {"chain": {"family": "inet", "table": "unbloat_wan0", "name": "postrouting", "handle": 1, "type": "filter", "hook": "postrouting", "prio": -150, "policy": "accept"}},
      {"chain": {"family": "inet", "table": "unbloat_wan0", "name": "rules", "handle": 2}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "rules", "handle": 8, "comment": "1 voice udp port 3074", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 3074}}, {"counter": {"packets": 1, "bytes": 78}}, {"return": null}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "rules", "handle": 12, "comment": "2 video addr 10.9.0.2", "expr": [{"counter": {"packets": 3, "bytes": 300}}, {"return": null}]}},
      {"chain": {"family": "inet", "table": "unbloat_wan0", "name": "client", "handle": 3}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 20, "comment": "no rule: the client's own mark, voice", "expr": [{"counter": {"packets": 2, "bytes": 200}}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 21, "comment": "no rule: the client's own mark, voice", "expr": [{"counter": {"packets": 1, "bytes": 120}}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 22, "comment": "no rule: the client's own mark, video", "expr": [{"counter": {"packets": 0, "bytes": 0}}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 23, "comment": "no rule: the client's own mark, video", "expr": [{"counter": {"packets": 0, "bytes": 0}}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 24, "comment": "no rule: the client's own mark, bulk", "expr": [{"counter": {"packets": 0, "bytes": 0}}]}},
      {"rule": {"family": "inet", "table": "unbloat_wan0", "chain": "client", "handle": 25, "comment": "no rule: the client's own mark, bulk", "expr": [{"counter": {"packets": 0, "bytes": 0}}]}}]}"#;

    #[test]
    fn the_listing_gives_each_rule_its_counter_and_shows_what_differs() {
        let c = Classifier {
            wan: "wan0".parse().unwrap(),
            rules: classes(&s(&["voice udp port 3074", "video addr 10.9.0.2"]))
                .unwrap()
                .rules,
            auto: None,
        };
        let n = counters(LISTING).unwrap();
        assert_eq!(
            (n[0].rule.as_str(), n[0].packets, n[0].bytes),
            ("1 voice udp port 3074", 1, 78)
        );
        assert_eq!(n[1].packets, 3);
        // The client's marks: one count per tin, its IPv4 and IPv6 lines added up.
        assert_eq!(n.len(), 5, "{n:?}");
        assert_eq!(
            (n[2].rule.as_str(), n[2].packets, n[2].bytes),
            ("no rule: the client's own mark, voice", 3, 320)
        );
        assert!(
            c.mismatches(LISTING).is_empty(),
            "{:?}",
            c.mismatches(LISTING)
        );
        let fewer = Classifier {
            rules: c.rules[..1].to_vec(),
            ..c.clone()
        };
        assert!(fewer.mismatches(LISTING)[0].contains("expected [\"1 voice udp port 3074\"]"));
        let other = Classifier {
            wan: "wan1".parse().unwrap(),
            ..c
        };
        assert!(other.mismatches(LISTING)[0].contains("no postrouting chain"));
        // A table from before the client chain is one to write again.
        let cut = LISTING.find(",\n      {\"chain\": {\"family\": \"inet\", \"table\": \"unbloat_wan0\", \"name\": \"client\"").unwrap();
        let old = format!("{}]}}", &LISTING[..cut]);
        assert!(
            fewer
                .mismatches(&old)
                .iter()
                .any(|m| m.contains("chain client has []")),
            "{:?}",
            fewer.mismatches(&old)
        );
    }

    #[test]
    fn a_long_rule_s_comment_fits_nft() {
        let many: Vec<String> = (1..40).map(|i| format!("10.0.{i}.0/24")).collect();
        let r = parse(&format!("bulk addr {}", many.join(","))).unwrap();
        assert!(r.comment(12).len() <= 128);
        assert!(r.comment(12).starts_with("12 bulk addr 10.0.1.0/24"));
    }

    #[test]
    fn table_names_never_collide_and_need_no_quotes() {
        let n = |s: &str| table_name(&s.parse().unwrap());
        assert_eq!(n("eth0.7"), "unbloat_eth0_2e7");
        assert_eq!(n("eth0_2e7"), "unbloat_eth0_5f2e7");
        assert_eq!(n("pppoe-wan"), "unbloat_pppoe_2dwan");
    }
}
