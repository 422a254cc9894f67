//! A config file's `[autorate.NAME]` tables: `unbloat autorate`'s settings for an interface the
//! daemon keeps shaped (issue 16).
//!
//! ```toml
//! [interface.wwan0]
//! down = "10mbit"          # the base rates: autorate starts from them, returns to them when
//! up = "5mbit"             # no reflector answers, and leaves them when it ends
//!
//! [autorate.wwan0]
//! min = "2mbit"            # or down-min / up-min
//! max = "50mbit"           # or down-max / up-max
//! reflectors = ["1.1.1.1", "9.9.9.9"]   # default: unbloat autorate's
//! pingers = 6
//! probe = "auto"           # auto | echo | timestamp
//! threshold = "20ms"
//! log = "wwan0.autorate.log"   # in /var/log/unbloat (LOG_DIR), the only place it may be
//! ```
//!
//! The base is the interface's own `down` and `up`, so the setup the daemon verifies and the one
//! a restart finds are the same. Everything is checked when the file is read, like the rest of
//! it: bounds crossed, a table for an interface the file does not shape, HTB (whose rates change
//! only through tc) are errors with the table's line.
//!
//! `log` is a file name in [`LOG_DIR`] (`/var/log/unbloat/NAME` says the same): the daemon runs
//! as root and its config can be changed through the web page, so a config must not be able to
//! make it write `/etc/motd` (issue 36). A path anywhere else is refused with the file.

use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use unbloat_units::{Rate, Time};

use crate::cake::INGRESS_MODE_FROM;
use crate::options::{Qdisc, ShapeOptions};

/// The table as written; every key optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AutorateTable {
    pub min: Option<Rate>,
    pub max: Option<Rate>,
    pub down_min: Option<Rate>,
    pub down_max: Option<Rate>,
    pub up_min: Option<Rate>,
    pub up_max: Option<Rate>,
    pub reflectors: Option<Vec<IpAddr>>,
    pub pingers: Option<u16>,
    pub probe: Option<String>,
    pub threshold: Option<Time>,
    pub log: Option<PathBuf>,
}

/// One direction's rates: the controller's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RateBounds {
    pub min: Rate,
    pub base: Rate,
    pub max: Rate,
}

impl RateBounds {
    /// The bounds, if they can be: 0 < min <= base <= max.
    pub fn new(min: Rate, base: Rate, max: Rate) -> Option<RateBounds> {
        (min.bits_per_sec() > 0 && min <= base && base <= max).then_some(RateBounds {
            min,
            base,
            max,
        })
    }
}

/// A checked table, its base rates taken from the interface's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutorateConfig {
    pub down: RateBounds,
    pub up: RateBounds,
    /// None: `unbloat autorate`'s default reflectors.
    pub reflectors: Option<Vec<IpAddr>>,
    pub pingers: u16,
    /// auto | echo | timestamp.
    pub probe: String,
    pub threshold: Time,
    /// A file name in the daemon's log directory ([`LOG_DIR`]): one component, never a path.
    pub log: Option<PathBuf>,
}

/// The directory the daemon writes the logs of `[autorate.NAME]` tables in; the package owns
/// it (the unit's `LogsDirectory=unbloat`).
pub const LOG_DIR: &str = "/var/log/unbloat";

/// The probe methods `--probe` takes.
/// A delay sample this far over its reflector's baseline counts as delayed, unless the table or
/// `--threshold` says otherwise. 20 ms, not cake-autorate's 30: on the lab's step trace (bench
/// autorate, 3 runs) 15 ms cut so often that a lone download kept 90 % against cake-autorate's
/// 91 %; 20 ms kept 91-92 % (cake-autorate 88-90 %) at a steady p99 of 22 ms (cake-autorate's
/// 116-171); 30 ms gained 2 % more for 10 ms more p50.
pub const DEFAULT_THRESHOLD: Time = Time::from_millis(20);

