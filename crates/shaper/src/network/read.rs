//! Reading the networks of a TOML config: the `[network.NAME]` tables and each interface
//! table's `unknown_network` key, taken out before the interface table is read as shaping
//! options. Every refusal is a [`Refused`]: where in the text, which table, and why; the config
//! module turns it into a message with the file, line and column.

use toml::de::{DeString, DeValue};
use toml::Spanned;
use unbloat_units::IfName;

use super::{Mac, NetworkConfig, Networks, UnknownNetwork};
use crate::clip::clip;
use crate::options::ShapeOptions;
use crate::spec::{parse_iface, Spec};
use crate::tomlread::{self, TomlError};

/// The key of an interface table that says what an unknown network gets.
pub const UNKNOWN_KEY: &str = "unknown_network";

/// Why a network entry was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The byte offset in the text.
    pub offset: usize,
    /// `[network.home]` or `[interface.wlan0]`.
    pub table: String,
    pub message: String,
}

/// A `[network.NAME]` table as written, its values parsed, not yet checked against the file's
/// interfaces.
#[derive(Debug, Clone)]
pub struct RawNetwork {
    name: String,
    offset: usize,
    gateways: Vec<(Mac, usize)>,
    interface: Option<(String, usize)>,
    table: ShapeOptions,
}

/// The `[interface]` value with each table's `unknown_network` key taken out, and what each
/// said (interface name, offset of the value, choice).
pub type Unknowns = Vec<(String, usize, UnknownNetwork)>;

pub fn take_unknown<'i>(
    interfaces: &Spanned<DeValue<'i>>,
) -> Result<(Spanned<DeValue<'i>>, Unknowns), Refused> {
    let mut out = interfaces.clone();
    let mut said = vec![];
    if let DeValue::Table(all) = out.get_mut() {
        for (name, table) in all.iter_mut() {
            let DeValue::Table(t) = table.get_mut() else {
                continue;
            };
            let Some((key, value)) = t.remove_entry(UNKNOWN_KEY) else {
                continue;
            };
            let label = format!("[interface.{}]", clip(name.get_ref()));
            let choice = match value.get_ref() {
                DeValue::String(s) if s == "interface" => UnknownNetwork::Interface,
                DeValue::String(s) if s == "none" => UnknownNetwork::None,
                _ => {
                    return Err(Refused {
                        offset: value.span().start,
                        table: label,
                        message: format!(
                            "key `{}`: {} please",
                            key.get_ref(),
                            UnknownNetwork::WORDS
                        ),
                    })
                }
            };
            said.push((name.get_ref().to_string(), value.span().start, choice));
        }
    }
    Ok((out, said))
}

/// The `[network]` value: one table per network.
pub fn tables(value: &Spanned<DeValue>) -> Result<Vec<RawNetwork>, Refused> {
    let DeValue::Table(all) = value.get_ref() else {
        return Err(Refused {
            offset: value.span().start,
            table: "network".into(),
            message: "expected tables, one per name ([network.NAME])".into(),
        });
    };
    all.iter().map(|(name, t)| table(name, t)).collect()
}

