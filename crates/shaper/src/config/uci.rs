//! `/etc/config/unbloat`: the configuration in OpenWrt's UCI, what `uci set`, `uci commit` and
//! LuCI edit. It holds what `unbloat.toml` holds, read into the same [`ConfigFile`]:
//!
//! ```text
//! config defaults                    # optional, merged under every interface
//!     option qdisc 'cake'
//!
//! config interface 'wan'             # any name; `uci set unbloat.wan.down=70mbit`
//!     option interface 'pppoe-wan'   # the device to shape, as sqm's `interface`
//!     option enabled '1'             # '0': left as it is, as sqm's `enabled`
//!     option down '78mbit'           # a rate needs its unit, as everywhere
//!     option up '19950kbit'
//!     option link 'vdsl2'
//!     option eqdisc_opts 'nat dual-srchost'
//!     list classify 'gaming'
//! ```
//!
//! Every option is a key of the TOML file with `_` for `-` (`ack_filter`, `ecn_egress`), except
//! where sqm-scripts has an option of the same meaning, whose name it takes (`eqdisc_opts`,
//! `iqdisc_opts`: the option strings; `interface`, `enabled`); each is read by its declaration's
//! own parser ([`crate::options::OPTIONS`]), so a value means what it means on the command line.
//! Errors name the line, the section and the option (`/etc/config/unbloat:5: interface 'wan',
//! option down '20000': invalid rate ...`). Autorate's tables are in `unbloat.toml` only, for now:
//! a `config autorate` section is refused, saying so.

use super::{ConfigError, ConfigFile, InterfaceConfig, Position};
use crate::clip::clip;
use crate::options::{ShapeOptions, OPTIONS};
use crate::spec::parse_iface;
use crate::uci::{self, Section};
use std::path::Path;

/// The interface sections' own options, sqm's names: the device, and whether to shape it.
const DEVICE: &str = "interface";
const ENABLED: &str = "enabled";

/// Read `text`, a UCI file; `path` names it in messages.
pub fn read(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
    let err = |line: usize, at: &str, message: String| ConfigError::Uci {
        path: path.to_path_buf(),
        line,
        at: at.to_string(),
        message,
    };
    let sections = uci::parse(text).map_err(|e| err(e.line, "", e.message))?;
    let mut defaults: Option<ShapeOptions> = None;
    let mut interfaces = Vec::new();
    for s in &sections {
        match s.kind.as_str() {
            "defaults" if defaults.is_some() => {
                return Err(err(
                    s.line,
                    &s.label,
                    "a second `config defaults`: write one".into(),
                ))
            }
            "defaults" => defaults = Some(options(s, &[], path)?),
            "interface" => {
                let opts = options(s, &[DEVICE, ENABLED], path)?;
                let own = |name: &str| s.options.iter().rev().find(|o| o.name == name);
                if own(ENABLED).is_some_and(|o| o.value == "0") {
                    continue;
                }
                let Some(device) = own(DEVICE) else {
                    return Err(err(
                        s.line,
                        &s.label,
                        format!("no `option {DEVICE}`: name the device to shape (eth0, pppoe-wan)"),
                    ));
                };
                let at = Position {
                    line: device.line,
                    column: 1,
                };
                let name = parse_iface(&device.value).map_err(|source| ConfigError::Interface {
                    path: path.to_path_buf(),
                    at,
                    name: clip(&device.value).into_owned(),
                    label: s.label.clone(),
                    source: Box::new(source),
                })?;
                if interfaces.iter().any(|i: &InterfaceConfig| i.name == name) {
                    return Err(err(
                        device.line,
                        &s.label,
                        format!("{name} is shaped by an earlier section too: one section a device"),
                    ));
                }
                interfaces.push(InterfaceConfig {
                    name,
                    at,
                    label: s.label.clone(),
                    options: opts,
                    autorate: None,
                });
            }
            "autorate" => {
                return Err(err(
                    s.line,
                    &s.label,
                    "autorate is set in unbloat.toml's [autorate.NAME] tables for now, not in UCI"
                        .into(),
                ))
            }
            other => {
                return Err(err(
                    s.line,
                    &s.label,
                    format!(
                        "unknown section type `{}`; unbloat's are `defaults` and `interface`",
                        clip(other)
                    ),
                ))
            }
        }
    }
    let defaults = defaults.unwrap_or_default();
    for i in &mut interfaces {
        i.options = ShapeOptions::merge(&defaults, &i.options);
    }
    Ok(ConfigFile {
        path: path.to_path_buf(),
        defaults,
        interfaces,
        // Networks follow a laptop; OpenWrt's UCI config is a router's.
        #[cfg(feature = "networks")]
        networks: Default::default(),
    })
}