pub const PROBES: [&str; 3] = ["auto", "echo", "timestamp"];

impl AutorateTable {
    /// The table checked against its interface's options (merged over `[defaults]`); the
    /// message says what is wrong and how to write it.
    pub fn check(&self, iface: &ShapeOptions) -> Result<AutorateConfig, String> {
        if iface.qdisc.unwrap_or_default() != Qdisc::Cake {
            return Err(
                "autorate needs cake (its rates change in place); the interface is shaped with HTB + fq_codel"
                    .into(),
            );
        }
        let one = |name: &str, base: Option<Rate>, min: Option<Rate>, max: Option<Rate>| {
            let base = base.ok_or_else(|| {
                format!("the interface needs `{name}`: autorate's base {name}load rate")
            })?;
            let (Some(min), Some(max)) = (min.or(self.min), max.or(self.max)) else {
                return Err(format!(
                    "the {name}load needs `min` and `max` (or `{name}-min` and `{name}-max`)"
                ));
            };
            RateBounds::new(min, base, max).ok_or_else(|| {
                format!(
                    "the {name}load's rates must be 0 < min <= base <= max, not {min}, {base} (the interface's `{name}`), {max}"
                )
            })
        };
        let down = one("down", iface.down, self.down_min, self.down_max)?;
        let up = one("up", iface.up, self.up_min, self.up_max)?;
        let probe = self.probe.clone().unwrap_or_else(|| "auto".into());
        if !PROBES.contains(&probe.as_str()) {
            return Err(format!(
                "`probe` is auto, echo or timestamp, not {}",
                crate::clip::clip_quoted(&format!("{probe:?}"))
            ));
        }
        let pingers = self.pingers.unwrap_or(6);
        if !(1..=32).contains(&pingers) {
            return Err(format!("`pingers` is 1 to 32, not {pingers}"));
        }
        if let Some(r) = &self.reflectors {
            if r.is_empty() {
                return Err("`reflectors` is empty: leave it out for the default ones".into());
            }
            if probe == "timestamp" && r.iter().any(IpAddr::is_ipv6) {
                return Err("probe = \"timestamp\" needs IPv4 reflectors: ICMPv6 has no timestamp (\"auto\" uses echo for IPv6 ones)".into());
            }
        }
        let threshold = self.threshold.unwrap_or(DEFAULT_THRESHOLD);
        if threshold.micros() == 0 {
            return Err("`threshold` must be more than 0ms".into());
        }
        Ok(AutorateConfig {
            down,
            up,
            reflectors: self.reflectors.clone(),
            pingers,
            probe,
            threshold,
            log: self.log.as_deref().map(log_name).transpose()?,
        })
    }
}

/// The file name `log` gives in [`LOG_DIR`]: a bare name, or `LOG_DIR/NAME`; nothing else.
fn log_name(log: &Path) -> Result<PathBuf, String> {
    let name = log.strip_prefix(LOG_DIR).unwrap_or(log);
    let mut parts = name.components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) => Ok(PathBuf::from(n)),
        _ => Err(format!(
            "`log` is a file name the daemon writes in {LOG_DIR} (e.g. log = \"wan0.autorate.log\"), not {}: it writes nowhere else",
            crate::clip::clip_quoted(&format!("{:?}", log.display().to_string()))
        )),
    }
}

