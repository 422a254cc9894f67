//! Fair per LAN host out of the box: what the machine looks like -> cake's isolation and `nat`,
//! and the one line that says why (issue 18).
//!
//! Heads up! `man tc-cake`, FLOW ISOLATION PARAMETERS and `nat`; kernel `net/sched/sch_cake.c`
//! (`cake_update_flowkeys`: the NAT lookup asks conntrack for the pre-NAT tuple, IPv4 only);
//! OpenWrt's SQM guide ("nat dual-srchost" on egress, "nat dual-dsthost" on ingress).
//!
//! Why a default needs the machine: cake's `triple-isolate` is fair between hosts on both sides
//! without knowing which side is the LAN, but when every flow goes to one far end (a speed test,
//! a CDN) its per-destination fairness folds all LAN hosts into one, and what is left is per-flow
//! fairness: a host with eight flows gets eight ninths of the link. Behind a masquerade every LAN
//! host also looks like the router itself unless cake asks conntrack (`nat`). So:
//!
//! - the machine NATs (masquerade or SNAT) IPv4 out of the WAN: `dual-host` (dual-srchost up,
//!   dual-dsthost down) and `nat`;
//! - it forwards (IPv4 or IPv6) without NAT on the WAN: `dual-host`, `nonat` (the addresses cake
//!   sees are the LAN hosts' own; routed IPv6 is this case);
//! - it forwards nothing: the traffic is its own, and cake's `triple-isolate` stays (nothing a
//!   user would notice changes);
//! - HTB + fq_codel: fq_codel hashes flows, not hosts; nothing can be chosen, and the line says so.
//!
//! A router's upload also gets cake's `rtt 300ms` ("oceanic", so codel's target is 15 ms) in
//! place of 100 ms. Per-host fairness divides a host's share among its flows, so a host with one
//! upload has one TCP flow holding its half alone, and codel's 5 ms target leaves that lone flow
//! less queue than one CUBIC back-off needs (about 0.3 of its round trip): its queue runs dry
//! after a drop and the other host's eight flows take the slot. `unbloat-lab bench fair` measured host
//! a's share up at 0.41 and 0.40 (IPv4, IPv6; 20/5 Mbit/s, 20 ms) with rtt 100ms, 0.44 with 200ms
//! and 0.48 with 300ms; 0.40-0.43 against 0.49 at 10 Mbit/s up, so it is not the rate. Sparse
//! flows (ping, DNS, games, VoIP) do not wait for codel and kept their latency (a's ping under
//! load 24/26 ms p50/p90 with 300ms, 24/28 with 100ms); what grows is the queue a bulk flow may
//! keep in its own slot, up to 15 ms.
//!
//! The download keeps cake's 100 ms. Its lone flow kept its half either way (a's share down 0.50
//! with 300ms, 0.51 with 100ms, two runs each of `bench fair --setups
//! unbloat-default,unbloat-rtt100`), and there the longer target cost latency: an ingress shaper
//! sits behind the modem, and flows that codel lets keep 15 ms queue send bursts that wait in the
//! modem's buffer, upstream of it. On the lab's adsl (7 Mbit/s, ATM) under 30 s of rrul at 96 % of
//! the line, the steady p99 was 174 and 116 ms with 300ms both ways, 56 and 61 ms with 300ms up
//! and 100ms down (this default), 68 and 47 ms with 100ms both ways.
//!
//! The user's `--isolation`, `--nat`/`--no-nat`, `--rtt`, their config keys and option-string
//! words always win: [`Fairness::defaults`] fills only what nobody said, and [`line`] reads what the final spec
//! really holds, so it never claims a choice the user overrode.
//!
//! The machine is read by `unbloat_system::hostnet`; this module only decides.

use crate::cake::CAKE_DEFAULT_RTT;
use crate::model::{Direction, FlowMode};
use crate::options::{Isolation, Qdisc, ShapeOptions};
use crate::spec::{ShaperSpec, Spec};
use serde::{Deserialize, Serialize};
use std::fmt;
use unbloat_units::Time;

