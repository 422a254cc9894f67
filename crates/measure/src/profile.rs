//! Test profiles as data: which load streams a run opens and which latency probes it sends.
//!
//! The profiles live in `profiles.toml` beside this file (embedded at build time), in the spirit
//! of flent's test definitions: adding a profile is an edit to that table, not to code.
//! What callers can rely on:
//! - [`Profile::by_name`] knows every profile in the table and nothing else; unknown names get
//!   an error listing the known ones.
//! - [`Profile::resolve`] turns a profile plus `--streams N` into concrete, named streams and
//!   probe classes, refusing `--streams` where the profile's stream set is fixed (rrul).
//! - Names follow flent: "TCP upload BE", "TCP download CS5", "UDP EF", "ICMP"; repeated
//!   markings get a number ("TCP upload BE2").

use serde::Deserialize;
use unbloat_report::{Direction, ProbeKind};

use crate::MeasureError;

const PROFILES_TOML: &str = include_str!("profiles.toml");

/// The most load streams a client asks for (the default server allows 32).
pub const MAX_STREAMS: usize = 32;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    profile: Vec<Profile>,
}

/// One row of `profiles.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    up: Vec<String>,
    down: Vec<String>,
    udp_probes: Vec<String>,
    icmp: bool,
    pub scalable: bool,
}

/// A load stream of a resolved profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPlan {
    pub name: String,
    pub direction: Direction,
    pub dscp: u8,
}

/// A probe class of a resolved profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    pub name: String,
    pub kind: ProbeKind,
    pub dscp: u8,
}

/// A profile made concrete: the streams and probe classes of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedProfile {
    pub name: String,
    pub streams: Vec<StreamPlan>,
    pub probes: Vec<ProbePlan>,
}

/// Every profile of the embedded table, in table order.
pub fn all() -> Result<Vec<Profile>, MeasureError> {
    let table: Table = unbloat_shaper::tomlread::from_str(PROFILES_TOML)
        .map_err(|e| MeasureError::InvalidArgument(format!("built-in profiles.toml: {e}")))?;
    Ok(table.profile)
}

/// Names of every profile, for help texts and errors.
pub fn names() -> Vec<String> {
    all()
        .map(|ps| ps.into_iter().map(|p| p.name).collect())
        .unwrap_or_default()
}

/// The DSCP code point for a name (`BE`, `BK`, `CS0`..`CS7`, `AF11`..`AF43`, `EF`, `VA`, `LE`)
/// or a number 0..=63, case-insensitive.
pub fn parse_dscp(text: &str) -> Result<u8, String> {
    let t = text.trim().to_ascii_uppercase();
    let value = match t.as_str() {
        "BE" | "DF" => 0,
        "BK" => 8,
        "LE" => 1,
        "EF" => 46,
        "VA" => 44,
        _ if t.starts_with("CS") && t.len() == 3 => match t.as_bytes()[2] {
            d @ b'0'..=b'7' => (d - b'0') * 8,
            _ => return Err(format!("unknown DSCP {text:?}")),
        },
        _ if t.starts_with("AF") && t.len() == 4 => {
            let (c, p) = (t.as_bytes()[2], t.as_bytes()[3]);
            match (c, p) {
                (b'1'..=b'4', b'1'..=b'3') => (c - b'0') * 8 + (p - b'0') * 2,
                _ => return Err(format!("unknown DSCP {text:?}")),
            }
        }
        _ => match t.parse::<u8>() {
            Ok(n) if n <= 63 => n,
            _ => {
                return Err(format!(
                    "unknown DSCP {text:?} (a name like EF or CS1, or 0..63)"
                ))
            }
        },
    };
    Ok(value)
}

/// The short name flent and the results use for a DSCP: BE, BK, EF, CSn, AFxy, else the number.
pub fn dscp_name(dscp: u8) -> String {
    match dscp {
        0 => "BE".into(),
        8 => "BK".into(),
        46 => "EF".into(),
        44 => "VA".into(),
        d if d % 8 == 0 && d <= 56 => format!("CS{}", d / 8),
        d if (10..=38).contains(&d) && d % 2 == 0 && (d % 8) / 2 >= 1 && (d % 8) / 2 <= 3 => {
            format!("AF{}{}", d / 8, (d % 8) / 2)
        }
        d => d.to_string(),
    }
}

fn dscps(list: &[String], profile: &str) -> Result<Vec<u8>, MeasureError> {
    list.iter()
        .map(|s| {
            parse_dscp(s)
                .map_err(|e| MeasureError::InvalidArgument(format!("profile {profile}: {e}")))
        })
        .collect()
}

impl Profile {
    /// The profile called `name`.
    pub fn by_name(name: &str) -> Result<Profile, MeasureError> {
        let all = all()?;
        let known: Vec<String> = all.iter().map(|p| p.name.clone()).collect();
        all.into_iter().find(|p| p.name == name).ok_or_else(|| {
            MeasureError::InvalidArgument(format!(
                "--profile {name}: no such profile; known profiles: {}",
                known.join(", ")
            ))
        })
    }

