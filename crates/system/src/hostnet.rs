//! What this machine does with the traffic of a WAN device, for cake's fairness defaults
//! ([`unbloat_shaper::fairness`]): whether it forwards (the IPv4 and IPv6 forwarding sysctls of
//! the current network namespace) and whether it NATs what leaves the WAN.
//!
//! NAT rules are read from every place a router keeps them, because real routers use either back
//! end (OpenWrt 22+ nftables' fw4, older OpenWrt and many distributions iptables, Docker
//! iptables-nft or -legacy):
//! - `nft -j list ruleset`: chains of type `nat` on the `postrouting` hook, their rules and the
//!   chains they jump to; a `masquerade` or `snat` statement (or iptables-nft's `xt` target
//!   MASQUERADE / SNAT) counts when the rule's `oifname`/`oif` matches allow the WAN (`==` the
//!   name or a set holding it, `!=` another name, a `*` wildcard, or no such match at all).
//! - `iptables-legacy-save`, then `iptables-save` (whatever back end it is): the `*nat` table,
//!   `-A POSTROUTING` and the user chains it jumps to, `-j MASQUERADE` / `-j SNAT` with `-o WAN`,
//!   `! -o OTHER`, a `+` wildcard or no `-o`. Neither is run with `-t nat`: that would load the
//!   nat table's module on a machine that has none; without it they print only loaded tables.
//!
//! A missing program is "not found", not an error; a program that fails (no root) is noted, and
//! only when nothing at all could be read is the finding [`NatFinding::Unknown`]. The parsers are
//! pure and tested on real output (`fixtures/nat/`, written by its `capture.sh`).

use crate::runner::{Cmd, RunError, Runner};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use unbloat_shaper::fairness::{Machine, NatAction, NatFamily, NatFinding, NatRule};

/// An iptables rule as far as NAT goes: its `-o` match (negated?, name) and its `-j` target.
type IptRule = (Option<(bool, String)>, String);
/// iptables chains by name.
type IptChains = BTreeMap<String, Vec<IptRule>>;

/// How deep jumps between chains are followed (fw4 uses one level; a loop must end).
const MAX_JUMPS: usize = 16;

/// Reads the machine: the forwarding sysctls under `proc` (`/proc` on a real system) and the NAT
/// rules for `wan` through `runner`.
pub fn read_machine(runner: &dyn Runner, proc: &Path, wan: &str) -> Machine {
    let sysctl = |rel: &str| -> Option<bool> {
        let text = std::fs::read_to_string(proc.join(rel)).ok()?;
        Some(text.trim() != "0")
    };
    Machine {
        forwards_ipv4: sysctl("sys/net/ipv4/ip_forward"),
        forwards_ipv6: sysctl("sys/net/ipv6/conf/all/forwarding"),
        nat: read_nat(runner, wan),
    }
}

/// The NAT rules for `wan` from nftables and both iptables back ends.
pub fn read_nat(runner: &dyn Runner, wan: &str) -> NatFinding {
    let mut rules = vec![];
    let mut read_any = false;
    let mut failures = vec![];
    let mut run = |argv: &[&str]| -> Option<String> {
        match runner.run(&Cmd::new(argv[0]).args(argv[1..].iter().copied())) {
            Ok(out) if out.success() => {
                read_any = true;
                Some(out.stdout)
            }
            Ok(out) => {
                let msg = out.stderr.lines().last().unwrap_or("").trim().to_string();
                failures.push(format!("{}: {}", argv[0], msg));
                None
            }
            Err(RunError::NotFound { .. }) => None,
            Err(e) => {
                failures.push(e.to_string());
                None
            }
        }
    };
    if let Some(json) = run(&["nft", "-j", "list", "ruleset"]) {
        rules.extend(parse_nft(&json, wan));
    }
    let legacy = run(&["iptables-legacy-save"]);
    let legacy_found = legacy.is_some();
    if let Some(text) = legacy {
        rules.extend(parse_iptables_save(&text, wan, "iptables-legacy"));
    }
    if let Some(text) = run(&["iptables-save"]) {
        let source = if legacy_found {
            "iptables"
        } else {
            "iptables-legacy"
        };
        rules.extend(parse_iptables_save(&text, wan, source));
    }
    if !rules.is_empty() {
        rules.sort_by_key(|r| !r.family.has_ipv4());
        NatFinding::Found { rules }
    } else if read_any {
        NatFinding::None
    } else if failures.is_empty() {
        NatFinding::Unknown {
            why: "neither nft nor iptables-save is installed".into(),
        }
    } else {
        NatFinding::Unknown {
            why: failures.join("; "),
        }
    }
}