/// cake's rtt on a router's upload (see the module's note): "oceanic", codel's target 15 ms.
pub const ROUTER_RTT: Time = Time::from_millis(300);

/// A NAT statement found for the WAN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatRule {
    /// `masquerade` or `snat`.
    pub action: NatAction,
    /// Where it was found: `nftables`, `iptables-nft`, `iptables-legacy`, `iptables`.
    pub source: String,
    /// The address family it translates.
    pub family: NatFamily,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NatAction {
    Masquerade,
    Snat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NatFamily {
    Ipv4,
    Ipv6,
    /// nftables' `inet` family without a protocol match: both.
    Both,
}

impl NatFamily {
    pub fn has_ipv4(self) -> bool {
        matches!(self, NatFamily::Ipv4 | NatFamily::Both)
    }
}

impl fmt::Display for NatAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NatAction::Masquerade => "masquerade",
            NatAction::Snat => "snat",
        })
    }
}

/// What the NAT rules of the machine say about the WAN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "found")]
pub enum NatFinding {
    /// Rules that NAT traffic leaving the WAN (IPv4 ones first).
    Found { rules: Vec<NatRule> },
    /// Every rule set that could be read was read, and none NATs out of the WAN.
    None,
    /// No rule set could be read (no tool, or no permission): why.
    Unknown { why: String },
}

/// The machine as far as fairness is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `net.ipv4.ip_forward`; None: unreadable.
    pub forwards_ipv4: Option<bool>,
    /// `net.ipv6.conf.all.forwarding`; None: unreadable.
    pub forwards_ipv6: Option<bool>,
    pub nat: NatFinding,
}

impl Machine {
    /// The first IPv4 NAT rule for the WAN, if any.
    pub fn ipv4_nat(&self) -> Option<&NatRule> {
        match &self.nat {
            NatFinding::Found { rules } => rules.iter().find(|r| r.family.has_ipv4()),
            _ => None,
        }
    }

    fn forwards(&self) -> bool {
        self.forwards_ipv4 == Some(true) || self.forwards_ipv6 == Some(true)
    }
}

/// The defaults this machine calls for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fairness {
    /// cake's isolation where the user said none (None: cake's `triple-isolate` default).
    pub isolation: Option<Isolation>,
    /// cake's `nat` where the user said nothing.
    pub nat: Option<bool>,
    /// cake's `rtt` for the upload where the user said none ([`ROUTER_RTT`] on a router).
    pub rtt: Option<Time>,
    /// Why, as the machine shows it: `masquerade on eth0 (nftables)`.
    pub why: String,
}

impl Fairness {
    /// `user`'s options over these defaults, so everything the user said wins. The upload's rtt
    /// is a word of its option string (cake's grammar, `rtt 300ms`), put before the user's own
    /// words so that an `rtt` among them still wins; an `rtt` the user set for both ways leaves it
    /// out. Being a word of the options, it is in unbloat's record, and a later set-rate or
    /// autorate plans the same cake from it.
    pub fn apply(&self, user: &ShapeOptions) -> ShapeOptions {
        let defaults = ShapeOptions {
            isolation: self.isolation,
            nat: self.nat,
            ..ShapeOptions::default()
        };
        let mut opts = ShapeOptions::merge(&defaults, user);
        if let (Some(rtt), None) = (self.rtt, opts.rtt) {
            opts.egress_words_first(&format!("rtt {rtt}"));
        }
        opts
    }
}

