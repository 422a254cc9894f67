//! Every option and command an error message of the shaper names exists.
//!
//! Bug: refusals said "use --memlimit" (the command line has no such flag: memlimit is a config
//! key and a cake word) and "measure it with `unbloat tune`" (no such command). This test
//! provokes every kind of refusal the shaper makes about options, collects the messages, and
//! checks each `--flag` they name against the binary's flags and each `` `unbloat COMMAND` ``
//! against its commands, both read from the binary crate's sources (crates/cli/src), which this
//! crate cannot depend on. It also checks that [`option_name`] names every config key the way the
//! command line can give it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::model::Direction;
use unbloat_shaper::options::{
    config_only, option_name, parse_extra, Qdisc, ShapeOptions, OPTIONS, REFUSED_WORDS,
};
use unbloat_shaper::spec::Spec;

fn cli_source(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/src")
        .join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (this test reads the binary's flags from there)",
            p.display()
        )
    })
}

/// `--name` of every field with a `#[arg(... long ...)]` attribute in the binary's sources, and
/// every flag the option declarations give.
fn cli_flags() -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for file in ["flags.rs", "shape.rs"] {
        let text = cli_source(file);
        let mut attr: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(a) = &mut attr {
                a.push_str(line);
            } else if line.starts_with("#[arg(") {
                attr = Some(line.to_string());
            }
            let Some(a) = &attr else { continue };
            if !a.contains(")]") {
                continue;
            }
            if let Some(field) = line
                .strip_prefix("pub ")
                .and_then(|l| l.split_once(':'))
                .map(|(f, _)| f.trim())
            {
                if a.contains("long") {
                    let explicit = a
                        .split_once("long = \"")
                        .and_then(|(_, r)| r.split_once('"'))
                        .map(|(n, _)| n.to_string());
                    flags.insert(format!(
                        "--{}",
                        explicit.unwrap_or_else(|| field.replace('_', "-"))
                    ));
                }
                attr = None;
            }
        }
    }
    // The shaping flags are made from the option declarations (crates/cli/src/flags.rs, whose
    // own test checks that each declared flag is on its command line).
    flags.extend(
        OPTIONS
            .iter()
            .flat_map(|o| o.flags())
            .map(|f| format!("--{f}")),
    );
    assert!(
        flags.contains("--down") && flags.contains("--egress-options"),
        "{flags:?}"
    );
    flags
}

/// The binary's commands: the variants of `enum Command` in main.rs, kebab-cased.
fn cli_commands() -> BTreeSet<String> {
    let text = cli_source("main.rs");
    let body = text
        .split_once("enum Command {")
        .and_then(|(_, r)| r.split_once("\n}"))
        .map(|(b, _)| b)
        .expect("enum Command in main.rs");
    let commands: BTreeSet<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
        .filter_map(|l| l.split(['(', ',', ' ']).next())
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .map(|w| {
            let mut kebab = String::new();
            for (i, c) in w.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            kebab
        })
        .collect();
    assert!(
        commands.contains("start") && commands.contains("set-rate"),
        "{commands:?}"
    );
    commands
}

/// The config keys of [`ShapeOptions`], as a file spells them.
fn config_keys() -> Vec<String> {
    OPTIONS.iter().map(|o| o.key.to_string()).collect()
}

fn spec_error(table: &str) -> Option<String> {
    let opts: ShapeOptions =
        unbloat_shaper::tomlread::from_str(table).unwrap_or_else(|e| panic!("{table}: {e}"));
    Spec::new("eth0".parse().expect("name"), &opts)
        .err()
        .map(|e| e.to_string())
}