/// The options an interface under autorate is shaped with: cake's `ingress` mode pinned from
/// the base rate, since a mode that flipped at [`INGRESS_MODE_FROM`] would make a rate change
/// more than a rate.
pub fn pinned(options: &ShapeOptions) -> ShapeOptions {
    let mut o = options.clone();
    let down = o.down.unwrap_or(Rate::from_bits_per_sec(0));
    o.ingress_keyword.get_or_insert(down >= INGRESS_MODE_FROM);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(down: &str, up: &str) -> ShapeOptions {
        ShapeOptions {
            down: Some(down.parse().unwrap()),
            up: Some(up.parse().unwrap()),
            ..Default::default()
        }
    }

    fn table(min: &str, max: &str) -> AutorateTable {
        AutorateTable {
            min: Some(min.parse().unwrap()),
            max: Some(max.parse().unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn the_base_is_the_interfaces_rate_and_directions_override_both() {
        let t = AutorateTable {
            up_max: Some(Rate::from_mbit(20)),
            ..table("2mbit", "50mbit")
        };
        let c = t.check(&iface("10mbit", "5mbit")).unwrap();
        assert_eq!(
            c.down,
            RateBounds {
                min: Rate::from_mbit(2),
                base: Rate::from_mbit(10),
                max: Rate::from_mbit(50)
            }
        );
        assert_eq!(c.up.max, Rate::from_mbit(20));
        assert_eq!(c.up.base, Rate::from_mbit(5));
        assert_eq!((c.pingers, c.probe.as_str()), (6, "auto"));
        assert_eq!(c.threshold, Time::from_millis(20));
    }

    #[test]
    fn what_cannot_run_is_refused_with_the_reason() {
        let ok = iface("10mbit", "5mbit");
        for (t, o, says) in [
            (
                table("2mbit", "8mbit"),
                ok.clone(),
                "0 < min <= base <= max",
            ),
            (
                AutorateTable::default(),
                ok.clone(),
                "needs `min` and `max`",
            ),
            (
                table("2mbit", "50mbit"),
                ShapeOptions {
                    up: None,
                    ..ok.clone()
                },
                "needs `up`",
            ),
            (
                table("2mbit", "50mbit"),
                ShapeOptions {
                    qdisc: Some(Qdisc::FqCodel),
                    ..ok.clone()
                },
                "autorate needs cake",
            ),
            (
                AutorateTable {
                    probe: Some("sonar".into()),
                    ..table("2mbit", "50mbit")
                },
                ok.clone(),
                "auto, echo or timestamp",
            ),
            (
                AutorateTable {
                    pingers: Some(0),
                    ..table("2mbit", "50mbit")
                },
                ok.clone(),
                "1 to 32",
            ),
            (
                AutorateTable {
                    probe: Some("timestamp".into()),
                    reflectors: Some(vec!["fd00::1".parse().unwrap()]),
                    ..table("2mbit", "50mbit")
                },
                ok.clone(),
                "ICMPv6 has no timestamp",
            ),
        ] {
            let e = t.check(&o).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_log_is_a_name_in_the_log_directory_and_nothing_else() {
        let with = |log: &str| {
            AutorateTable {
                log: Some(log.into()),
                ..table("2mbit", "50mbit")
            }
            .check(&iface("10mbit", "5mbit"))
        };
        for (given, name) in [
            ("wan0.log", "wan0.log"),
            ("/var/log/unbloat/wan0.log", "wan0.log"),
        ] {
            assert_eq!(
                with(given).unwrap().log,
                Some(PathBuf::from(name)),
                "{given}"
            );
        }
        for bad in [
            "/etc/motd",
            "../motd",
            "a/b.log",
            "/var/log/unbloat/../../../etc/motd",
            "/var/log/unbloat",
            "/var/log/unbloat-other/x",
            "",
        ] {
            let err = with(bad).unwrap_err();
            assert!(err.contains("in /var/log/unbloat"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_ingress_mode_is_pinned_from_the_base_rate() {
        assert_eq!(
            pinned(&iface("10mbit", "5mbit")).ingress_keyword,
            Some(true)
        );
        assert_eq!(
            pinned(&iface("3mbit", "1mbit")).ingress_keyword,
            Some(false)
        );
        let said = ShapeOptions {
            ingress_keyword: Some(false),
            ..iface("10mbit", "5mbit")
        };
        assert_eq!(pinned(&said).ingress_keyword, Some(false));
    }
}