    /// The concrete streams and probes, with `--streams N` applied where the profile allows.
    pub fn resolve(&self, streams: Option<usize>) -> Result<ResolvedProfile, MeasureError> {
        let mut up = dscps(&self.up, &self.name)?;
        let mut down = dscps(&self.down, &self.name)?;
        if let Some(n) = streams {
            if !self.scalable {
                return Err(MeasureError::InvalidArgument(format!(
                    "--streams {n}: profile {} has a fixed set of streams; --streams applies to \
                     upload, download, bidir, tcp_nup and tcp_ndown",
                    self.name
                )));
            }
            if n == 0 || n > MAX_STREAMS {
                return Err(MeasureError::InvalidArgument(format!(
                    "--streams {n}: must be between 1 and {MAX_STREAMS}"
                )));
            }
            for list in [&mut up, &mut down] {
                if let Some(&first) = list.first() {
                    *list = vec![first; n];
                }
            }
        }
        let mut streams = Vec::new();
        for (direction, list, word) in [
            (Direction::Up, &up, "upload"),
            (Direction::Down, &down, "download"),
        ] {
            for (i, &dscp) in list.iter().enumerate() {
                let base = format!("TCP {word} {}", dscp_name(dscp));
                let repeat = list[..i].iter().filter(|&&d| d == dscp).count();
                let name = if repeat == 0 {
                    base
                } else {
                    format!("{base}{}", repeat + 1)
                };
                streams.push(StreamPlan {
                    name,
                    direction,
                    dscp,
                });
            }
        }
        let mut probes: Vec<ProbePlan> = dscps(&self.udp_probes, &self.name)?
            .into_iter()
            .map(|dscp| ProbePlan {
                name: format!("UDP {}", dscp_name(dscp)),
                kind: ProbeKind::Udp,
                dscp,
            })
            .collect();
        if self.icmp {
            probes.push(ProbePlan {
                name: "ICMP".into(),
                kind: ProbeKind::Icmp,
                dscp: 0,
            });
        }
        Ok(ResolvedProfile {
            name: self.name.clone(),
            streams,
            probes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_profile_loads_and_resolves() {
        let all = all().expect("profiles.toml parses");
        let mut names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        for want in [
            "rrul",
            "rrul_be",
            "upload",
            "download",
            "bidir",
            "ping",
            "tcp_nup",
            "tcp_ndown",
        ] {
            assert!(names.contains(&want), "missing profile {want}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "duplicate profile names");
        for p in &all {
            let r = p.resolve(None).expect("resolves");
            assert!(!r.probes.is_empty(), "{} has no probes", p.name);
            let mut stream_names: Vec<&str> = r.streams.iter().map(|s| s.name.as_str()).collect();
            stream_names.sort_unstable();
            stream_names.dedup();
            assert_eq!(
                stream_names.len(),
                r.streams.len(),
                "{}: duplicate stream names",
                p.name
            );
        }
    }

    #[test]
    fn rrul_is_flents_rrul() {
        let r = Profile::by_name("rrul")
            .expect("rrul")
            .resolve(None)
            .expect("resolve");
        let names: Vec<&str> = r.streams.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "TCP upload BE",
                "TCP upload BK",
                "TCP upload CS5",
                "TCP upload EF",
                "TCP download BE",
                "TCP download BK",
                "TCP download CS5",
                "TCP download EF"
            ]
        );
        let probes: Vec<(&str, u8)> = r.probes.iter().map(|p| (p.name.as_str(), p.dscp)).collect();
        assert_eq!(
            probes,
            [("UDP BE", 0), ("UDP EF", 46), ("UDP BK", 8), ("ICMP", 0)]
        );
    }

    #[test]
    fn streams_scales_only_scalable_profiles() {
        let up = Profile::by_name("tcp_nup")
            .expect("p")
            .resolve(Some(7))
            .expect("resolve");
        assert_eq!(up.streams.len(), 7);
        assert!(up.streams.iter().all(|s| s.direction == Direction::Up));
        assert_eq!(up.streams[6].name, "TCP upload BE7");
        let bidir = Profile::by_name("bidir")
            .expect("p")
            .resolve(Some(2))
            .expect("resolve");
        assert_eq!(bidir.streams.len(), 4);
        let err = Profile::by_name("rrul")
            .expect("p")
            .resolve(Some(2))
            .expect_err("fixed");
        assert!(err.to_string().contains("fixed set of streams"), "{err}");
        assert!(Profile::by_name("upload")
            .expect("p")
            .resolve(Some(0))
            .is_err());
        assert!(Profile::by_name("upload")
            .expect("p")
            .resolve(Some(MAX_STREAMS + 1))
            .is_err());
    }

    #[test]
    fn unknown_profile_lists_the_known_ones() {
        let err = Profile::by_name("rrul2").expect_err("unknown");
        assert!(err.to_string().contains("tcp_ndown"), "{err}");
    }

    #[test]
    fn dscp_names_parse_and_print() {
        for (name, value) in [
            ("BE", 0),
            ("bk", 8),
            ("CS5", 40),
            ("EF", 46),
            ("AF41", 34),
            ("AF11", 10),
            ("63", 63),
        ] {
            assert_eq!(parse_dscp(name), Ok(value), "{name}");
        }
        for bad in ["CS8", "AF44", "64", "XX", ""] {
            assert!(parse_dscp(bad).is_err(), "{bad}");
        }
        for d in 0..=63u8 {
            assert_eq!(parse_dscp(&dscp_name(d)), Ok(d), "round trip of {d}");
        }
    }
}