fn table(name: &Spanned<DeString>, value: &Spanned<DeValue>) -> Result<RawNetwork, Refused> {
    let label = format!("[network.{}]", clip(name.get_ref()));
    let refused = |offset: usize, message: String| Refused {
        offset,
        table: label.clone(),
        message,
    };
    if name.get_ref().trim().is_empty() {
        return Err(refused(name.span().start, "a network needs a name".into()));
    }
    let mut value = value.clone();
    let vspan = value.span();
    let DeValue::Table(t) = value.get_mut() else {
        return Err(refused(vspan.start, "expected a table".into()));
    };
    let Some((_, gateway)) = t.remove_entry("gateway") else {
        return Err(refused(
            name.span().start,
            "no `gateway`: a network is recognised by its default gateway's MAC, e.g. gateway = \"aa:bb:cc:dd:ee:ff\" (`ip neigh` shows it)".into(),
        ));
    };
    let one = |v: &Spanned<DeValue>| -> Result<(Mac, usize), Refused> {
        match v.get_ref() {
            DeValue::String(s) if s.trim().is_empty() => Err(refused(
                v.span().start,
                "key `gateway`: empty; write the gateway's MAC, e.g. \"aa:bb:cc:dd:ee:ff\"".into(),
            )),
            DeValue::String(s) => s
                .parse()
                .map(|m| (m, v.span().start))
                .map_err(|e| refused(v.span().start, format!("key `gateway`: {e}"))),
            _ => Err(refused(
                v.span().start,
                "key `gateway`: a MAC address in quotes, or a list of them".into(),
            )),
        }
    };
    let gateways = match gateway.get_ref() {
        DeValue::Array(list) if list.is_empty() => {
            return Err(refused(
                gateway.span().start,
                "key `gateway`: an empty list recognises nothing".into(),
            ))
        }
        DeValue::Array(list) => list.iter().map(one).collect::<Result<Vec<_>, _>>()?,
        _ => vec![one(&gateway)?],
    };
    let interface = match t.remove_entry("interface") {
        None => None,
        Some((_, v)) => match v.get_ref() {
            DeValue::String(s) if !s.trim().is_empty() => Some((s.to_string(), v.span().start)),
            _ => {
                return Err(refused(
                    v.span().start,
                    "key `interface`: the name of an interface the file shapes, in quotes".into(),
                ))
            }
        },
    };
    let table = tomlread::typed::<ShapeOptions>(&value).map_err(|e: TomlError| {
        let key = e
            .key
            .map(|k| format!("key `{}`: ", clip(&k)))
            .unwrap_or_default();
        refused(e.offset, format!("{key}{}", e.message))
    })?;
    Ok(RawNetwork {
        name: name.get_ref().to_string(),
        offset: name.span().start,
        gateways,
        interface,
        table,
    })
}

/// The networks checked against the file's interfaces (each with its options merged over
/// `[defaults]`): a network's interface must be one of them, its options merged over each
/// interface it is for must make a valid spec, and no two networks for one interface may share
/// a gateway.
pub fn resolve(
    raw: Vec<RawNetwork>,
    unknowns: Unknowns,
    interfaces: &[(IfName, ShapeOptions)],
    line_of: impl Fn(usize) -> usize,
) -> Result<Networks, Refused> {
    let mut tables: Vec<(NetworkConfig, Vec<(Mac, usize)>)> = vec![];
    let mut raw = raw;
    raw.sort_by_key(|r| r.offset);
    for r in raw {
        let label = format!("[network.{}]", clip(&r.name));
        let refused = |offset: usize, message: String| Refused {
            offset,
            table: label.clone(),
            message,
        };
        let interface = match &r.interface {
            None => None,
            Some((name, at)) => {
                let iface = parse_iface(name).map_err(|e| refused(*at, e.to_string()))?;
                if !interfaces.iter().any(|(i, _)| *i == iface) {
                    return Err(refused(
                        *at,
                        format!(
                            "interface {iface}: the file has no [interface.{iface}] table; a network's shaping is merged over its interface's"
                        ),
                    ));
                }
                Some(iface)
            }
        };
        let network = NetworkConfig {
            name: r.name.clone(),
            line: line_of(r.offset),
            gateways: r.gateways.iter().map(|(m, _)| *m).collect(),
            interface,
            table: r.table.clone(),
        };
        for (iface, options) in interfaces.iter().filter(|(i, _)| network.is_for(i)) {
            Spec::new(iface.clone(), &Networks::options(&network, options))
                .map_err(|e| refused(r.offset, format!("on {iface}: {e}")))?;
            for (other, other_gateways) in &tables {
                if !other.is_for(iface) {
                    continue;
                }
                if let Some((mac, at)) = r
                    .gateways
                    .iter()
                    .find(|(m, _)| other_gateways.iter().any(|(o, _)| o == m))
                {
                    return Err(refused(
                        *at,
                        format!(
                            "gateway {mac} is [network.{}]'s too, on {iface}: which one would it be?",
                            clip(&other.name)
                        ),
                    ));
                }
            }
        }
        tables.push((network, r.gateways));
    }
    let mut unknown = vec![];
    for (name, at, choice) in unknowns {
        // The interface table itself is checked by the config module; only a valid name here.
        if let Ok(iface) = parse_iface(&name) {
            unknown.push((iface, choice));
        } else {
            return Err(Refused {
                offset: at,
                table: format!("[interface.{}]", clip(&name)),
                message: "not an interface name".into(),
            });
        }
    }
    Ok(Networks {
        tables: tables.into_iter().map(|(n, _)| n).collect(),
        unknown,
    })
}