/// Whether an interface pattern (`eth0`, nft's `eth*`, iptables' `eth+`) names `wan`.
fn names(pattern: &str, wan: &str) -> bool {
    match pattern
        .strip_suffix('*')
        .or_else(|| pattern.strip_suffix('+'))
    {
        Some(prefix) => wan.starts_with(prefix),
        None => pattern == wan,
    }
}

/// NAT rules for `wan` in `nft -j list ruleset` output. Unparsable JSON yields none.
pub fn parse_nft(json: &str, wan: &str) -> Vec<NatRule> {
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return vec![];
    };
    let items = v["nftables"].as_array().cloned().unwrap_or_default();
    // (family, table, chain) -> its rules' expressions, in order; and the nat postrouting chains.
    let mut chains: BTreeMap<(String, String, String), Vec<Vec<Value>>> = BTreeMap::new();
    let mut bases = vec![];
    let key = |o: &Value, name: &str| {
        (
            o["family"].as_str().unwrap_or("").to_string(),
            o["table"].as_str().unwrap_or("").to_string(),
            o[name].as_str().unwrap_or("").to_string(),
        )
    };
    for item in &items {
        if let Some(c) = item.get("chain") {
            if c["type"] == "nat" && c["hook"] == "postrouting" {
                bases.push(key(c, "name"));
            }
        } else if let Some(r) = item.get("rule") {
            let expr = r["expr"].as_array().cloned().unwrap_or_default();
            chains.entry(key(r, "chain")).or_default().push(expr);
        }
    }
    let mut out = vec![];
    for base in bases {
        let family = match base.0.as_str() {
            "ip" => NatFamily::Ipv4,
            "ip6" => NatFamily::Ipv6,
            "inet" => NatFamily::Both,
            _ => continue,
        };
        walk_nft(&chains, &base, family, wan, 0, &mut out);
    }
    out
}

fn walk_nft(
    chains: &BTreeMap<(String, String, String), Vec<Vec<Value>>>,
    chain: &(String, String, String),
    family: NatFamily,
    wan: &str,
    depth: usize,
    out: &mut Vec<NatRule>,
) {
    if depth > MAX_JUMPS {
        return;
    }
    for expr in chains.get(chain).map(Vec::as_slice).unwrap_or(&[]) {
        let mut family = family;
        let mut applies = true;
        for e in expr {
            if let Some(m) = e.get("match") {
                let left = &m["left"];
                let op = m["op"].as_str().unwrap_or("==");
                let meta = left["meta"]["key"].as_str();
                if matches!(meta, Some("oifname") | Some("oif")) {
                    let listed = match &m["right"] {
                        Value::String(s) => names(s, wan),
                        Value::Object(o) => {
                            o.get("set").and_then(Value::as_array).is_some_and(|s| {
                                s.iter().any(|n| n.as_str().is_some_and(|n| names(n, wan)))
                            })
                        }
                        _ => false,
                    };
                    applies &= if op == "!=" { !listed } else { listed };
                } else if meta == Some("nfproto") {
                    family = narrow(family, m["right"].as_str(), op);
                } else if let Some(proto) = left["payload"]["protocol"].as_str() {
                    family = narrow(family, Some(proto), "==");
                }
            } else if let Some(name) = e.get("xt").and_then(|x| x["name"].as_str()) {
                if let Some(action) = iptables_action(name) {
                    if applies {
                        out.push(NatRule {
                            action,
                            source: "iptables-nft".into(),
                            family,
                        });
                    }
                }
            } else if e.get("masquerade").is_some() || e.get("snat").is_some() {
                if let Some(f) = e.get("snat").and_then(|s| s["family"].as_str()) {
                    family = narrow(family, Some(f), "==");
                }
                if applies {
                    out.push(NatRule {
                        action: if e.get("snat").is_some() {
                            NatAction::Snat
                        } else {
                            NatAction::Masquerade
                        },
                        source: "nftables".into(),
                        family,
                    });
                }
            } else if let Some(target) = e
                .get("jump")
                .or_else(|| e.get("goto"))
                .and_then(|j| j["target"].as_str())
            {
                if applies {
                    let next = (chain.0.clone(), chain.1.clone(), target.to_string());
                    walk_nft(chains, &next, family, wan, depth + 1, out);
                }
            }
        }
    }
}