/// A section's options, each read by its declaration; `own` are the section's options that are
/// not shaping options.
fn options(s: &Section, own: &[&str], path: &Path) -> Result<ShapeOptions, ConfigError> {
    let mut o = ShapeOptions::default();
    let mut lists_started: Vec<&str> = Vec::new();
    for u in &s.options {
        let err = |message: String| ConfigError::Uci {
            path: path.to_path_buf(),
            line: u.line,
            at: format!("{}, option {} '{}'", s.label, clip(&u.name), clip(&u.value)),
            message,
        };
        if own.contains(&u.name.as_str()) {
            continue;
        }
        let Some(opt) = OPTIONS.iter().find(|o| o.uci_name() == u.name) else {
            let names: Vec<String> = OPTIONS.iter().map(|o| o.uci_name()).collect();
            return Err(err(format!(
                "unknown option; the options are {}{}",
                names.join(", "),
                if own.is_empty() {
                    String::new()
                } else {
                    format!(", {}", own.join(", "))
                }
            )));
        };
        let list = opt.field.kind() == crate::options::value::Kind::List;
        if u.list && !list {
            return Err(err(format!(
                "`list {}`: it takes one value, written `option`",
                u.name
            )));
        }
        // UCI's last `option` wins; a list grows by each `list` line (a list said with `option`
        // is one item, as uci reads it).
        if list && !lists_started.contains(&opt.key) {
            opt.field.clear(&mut o);
            lists_started.push(opt.key);
        }
        opt.field.set(&mut o, &u.value).map_err(err)?;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AckFilter;
    use unbloat_units::Rate;

    fn read_text(t: &str) -> Result<ConfigFile, String> {
        read(t, Path::new("/etc/config/unbloat")).map_err(|e| e.to_string())
    }

    #[test]
    fn uci_sections_are_the_tomls_tables() {
        let c = read_text(
            "config defaults\n\toption nat '1'\n\nconfig interface 'wan'\n\toption interface \
             'pppoe-wan'\n\toption down '78mbit'\n\toption up '19950kbit'\n\toption ack_filter \
             'aggressive'\n\toption eqdisc_opts 'wash'\n\tlist classify 'gaming'\n\tlist classify \
             'bulk lan-host 10.0.0.5'\n\nconfig interface 'off'\n\toption interface 'eth9'\n\toption \
             enabled '0'\n",
        )
        .unwrap();
        assert_eq!(c.interfaces.len(), 1, "the disabled section is left alone");
        let i = &c.interfaces[0];
        assert_eq!(
            (i.name.as_str(), i.label.as_str()),
            ("pppoe-wan", "interface 'wan'")
        );
        let o = &i.options;
        assert_eq!(
            (o.down, o.up),
            (Some(Rate::from_mbit(78)), Some(Rate::from_kbit(19_950)))
        );
        assert_eq!(o.nat, Some(true), "from defaults");
        assert_eq!(o.ack_filter, Some(AckFilter::Aggressive));
        assert_eq!(o.extra_egress.as_deref(), Some("wash"));
        assert_eq!(
            o.classify,
            Some(vec![
                "gaming".to_string(),
                "bulk lan-host 10.0.0.5".to_string()
            ])
        );
    }

    #[test]
    fn every_option_is_reachable_by_its_uci_name() {
        for opt in OPTIONS {
            let t = format!(
                "config interface 'wan'\n\toption interface 'eth0'\n\toption {} '{}'\n",
                opt.uci_name(),
                opt.example
            );
            let c = read_text(&t).unwrap_or_else(|e| panic!("{}: {e}", opt.key));
            assert!(opt.field.is_set(&c.interfaces[0].options), "{}", opt.key);
        }
    }

    #[test]
    fn bad_values_name_the_line_section_and_option() {
        let e =
            read_text("config interface 'wan'\n\toption interface 'eth0'\n\toption down '20000'\n")
                .unwrap_err();
        assert!(
            e.starts_with(
                "/etc/config/unbloat:3: interface 'wan', option down '20000': invalid rate"
            ),
            "{e}"
        );
        assert!(e.contains("20000kbit (SQM's unit)"), "{e}");
        let e =
            read_text("config interface 'wan'\n\toption interface 'eth0'\n\toption dwon '1mbit'\n")
                .unwrap_err();
        assert!(
            e.contains("option dwon '1mbit': unknown option; the options are down, up"),
            "{e}"
        );
        let e = read_text("config interface 'wan'\n\toption down '1mbit'\n").unwrap_err();
        assert!(e.contains("interface 'wan': no `option interface`"), "{e}");
        let e = read_text("config queue 'wan'\n").unwrap_err();
        assert!(e.contains("unknown section type `queue`"), "{e}");
        let e = read_text("config interface 'a'\n\toption interface 'eth0'\nconfig interface 'b'\n\toption interface 'eth0'\n")
            .unwrap_err();
        assert!(
            e.contains("interface 'b': eth0 is shaped by an earlier section"),
            "{e}"
        );
        let e =
            read_text("config interface 'wan'\n\toption interface 'eth0'\n\tlist down '1mbit'\n")
                .unwrap_err();
        assert!(e.contains("takes one value"), "{e}");
    }

    #[test]
    fn a_refused_setup_names_the_section() {
        let c =
            read_text("config interface 'wan'\n\toption interface 'eth0'\n\toption up '4kbit'\n")
                .unwrap();
        let e = c.specs(&ShapeOptions::default()).unwrap_err().to_string();
        assert!(
            e.starts_with("/etc/config/unbloat:2:1: interface 'wan': --up 4kbit: below 8kbit"),
            "{e}"
        );
    }
}