/// A refusal of every kind the shaper makes about options.
fn messages() -> Vec<String> {
    let mut out = Vec::new();
    let cake = "up = \"10mbit\"\n";
    let fq = "qdisc = \"fq_codel\"\nup = \"10mbit\"\n";
    // Each option the other qdisc cannot take, with its hint.
    for line in [
        "ack-filter = true",
        "diffserv = \"diffserv4\"",
        "isolation = \"dual-host\"",
        "nat = true",
        "wash = true",
        "rtt = \"metro\"",
        "split-gso = false",
        "memlimit = \"32mb\"",
        "ingress-keyword = false",
    ] {
        out.extend(spec_error(&format!("{fq}{line}")));
    }
    for line in [
        "target = \"5ms\"",
        "interval = \"100ms\"",
        "quantum = 300",
        "limit = 1000",
        "flows = 1024",
        "memory-limit = \"4mb\"",
        "ecn-egress = true",
        "ecn-ingress = true",
        "tiers = 3",
    ] {
        out.extend(spec_error(&format!("{cake}{line}")));
    }
    // Ranges, conflicts, rates, tiers, nothing to shape.
    for table in [
        format!("{cake}rtt = \"5000s\""),
        format!("{cake}memlimit = 0"),
        format!("{fq}target = \"5000s\""),
        format!("{fq}interval = \"1ms\"\ntarget = \"5ms\""),
        format!("{fq}flows = 0"),
        format!("{fq}quantum = 1"),
        format!("{fq}limit = 0"),
        format!("{fq}memory-limit = 0"),
        format!("{fq}tiers = 2"),
        format!("{cake}overhead = 300"),
        format!("{cake}mpu = 300"),
        format!("{cake}vlan = 3"),
        format!("{cake}link = \"vdsl2\"\nframing = \"atm\""),
        "up = \"1kbit\"".to_string(),
        "down = \"900gbit\"".to_string(),
        "up = \"20kbit\"".to_string(),
        "down = \"100mbit\"\nup = \"90kbit\"".to_string(),
        String::new(),
        format!("{cake}extra-egress = \"mpu\""),
        format!("{cake}extra-egress = \"overhead lots\""),
    ] {
        out.extend(spec_error(&table));
    }
    // Option-string words: refused ones, unknown ones, the other qdisc's.
    for (qdisc, word, _) in REFUSED_WORDS {
        out.extend(
            parse_extra(
                word,
                *qdisc,
                Direction::Egress,
                &option_name("extra-egress"),
            )
            .err()
            .map(|e| e.to_string()),
        );
    }
    for (qdisc, word) in [
        (Qdisc::Cake, "frobnicate"),
        (Qdisc::FqCodel, "frobnicate"),
        (Qdisc::FqCodel, "nat"),
    ] {
        out.extend(
            parse_extra(
                word,
                qdisc,
                Direction::Ingress,
                &option_name("extra-ingress"),
            )
            .err()
            .map(|e| e.to_string()),
        );
    }
    // A rate under 1/100 of the interface's speed.
    let opts: ShapeOptions = unbloat_shaper::tomlread::from_str("up = \"1mbit\"").expect("options");
    let spec = Spec::new("eth0".parse().expect("name"), &opts).expect("valid");
    out.extend(
        spec.check_link_speed(unbloat_units::Rate::from_mbit(1000))
            .err()
            .map(|e| e.to_string()),
    );
    // A config file that shapes nothing.
    let empty =
        ConfigFile::parse("", std::path::Path::new("/etc/unbloat/unbloat.toml")).expect("parses");
    out.extend(
        empty
            .specs(&ShapeOptions::default())
            .err()
            .map(|e| e.to_string()),
    );
    out
}

#[test]
fn every_flag_and_command_a_message_names_exists() {
    let flags = cli_flags();
    let commands = cli_commands();
    let messages = messages();
    assert!(messages.len() > 40, "{}", messages.len());
    for m in &messages {
        for (i, _) in m.match_indices("--") {
            let name: String = m[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let flag = format!("--{name}");
            assert!(flags.contains(&flag), "{flag} is not a flag: {m}");
        }
        for (i, _) in m.match_indices("`unbloat ") {
            let command: String = m[i + "`unbloat ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            assert!(
                commands.contains(&command),
                "`unbloat {command}` is not a command: {m}"
            );
        }
    }
    // The hints that named what does not exist.
    assert!(!messages.iter().any(|m| m.contains("--memlimit")));
    assert!(!messages.iter().any(|m| m.contains("unbloat tune")));
}

#[test]
fn every_config_key_is_named_as_the_command_line_can_give_it() {
    let flags = cli_flags();
    for key in config_keys() {
        let name = option_name(&key);
        match name.strip_prefix("--") {
            // Named as a flag: the flag exists (for extra-*, the part before the slash).
            Some(_) => {
                let flag = name.split('/').next().unwrap_or(&name);
                assert!(flags.contains(flag), "{key}: {name} is not a flag");
            }
            // Named as a key: there is no flag of that name, and it is listed as config-only.
            None => {
                assert!(!flags.contains(&format!("--{key}")), "{key} has a flag");
                assert!(config_only().contains(&key.as_str()), "{key}");
            }
        }
    }
}