/// A family narrowed by a protocol match (`ip`/`ipv4`, `ip6`/`ipv6`).
fn narrow(family: NatFamily, proto: Option<&str>, op: &str) -> NatFamily {
    let v4 = match proto {
        Some("ip") | Some("ipv4") => true,
        Some("ip6") | Some("ipv6") => false,
        _ => return family,
    };
    match (op == "!=", v4) {
        (false, true) | (true, false) => NatFamily::Ipv4,
        (false, false) | (true, true) => NatFamily::Ipv6,
    }
}

fn iptables_action(target: &str) -> Option<NatAction> {
    match target {
        "MASQUERADE" => Some(NatAction::Masquerade),
        "SNAT" => Some(NatAction::Snat),
        _ => None,
    }
}

/// NAT rules for `wan` in `iptables-save` output (IPv4): the `*nat` table's POSTROUTING and the
/// chains it jumps to. The header's `(nf_tables)` marks iptables-nft whatever `source` says.
pub fn parse_iptables_save(text: &str, wan: &str, source: &str) -> Vec<NatRule> {
    let source = if text
        .lines()
        .any(|l| l.starts_with("# Generated by") && l.contains("(nf_tables)"))
    {
        "iptables-nft"
    } else {
        source
    };
    let mut in_nat = false;
    let mut rules: IptChains = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('*') {
            in_nat = line == "*nat";
            continue;
        }
        if !in_nat || !line.starts_with("-A ") {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let chain = words.get(1).copied().unwrap_or("").to_string();
        let (mut oif, mut target) = (None, None);
        for (i, w) in words.iter().enumerate() {
            match *w {
                "-o" | "--out-interface" => {
                    if let Some(name) = words.get(i + 1) {
                        let negated = i > 0 && words[i - 1] == "!";
                        oif = Some((negated, name.trim_matches('"').to_string()));
                    }
                }
                "-j" | "--jump" | "-g" | "--goto" => {
                    target = words.get(i + 1).map(|t| t.to_string())
                }
                _ => {}
            }
        }
        if let Some(t) = target {
            rules.entry(chain).or_default().push((oif, t));
        }
    }
    let mut out = vec![];
    let mut seen = HashSet::new();
    walk_iptables(&rules, "POSTROUTING", wan, source, 0, &mut seen, &mut out);
    out
}