/// The defaults for shaping `wan` with `qdisc` on `machine`.
pub fn decide(wan: &str, qdisc: Qdisc, machine: &Machine) -> Fairness {
    let forwarding = match (machine.forwards_ipv4, machine.forwards_ipv6) {
        (Some(true), Some(true)) => "IPv4 and IPv6",
        (Some(true), _) => "IPv4",
        (_, Some(true)) => "IPv6",
        _ => "",
    };
    let (isolation, nat, why) = if let Some(rule) = machine.ipv4_nat() {
        (
            Some(Isolation::DualHost),
            Some(true),
            format!("{} on {wan} ({})", rule.action, rule.source),
        )
    } else if machine.forwards() {
        match &machine.nat {
            NatFinding::Unknown { why } => (
                // A router whose rules cannot be read (not root): the lookup costs little where
                // there is no NAT and is what makes hosts visible where there is.
                Some(Isolation::DualHost),
                Some(true),
                format!("this machine forwards {forwarding}; its NAT rules are unreadable ({why}), so nat is on in case"),
            ),
            _ => (
                Some(Isolation::DualHost),
                Some(false),
                format!("this machine forwards {forwarding}, with no NAT on {wan}"),
            ),
        }
    } else {
        let why = match &machine.nat {
            NatFinding::Found { rules } if !rules.is_empty() => format!(
                "this machine forwards nothing, and its only NAT on {wan} is IPv6, which cake cannot look up"
            ),
            _ => "this machine forwards nothing: the traffic is its own".to_string(),
        };
        (None, None, why)
    };
    match qdisc {
        Qdisc::Cake => Fairness {
            isolation,
            nat,
            rtt: isolation.map(|_| ROUTER_RTT),
            why,
        },
        // fq_codel takes none of these options: nothing to default.
        Qdisc::FqCodel => Fairness {
            isolation: None,
            nat: None,
            rtt: None,
            why,
        },
    }
}

/// Whether the user (flags, config, option strings) said the isolation or nat themselves.
pub fn user_said(user: &ShapeOptions) -> bool {
    [Direction::Egress, Direction::Ingress]
        .into_iter()
        .any(|dir| user.says(dir, |o| o.isolation.is_some() || o.nat.is_some()))
}

