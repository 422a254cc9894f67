//! Reading the networks of a TOML config: the `[network.NAME]` tables and each interface
//! table's `unknown_network` key, taken out before the interface table is read as shaping
//! options. Every refusal is a [`Refused`]: where in the text, which table, and why; the config
//! module turns it into a message with the file, line and column.

use toml::de::{DeString, DeValue};
use toml::Spanned;
use unbloat_units::IfName;

use super::{Mac, NetworkConfig, Networks, Ssid, UnknownNetwork};
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
    ssids: Vec<(Ssid, usize)>,
    bssids: Vec<(Mac, usize)>,
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
    let gateways = keys::<Mac>(t, "gateway", "a MAC address", &refused)?;
    let ssids = keys::<Ssid>(t, "ssid", "a Wi-Fi network's name", &refused)?;
    let bssids = keys::<Mac>(t, "bssid", "an access point's MAC address", &refused)?;
    if gateways.is_empty() && ssids.is_empty() && bssids.is_empty() {
        return Err(refused(
            name.span().start,
            "no `gateway`, `ssid` or `bssid`: a network is recognised by its default gateway's MAC (gateway = \"aa:bb:cc:dd:ee:ff\", `ip neigh` shows it) or on Wi-Fi by its name (ssid = \"Home\") or access point (bssid, `iw dev` shows both)".into(),
        ));
    }
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
        ssids,
        bssids,
        interface,
        table,
    })
}

/// A recognising key's values, each with where it is: one in quotes, or a list of them; none
/// when the key is absent. An empty string or list is a mistake, not "anything".
fn keys<T: std::str::FromStr<Err = String>>(
    t: &mut toml::de::DeTable<'_>,
    key: &str,
    what: &str,
    refused: &dyn Fn(usize, String) -> Refused,
) -> Result<Vec<(T, usize)>, Refused> {
    let Some((_, value)) = t.remove_entry(key) else {
        return Ok(vec![]);
    };
    let one = |v: &Spanned<DeValue>| -> Result<(T, usize), Refused> {
        let at = v.span().start;
        match v.get_ref() {
            DeValue::String(s) if s.is_empty() => Err(refused(
                at,
                format!("key `{key}`: empty; write {what} in quotes, or leave the key out"),
            )),
            DeValue::String(s) => s
                .parse()
                .map(|k| (k, at))
                .map_err(|e| refused(at, format!("key `{key}`: {e}"))),
            _ => Err(refused(
                at,
                format!("key `{key}`: {what} in quotes, or a list of them"),
            )),
        }
    };
    match value.get_ref() {
        DeValue::Array(list) if list.is_empty() => Err(refused(
            value.span().start,
            format!("key `{key}`: an empty list recognises nothing"),
        )),
        DeValue::Array(list) => list.iter().map(one).collect(),
        _ => Ok(vec![one(&value)?]),
    }
}

/// The networks checked against the file's interfaces (each with its options merged over
/// `[defaults]`): a network's interface must be one of them, its options merged over each
/// interface it is for must make a valid spec, and no two networks for one interface may share
/// a gateway, an SSID or a BSSID.
pub fn resolve(
    raw: Vec<RawNetwork>,
    unknowns: Unknowns,
    interfaces: &[(IfName, ShapeOptions)],
    line_of: impl Fn(usize) -> usize,
) -> Result<Networks, Refused> {
    let mut tables: Vec<NetworkConfig> = vec![];
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
            ssids: r.ssids.iter().map(|(s, _)| s.clone()).collect(),
            bssids: r.bssids.iter().map(|(m, _)| *m).collect(),
            interface,
            table: r.table.clone(),
        };
        for (iface, options) in interfaces.iter().filter(|(i, _)| network.is_for(i)) {
            Spec::new(iface.clone(), &Networks::options(&network, options))
                .map_err(|e| refused(r.offset, format!("on {iface}: {e}")))?;
            for other in tables.iter().filter(|o| o.is_for(iface)) {
                if let Some((key, at)) = shared(&r, other) {
                    return Err(refused(
                        at,
                        format!(
                            "{key} is [network.{}]'s too, on {iface}: which one would it be?",
                            clip(&other.name)
                        ),
                    ));
                }
            }
        }
        tables.push(network);
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
    Ok(Networks { tables, unknown })
}

/// The first key of `r` that `other` lists too, in words, and where it is in the text.
fn shared(r: &RawNetwork, other: &NetworkConfig) -> Option<(String, usize)> {
    let bssid = r.bssids.iter().find(|(m, _)| other.bssids.contains(m));
    let gateway = r.gateways.iter().find(|(m, _)| other.gateways.contains(m));
    let ssid = r.ssids.iter().find(|(s, _)| other.ssids.contains(s));
    bssid
        .map(|(m, at)| (format!("bssid {m}"), *at))
        .or_else(|| gateway.map(|(m, at)| (format!("gateway {m}"), *at)))
        .or_else(|| ssid.map(|(s, at)| (format!("ssid \"{s}\""), *at)))
}