fn walk_iptables(
    rules: &IptChains,
    chain: &str,
    wan: &str,
    source: &str,
    depth: usize,
    seen: &mut HashSet<String>,
    out: &mut Vec<NatRule>,
) {
    if depth > MAX_JUMPS || !seen.insert(chain.to_string()) {
        return;
    }
    for (oif, target) in rules.get(chain).map(Vec::as_slice).unwrap_or(&[]) {
        let applies = match oif {
            None => true,
            Some((negated, name)) => names(name, wan) != *negated,
        };
        if !applies {
            continue;
        }
        match iptables_action(target) {
            Some(action) => out.push(NatRule {
                action,
                source: source.to_string(),
                family: NatFamily::Ipv4,
            }),
            None => walk_iptables(rules, target, wan, source, depth + 1, seen, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{CmdOutput, RecordingRunner};

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/nat")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn summary(rules: &[NatRule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| format!("{} {} {:?}", r.action, r.source, r.family))
            .collect()
    }

    #[test]
    fn nftables_masquerade_snat_negation_and_no_oif_match() {
        let j = fixture("nft.json");
        // eth0: its own masquerade, the `!= lan0` one, and the ip table's unconditional one.
        assert_eq!(
            summary(&parse_nft(&j, "eth0")),
            [
                "masquerade nftables Both",
                "masquerade nftables Ipv4",
                "masquerade nftables Ipv4"
            ]
        );
        assert_eq!(
            summary(&parse_nft(&j, "wan1")),
            [
                "snat nftables Ipv4",
                "masquerade nftables Ipv4",
                "masquerade nftables Ipv4"
            ]
        );
        // lan0 is excluded by `!=`, but the ip table masquerades everything.
        assert_eq!(
            summary(&parse_nft(&j, "lan0")),
            ["masquerade nftables Ipv4"]
        );
    }

    #[test]
    fn openwrt_fw4_jumps_from_a_set_of_wan_devices() {
        let j = fixture("nft-fw4.json");
        assert_eq!(
            summary(&parse_nft(&j, "pppoe-wan")),
            ["masquerade nftables Ipv4"]
        );
        assert_eq!(
            summary(&parse_nft(&j, "eth0.2")),
            ["masquerade nftables Ipv4"]
        );
        assert!(parse_nft(&j, "lan").is_empty());
        assert!(parse_nft(&j, "eth0").is_empty());
        assert!(parse_nft(&fixture("nft-empty.json"), "eth0").is_empty());
        assert!(parse_nft("not json", "eth0").is_empty());
    }

    #[test]
    fn iptables_nft_rules_seen_through_nft_and_iptables_save() {
        let j = fixture("nft-of-iptables-nft.json");
        let t = fixture("iptables-nft-save.txt");
        for wan in ["eth0.2", "wan1", "eth0"] {
            let via_nft = summary(&parse_nft(&j, wan));
            let via_save = summary(&parse_iptables_save(&t, wan, "iptables"));
            assert_eq!(via_nft, via_save, "{wan}");
            assert!(!via_nft.is_empty(), "{wan}");
            assert!(
                via_nft.iter().all(|r| r.contains("iptables-nft Ipv4")),
                "{via_nft:?}"
            );
        }
        // Docker's `! -o docker0` rule is the only one left for another device.
        assert_eq!(parse_iptables_save(&t, "eth1", "x").len(), 1);
        assert!(parse_iptables_save(&t, "docker0", "x").is_empty());
    }

    #[test]
    fn iptables_legacy_plain_and_empty() {
        let t = fixture("iptables-legacy-save.txt");
        assert_eq!(
            summary(&parse_iptables_save(&t, "eth0", "iptables-legacy")),
            ["masquerade iptables-legacy Ipv4"]
        );
        assert!(parse_iptables_save(&t, "eth1", "iptables-legacy").is_empty());
        let empty = fixture("iptables-legacy-save-empty.txt");
        assert!(parse_iptables_save(&empty, "eth0", "iptables-legacy").is_empty());
    }

    #[test]
    fn missing_tools_are_not_errors_and_failures_are_reasons() {
        let none = RecordingRunner::new()
            .missing_program("nft")
            .missing_program("iptables-legacy-save")
            .missing_program("iptables-save");
        assert!(
            matches!(read_nat(&none, "eth0"), NatFinding::Unknown { why } if why.contains("neither"))
        );
        let legacy = RecordingRunner::new()
            .missing_program("nft")
            .stdout_when(
                |c| c.program == "iptables-legacy-save",
                fixture("iptables-legacy-save.txt"),
            )
            .reply_when(
                |c| c.program == "iptables-save",
                CmdOutput::failed(1, "iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"),
            );
        assert!(
            matches!(read_nat(&legacy, "eth0"), NatFinding::Found { rules } if rules.len() == 1)
        );
        let denied = RecordingRunner::new()
            .reply_when(|_| true, CmdOutput::failed(1, "Operation not permitted"));
        assert!(
            matches!(read_nat(&denied, "eth0"), NatFinding::Unknown { why } if why.contains("not permitted"))
        );
        let clean =
            RecordingRunner::new().stdout_when(|c| c.program == "nft", fixture("nft-empty.json"));
        assert_eq!(read_nat(&clean, "eth0"), NatFinding::None);
    }

    #[test]
    fn forwarding_sysctls_are_read_from_proc() {
        let dir = std::env::temp_dir().join(format!("unbloat-hostnet-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sys/net/ipv4")).unwrap();
        std::fs::create_dir_all(dir.join("sys/net/ipv6/conf/all")).unwrap();
        std::fs::write(dir.join("sys/net/ipv4/ip_forward"), "0\n").unwrap();
        std::fs::write(dir.join("sys/net/ipv6/conf/all/forwarding"), "1\n").unwrap();
        let runner =
            RecordingRunner::new().stdout_when(|c| c.program == "nft", fixture("nft-empty.json"));
        let m = read_machine(&runner, &dir, "eth0");
        assert_eq!(
            (m.forwards_ipv4, m.forwards_ipv6),
            (Some(false), Some(true))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