/// The one line `plan`, `start` and `status` show: what the final spec does and why.
/// `per-host fair (dual-srchost up, dual-dsthost down, nat): masquerade on eth0 (nftables)`.
pub fn line(spec: &Spec, fairness: &Fairness, user: &ShapeOptions) -> String {
    let mut modes = vec![];
    let mut rtts = vec![];
    let mut nat = None;
    let mut per_host = true;
    let mut cake = false;
    for d in [&spec.egress, &spec.ingress].into_iter().flatten() {
        if let ShaperSpec::Cake(p) = &d.shaper {
            cake = true;
            let side = match d.direction {
                Direction::Egress => "up",
                Direction::Ingress => "down",
            };
            modes.push(format!("{} {side}", p.flow_mode.keyword()));
            rtts.push((p.rtt, side));
            nat = Some(nat.unwrap_or(false) || p.nat);
            // Fair between LAN hosts whatever the far end: the LAN side's host is hashed
            // (dual-srchost up, dual-dsthost down, or the plain and "hosts" variants).
            per_host &= match d.direction {
                Direction::Egress => matches!(
                    p.flow_mode,
                    FlowMode::DualSrchost | FlowMode::Srchost | FlowMode::Hosts
                ),
                Direction::Ingress => matches!(
                    p.flow_mode,
                    FlowMode::DualDsthost | FlowMode::Dsthost | FlowMode::Hosts
                ),
            };
        }
    }
    if !cake {
        return format!(
            "per-flow: fq_codel hashes flows, not hosts (cake would be fair per host); {}",
            fairness.why
        );
    }
    let what = if per_host {
        "per-host fair"
    } else if modes.iter().all(|m| m.starts_with("triple-isolate")) {
        "cake's default"
    } else {
        "per-flow"
    };
    let nat = if nat == Some(true) { "nat" } else { "nonat" };
    // cake's rtt where it is not cake's own 100 ms: once if both ways agree, else each such way's
    // (a router's default: `rtt 300ms up`).
    let rtt = if rtts.iter().all(|(t, _)| *t == CAKE_DEFAULT_RTT) {
        String::new()
    } else if rtts.windows(2).all(|w| w[0].0 == w[1].0) {
        format!(", rtt {}", rtts[0].0)
    } else {
        let each: Vec<String> = rtts
            .iter()
            .filter(|(t, _)| *t != CAKE_DEFAULT_RTT)
            .map(|(t, side)| format!("{t} {side}"))
            .collect();
        format!(", rtt {}", each.join(", "))
    };
    let how = format!("{}, {nat}{rtt}", modes.join(", "));
    if user_said(user) {
        format!(
            "{what} ({how}): as configured; the machine: {}",
            fairness.why
        )
    } else {
        format!("{what} ({how}): {}", fairness.why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_units::Rate;

    fn rule(source: &str, family: NatFamily) -> NatRule {
        NatRule {
            action: NatAction::Masquerade,
            source: source.into(),
            family,
        }
    }

    fn machine(v4: bool, v6: bool, nat: NatFinding) -> Machine {
        Machine {
            forwards_ipv4: Some(v4),
            forwards_ipv6: Some(v6),
            nat,
        }
    }

    /// An IPv4 router with one NAT rule for the WAN, found in `source`.
    fn nat_router(source: &str, family: NatFamily) -> Machine {
        machine(
            true,
            false,
            NatFinding::Found {
                rules: vec![rule(source, family)],
            },
        )
    }

    fn spec_line(m: &Machine, user: ShapeOptions) -> String {
        let user = ShapeOptions {
            down: Some(Rate::from_mbit(20)),
            up: Some(Rate::from_mbit(5)),
            ..user
        };
        let f = decide("eth0", user.qdisc.unwrap_or_default(), m);
        let spec = Spec::new("eth0".parse().unwrap(), &f.apply(&user)).unwrap();
        assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
        line(&spec, &f, &user)
    }

    #[test]
    fn a_masquerading_router_gets_dual_host_and_nat() {
        let m = nat_router("nftables", NatFamily::Both);
        let f = decide("eth0", Qdisc::Cake, &m);
        assert_eq!(f.isolation, Some(Isolation::DualHost));
        assert_eq!(f.nat, Some(true));
        assert_eq!(
            spec_line(&m, ShapeOptions::default()),
            "per-host fair (dual-srchost up, dual-dsthost down, nat, rtt 300ms up): masquerade on eth0 (nftables)"
        );
    }

    #[test]
    fn a_router_without_nat_and_an_ipv6_router_get_dual_host_without_nat() {
        for (v4, v6, says) in [(true, false, "IPv4"), (false, true, "IPv6")] {
            let m = machine(v4, v6, NatFinding::None);
            let f = decide("eth0", Qdisc::Cake, &m);
            assert_eq!(
                (f.isolation, f.nat),
                (Some(Isolation::DualHost), Some(false))
            );
            assert_eq!(
                spec_line(&m, ShapeOptions::default()),
                format!("per-host fair (dual-srchost up, dual-dsthost down, nonat, rtt 300ms up): this machine forwards {says}, with no NAT on eth0")
            );
        }
    }

    #[test]
    fn a_machine_that_forwards_nothing_keeps_triple_isolate() {
        let m = machine(false, false, NatFinding::None);
        let f = decide("eth0", Qdisc::Cake, &m);
        assert_eq!(f.apply(&ShapeOptions::default()), ShapeOptions::default());
        assert!(spec_line(&m, ShapeOptions::default())
            .starts_with("cake's default (triple-isolate up, triple-isolate down, nonat): this machine forwards nothing"));
    }

    #[test]
    fn unreadable_rules_on_a_router_turn_nat_on_in_case() {
        let m = machine(
            true,
            false,
            NatFinding::Unknown {
                why: "not root".into(),
            },
        );
        let f = decide("eth0", Qdisc::Cake, &m);
        assert_eq!(
            (f.isolation, f.nat),
            (Some(Isolation::DualHost), Some(true))
        );
        assert!(f.why.contains("unreadable (not root)"), "{}", f.why);
    }

    #[test]
    fn ipv6_only_nat_is_not_looked_up() {
        let m = machine(
            false,
            true,
            NatFinding::Found {
                rules: vec![rule("nftables", NatFamily::Ipv6)],
            },
        );
        let f = decide("eth0", Qdisc::Cake, &m);
        assert_eq!(
            (f.isolation, f.nat),
            (Some(Isolation::DualHost), Some(false))
        );
    }

    /// The user's words win, whichever way they were said, and the line says so.
    #[test]
    fn the_users_isolation_and_nat_win() {
        let m = nat_router("iptables-legacy", NatFamily::Ipv4);
        let flows = ShapeOptions {
            isolation: Some(Isolation::Flows),
            ..ShapeOptions::default()
        };
        assert_eq!(
            spec_line(&m, flows),
            "per-flow (flows up, flows down, nat, rtt 300ms up): as configured; the machine: masquerade on eth0 (iptables-legacy)"
        );
        let nonat = ShapeOptions {
            nat: Some(false),
            ..ShapeOptions::default()
        };
        assert!(spec_line(&m, nonat).starts_with(
            "per-host fair (dual-srchost up, dual-dsthost down, nonat, rtt 300ms up): as configured"
        ));
        let words = ShapeOptions {
            extra_egress: Some("triple-isolate".into()),
            ..ShapeOptions::default()
        };
        assert!(user_said(&words));
        assert!(spec_line(&m, words).starts_with(
            "per-flow (triple-isolate up, dual-dsthost down, nat, rtt 300ms up): as configured"
        ));
    }

    /// A router's lone uploads get codel's 15 ms target, its download cake's own 100 ms; the
    /// user's rtt, said either way, wins, and the line says what each way holds.
    #[test]
    fn a_routers_upload_gets_rtt_300ms_unless_the_user_says_otherwise() {
        let m = nat_router("nftables", NatFamily::Ipv4);
        assert_eq!(decide("eth0", Qdisc::Cake, &m).rtt, Some(ROUTER_RTT));
        assert_eq!(
            spec_line(&m, ShapeOptions::default()),
            "per-host fair (dual-srchost up, dual-dsthost down, nat, rtt 300ms up): masquerade on eth0 (nftables)"
        );
        let f = decide("eth0", Qdisc::Cake, &m);
        let nat_words = ShapeOptions {
            extra_egress: Some("nat rtt 50ms".into()),
            ..ShapeOptions::default()
        };
        assert_eq!(
            f.apply(&nat_words).extra_egress.as_deref(),
            Some("rtt 300ms nat rtt 50ms"),
            "the user's words after the default's, so theirs win"
        );
        assert_eq!(
            spec_line(&m, nat_words),
            "per-host fair (dual-srchost up, dual-dsthost down, nat, rtt 50ms up): as configured; the machine: masquerade on eth0 (nftables)"
        );
        let metro = ShapeOptions {
            rtt: Some(Time::from_millis(10)),
            ..ShapeOptions::default()
        };
        assert_eq!(
            spec_line(&m, metro),
            "per-host fair (dual-srchost up, dual-dsthost down, nat, rtt 10ms): masquerade on eth0 (nftables)"
        );
        let internet_up = ShapeOptions {
            extra_egress: Some("internet".into()),
            ..ShapeOptions::default()
        };
        assert_eq!(
            spec_line(&m, internet_up),
            "per-host fair (dual-srchost up, dual-dsthost down, nat): masquerade on eth0 (nftables)"
        );
        let own = machine(false, false, NatFinding::None);
        assert_eq!(decide("eth0", Qdisc::Cake, &own).rtt, None);
    }

    #[test]
    fn fq_codel_says_what_it_cannot_do() {
        let m = nat_router("nftables", NatFamily::Ipv4);
        let fq = ShapeOptions {
            qdisc: Some(Qdisc::FqCodel),
            ..ShapeOptions::default()
        };
        let f = decide("eth0", Qdisc::FqCodel, &m);
        assert_eq!(f.apply(&ShapeOptions::default()), ShapeOptions::default());
        assert_eq!(
            spec_line(&m, fq),
            "per-flow: fq_codel hashes flows, not hosts (cake would be fair per host); masquerade on eth0 (nftables)"
        );
    }
}
