//! Link profiles: the access links the lab emulates, as TOML data.
//!
//! A profile says how fast the link is each way, how the link frames packets (so that ATM cell
//! padding, PTM and DOCSIS overhead are real in the emulation), how deep the modem's buffer is,
//! and what lies beyond it (base round trip, jitter, loss). Eleven ship with unbloat, embedded in
//! the binary from `crates/lab/profiles/*.toml`; a user's own file loads the same way
//! (`unbloat-lab run --profile my-link.toml`).
//!
//! # Schema
//!
//! ```toml
//! name = "vdsl2"                 # required; a short name for tables and file names
//! description = "..."            # required; one line for people
//! down = "80mbit"                # required; the link's rate towards the user (tc rate syntax)
//! up = "20mbit"                  # required; the link's rate away from the user
//! base_rtt = "20ms"              # optional, default 20ms: round trip to the server when idle
//! jitter = "2ms"                 # optional, default none: netem jitter, each way
//! loss_percent = 0.1             # optional, default 0: netem random loss, each way
//!
//! [link]                         # required
//! preset = "bridged-ptm"         # required; an `unbloat start --link` preset (cake's keywords + vdsl2, ether-vlan, none)
//! vlan = true                    # optional, default false: 802.1Q tag, 4 more bytes (ether-vlan)
//! overhead = 26                  # optional: replaces the preset's overhead (bytes over the IP packet)
//! mpu = 0                        # optional: replaces the preset's minimum packet unit (bytes)
//!
//! [modem]                        # optional; default 1000 packets
//! fifo_packets = 1000            # the modem's drop-tail buffer in packets (netem rate: serialises), or
//! fifo_bytes = "1.5m"            #   in bytes (bfifo); not both
//!
//! [unbloat]                      # optional: what the `unbloat` strategy sets beyond its defaults,
//! diffserv = "besteffort"        #   in `unbloat start`'s config-file words (`unbloat.toml`), so a
//! rtt = "50ms"                   #   variant of unbloat can be compared on the same link
//! ```
//!
//! Unknown keys are errors (`deny_unknown_fields`): a misspelt `jiter` must not silently mean
//! "no jitter". What callers can rely on: a [`LinkProfile`] that exists has passed
//! [`LinkProfile::validate`] (non-zero rates, a positive FIFO, loss within 0..100).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use unbloat_shaper::goodput::{self, LinkFraming};
use unbloat_shaper::linklayer::{LinkLayer, LinkPreset};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::spec::{parse_iface, Spec};
use unbloat_units::{Rate, Size, Time};

use crate::trace::{RateTrace, Traces};

/// The profiles shipped with unbloat, by name, as embedded TOML text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("dsl-2002", include_str!("../profiles/dsl-2002.toml")),
    ("adsl-slow", include_str!("../profiles/adsl-slow.toml")),
    ("adsl-remote", include_str!("../profiles/adsl-remote.toml")),
    ("adsl-rural", include_str!("../profiles/adsl-rural.toml")),
    ("adsl-far", include_str!("../profiles/adsl-far.toml")),
    ("adsl", include_str!("../profiles/adsl.toml")),
    ("adsl2-pppoa", include_str!("../profiles/adsl2-pppoa.toml")),
    ("vdsl2", include_str!("../profiles/vdsl2.toml")),
    (
        "vdsl2-novlan",
        include_str!("../profiles/vdsl2-novlan.toml"),
    ),
    ("docsis", include_str!("../profiles/docsis.toml")),
    ("fiber", include_str!("../profiles/fiber.toml")),
];

/// The profile `unbloat-lab run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "vdsl2";

/// Base round trip when a profile does not say (issue 4: "20 ms base RTT unless a profile says
/// otherwise").
pub const DEFAULT_BASE_RTT: Time = Time::from_millis(20);
/// Modem FIFO depth when a profile does not say: 1000 packets, a common default txqueuelen and
/// what the seeds measured against (KERNEL-LAB.md).
pub const DEFAULT_FIFO_PACKETS: u32 = 1000;

/// The link's framing as the profile file states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    pub preset: LinkPreset,
    #[serde(default)]
    pub vlan: bool,
    #[serde(default)]
    pub overhead: Option<i32>,
    #[serde(default)]
    pub mpu: Option<u32>,
}

impl LinkSection {
    /// The compensation as `unbloat start --link PRESET [--overhead N] [--mpu N] [--vlan 1]`
    /// resolves it: the shaper crate's own presets and rules, so a profile and a command line
    /// with the same words mean the same bytes.
    pub fn resolve(&self) -> Result<LinkLayer, String> {
        LinkLayer::resolve(
            Some(self.preset),
            self.overhead.map(i64::from),
            self.mpu.map(i64::from),
            None,
            self.vlan.then_some(1),
        )
        .map_err(|e| e.to_string())
    }
}

/// Linux counts the 14-byte Ethernet header in a packet's length on a veth; cake's `raw` keeps it.
pub const MAC_HEADER_BYTES: i32 = 14;

/// The link layer in the goodput model's terms: overhead relative to the IP packet (a `raw` link
/// counts the MAC header as overhead, as cake does).
pub fn goodput_framing(link: &LinkLayer) -> LinkFraming {
    LinkFraming::from(link)
}

/// The modem's buffer: a drop-tail FIFO, sized in packets or in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModemSection {
    #[serde(default)]
    pub fifo_packets: Option<u32>,
    #[serde(default)]
    pub fifo_bytes: Option<Size>,
}

/// A bottleneck between the LAN host and its gateway, the router (issue 39: an access point's or
/// a slow LAN's queue): each way with a rate is limited there, behind a drop-tail FIFO. The
/// router's LAN side carries it (`lan0` towards the host, an IFB on `lan0`'s ingress from it),
/// so the router's own answers to the host's pings cross it, as an access point's would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanSection {
    #[serde(default)]
    pub down: Option<Rate>,
    #[serde(default)]
    pub up: Option<Rate>,
    #[serde(default = "default_lan_fifo")]
    pub fifo_packets: u32,
    /// The router drops ICMP requests to itself (echo and timestamps), as firewalled gateways do.
    #[serde(default)]
    pub ignores_ping: bool,
    /// Under load the router answers ICMP requests to itself this many milliseconds late (its
    /// CPU busy forwarding, not a queue the other packets share): the lab holds its answers in a
    /// netem of their own on `lan0`, at no delay until [`crate::topology::lan_answers_late`] is
    /// run once the load has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_late_ms: Option<u32>,
}

fn default_lan_fifo() -> u32 {
    DEFAULT_FIFO_PACKETS
}

/// The modem FIFO, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fifo {
    /// N packets: `netem limit N rate R` on the modem, a serialising drop-tail FIFO.
    Packets(u32),
    /// `bfifo limit N`.
    Bytes(Size),
}

/// One emulated access link, as read from its TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkProfile {
    pub name: String,
    pub description: String,
    pub down: Rate,
    pub up: Rate,
    #[serde(default)]
    pub base_rtt: Option<Time>,
    #[serde(default)]
    pub jitter: Option<Time>,
    #[serde(default)]
    pub loss_percent: Option<f64>,
    pub link: LinkSection,
    #[serde(default)]
    pub modem: Option<ModemSection>,
    /// A bottleneck on the LAN side, between the host and the router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lan: Option<LanSection>,
    /// Options of `unbloat start` the lab's `unbloat` strategy applies over its defaults and over
    /// what the link section implies (absent: unbloat exactly as shipped).
    #[serde(default)]
    pub unbloat: Option<ShapeOptions>,
    /// A variable link: mahimahi traces the modem's rate follows each way during every
    /// strategy's test (paths relative to the profile's file). `down`/`up` stay the link's
    /// nominal rates (calibration, the strategies' rates).
    #[serde(default)]
    pub down_trace: Option<PathBuf>,
    #[serde(default)]
    pub up_trace: Option<PathBuf>,
    /// The traces, read when the profile is loaded from its file.
    #[serde(skip)]
    pub traces: Traces,
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no link profile named {name:?}; shipped profiles are {}, or give a path to a .toml file", shipped_names().join(", "))]
    Unknown { name: String },
    #[error("cannot read link profile {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("link profile {origin} is not valid TOML for a profile: {message}")]
    Parse { origin: String, message: String },
    #[error("link profile {origin}: {message}")]
    Invalid { origin: String, message: String },
}

/// The window a trace's packet-delivery opportunities are counted over (see [`RateTrace`]).
pub const TRACE_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// The names of the shipped profiles, in table order.
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(n, _)| *n).collect()
}

impl LinkProfile {
    /// Parses and validates profile text; `origin` names it in errors (a path or a name).
    pub fn from_toml(text: &str, origin: &str) -> Result<LinkProfile, ProfileError> {
        let profile: LinkProfile = toml::from_str(text).map_err(|e| ProfileError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        profile
            .validate()
            .map_err(|message| ProfileError::Invalid {
                origin: origin.to_string(),
                message,
            })?;
        Ok(profile)
    }

    /// A shipped profile by name.
    pub fn shipped(name: &str) -> Result<LinkProfile, ProfileError> {
        let (_, text) =
            SHIPPED
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| ProfileError::Unknown {
                    name: name.to_string(),
                })?;
        LinkProfile::from_toml(text, &format!("{name:?} (shipped)"))
    }

    /// Every shipped profile, in table order.
    pub fn all_shipped() -> Result<Vec<LinkProfile>, ProfileError> {
        SHIPPED
            .iter()
            .map(|(n, _)| LinkProfile::shipped(n))
            .collect()
    }

    /// What `--profile` accepts: a shipped name, or a path to a TOML file (anything with a `/` or
    /// ending in `.toml`).
    pub fn load(name_or_path: &str) -> Result<LinkProfile, ProfileError> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            LinkProfile::from_file(Path::new(name_or_path))
        } else {
            LinkProfile::shipped(name_or_path)
        }
    }

    /// A user's profile file, with the traces it names (relative to its directory).
    pub fn from_file(path: &Path) -> Result<LinkProfile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let origin = path.display().to_string();
        let mut profile = LinkProfile::from_toml(&text, &origin)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let read = |file: &Option<PathBuf>| -> Result<Option<RateTrace>, ProfileError> {
            let Some(file) = file else { return Ok(None) };
            let at = base.join(file);
            let text = std::fs::read_to_string(&at).map_err(|source| ProfileError::Read {
                path: at.clone(),
                source,
            })?;
            RateTrace::from_mahimahi(&text, TRACE_WINDOW)
                .map(Some)
                .map_err(|e| ProfileError::Invalid {
                    origin: origin.clone(),
                    message: format!("trace {}: {e}", at.display()),
                })
        };
        profile.traces = Traces {
            down: read(&profile.down_trace)?,
            up: read(&profile.up_trace)?,
        };
        Ok(profile)
    }

    fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !name_ok {
            return Err(format!(
                "name {:?} must be non-empty letters, digits, '-', '_' or '.' (it names report files)",
                self.name
            ));
        }
        // Below 8 kbit/s one full-size packet takes 1.5 s: nothing the lab measures means anything.
        for (what, rate) in [("down", self.down), ("up", self.up)] {
            if rate.bits_per_sec() < 8_000 {
                return Err(format!(
                    "{what} = \"{rate}\" is below 8kbit, too slow to emulate"
                ));
            }
        }
        if let Some(loss) = self.loss_percent {
            if !(0.0..100.0).contains(&loss) {
                return Err(format!(
                    "loss_percent = {loss} must be at least 0 and below 100"
                ));
            }
        }
        if let Some(m) = &self.modem {
            match (m.fifo_packets, m.fifo_bytes) {
                (Some(_), Some(_)) => {
                    return Err("[modem] has both fifo_packets and fifo_bytes; give one".into())
                }
                (Some(0), _) => return Err("[modem] fifo_packets must be at least 1".into()),
                (_, Some(b)) if b.bytes() < 1500 => {
                    return Err(format!(
                        "[modem] fifo_bytes = \"{b}\" holds not even one full-size packet"
                    ))
                }
                _ => {}
            }
        }
        if let Some(lan) = &self.lan {
            for (what, rate) in [("down", lan.down), ("up", lan.up)] {
                if rate.is_some_and(|r| r.bits_per_sec() < 8_000) {
                    return Err(format!("[lan] {what} is below 8kbit, too slow to emulate"));
                }
            }
            if lan.fifo_packets == 0 {
                return Err("[lan] fifo_packets must be at least 1".into());
            }
            // Both would be the root of lan0: the late answers' netem sits under a prio there.
            if lan.answers_late_ms.is_some() && lan.down.is_some() {
                return Err("[lan] answers_late_ms cannot go with a down rate (both would be lan0's root qdisc)".into());
            }
            if lan.answers_late_ms.is_some() && lan.ignores_ping {
                return Err("[lan] answers_late_ms and ignores_ping: a router that drops pings answers none late".into());
            }
        }
        self.link.resolve().map_err(|e| format!("[link] {e}"))?;
        if self.unbloat.is_some() {
            // Checked now, with the real rates, so a bad option fails before any namespace exists.
            let iface = parse_iface("wan0").expect("a valid interface name");
            Spec::new(iface, &self.unbloat_options(self.down, self.up))
                .map_err(|e| format!("[unbloat] {e}"))?;
        }
        Ok(())
    }

    /// What the `unbloat` strategy asks `unbloat start` for: the rates, the link's compensation
    /// in `--link/--overhead/--mpu/--vlan` words, then the profile's `[unbloat]` options over them.
    pub fn unbloat_options(&self, down: Rate, up: Rate) -> ShapeOptions {
        let base = ShapeOptions {
            down: Some(down),
            up: Some(up),
            link: Some(self.link.preset),
            overhead: self.link.overhead.map(i64::from),
            mpu: self.link.mpu.map(i64::from),
            vlan: self.link.vlan.then_some(1),
            ..ShapeOptions::default()
        };
        match &self.unbloat {
            Some(over) => ShapeOptions::merge(&base, over),
            None => base,
        }
    }

    pub fn base_rtt(&self) -> Time {
        self.base_rtt.unwrap_or(DEFAULT_BASE_RTT)
    }

    /// The link's compensation (valid: [`LinkProfile::validate`] resolved it at load time).
    pub fn link_layer(&self) -> LinkLayer {
        self.link
            .resolve()
            .unwrap_or_else(|_| self.link.preset.link_layer())
    }

    /// The TCP goodput a saturating transfer can reach at `rate` on this link (shaper's model).
    pub fn theoretical_goodput(&self, rate: Rate) -> Rate {
        goodput::theoretical_tcp_goodput(rate, &self.link_layer())
    }

    pub fn fifo(&self) -> Fifo {
        match self.modem {
            Some(ModemSection {
                fifo_bytes: Some(b),
                ..
            }) => Fifo::Bytes(b),
            Some(ModemSection {
                fifo_packets: Some(p),
                ..
            }) => Fifo::Packets(p),
            _ => Fifo::Packets(DEFAULT_FIFO_PACKETS),
        }
    }

    /// The slower of the two directions.
    pub fn slower_rate(&self) -> Rate {
        self.down.min(self.up)
    }
}

impl fmt::Display for LinkProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.link_layer();
        write!(
            f,
            "{} ({} down / {} up, {}{}, overhead {} mpu {}, base RTT {})",
            self.name,
            self.down,
            self.up,
            self.link.preset,
            if self.link.vlan { " + vlan" } else { "" },
            l.overhead,
            l.mpu,
            self.base_rtt(),
        )?;
        if let Some(lan) = &self.lan {
            let rate = |r: Option<Rate>| r.map_or("-".to_string(), |r| r.to_string());
            write!(
                f,
                "; LAN hop {} down / {} up, {} packets{}",
                rate(lan.down),
                rate(lan.up),
                lan.fifo_packets,
                if lan.ignores_ping {
                    ", the router ignores pings"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::linklayer::Framing;
    use unbloat_shaper::plan::Diffserv;

    /// The smallest valid profile: the required keys only.
    const MINIMAL: &str = r#"
            name = "x"
            description = "d"
            down = "10mbit"
            up = "1mbit"
            [link]
            preset = "ethernet"
        "#;

    #[test]
    fn every_shipped_profile_loads_and_is_what_issue_4_asks_for() {
        let words = |p: &LinkProfile| {
            let l = p.link_layer();
            (l.overhead, l.mpu, l.framing)
        };
        let all = LinkProfile::all_shipped().expect("shipped profiles load");
        assert_eq!(all.len(), 11);
        let get = |n: &str| all.iter().find(|p| p.name == n).expect(n).clone();
        // Issue 55's slow, far ATM lines stand apart: their own round trips and FIFOs.
        let far = ["adsl-remote", "adsl-rural", "adsl-far"];
        for p in all.iter().filter(|p| !far.contains(&p.name.as_str())) {
            assert_eq!(p.base_rtt(), Time::from_millis(20), "{}", p.name);
            assert_eq!(p.fifo(), Fifo::Packets(1000), "{}", p.name);
            assert!(!p.description.is_empty());
        }
        for (name, down, up, rtt, overhead, fifo) in [
            (
                "adsl-remote",
                1_000,
                128,
                40,
                40,
                Fifo::Bytes(Size::from_bytes(128 * 1024)),
            ),
            (
                "adsl-rural",
                1_500,
                256,
                60,
                40,
                Fifo::Bytes(Size::from_bytes(512 * 1024)),
            ),
            ("adsl-far", 2_000, 384, 80, 10, Fifo::Packets(300)),
        ] {
            let p = get(name);
            assert_eq!((p.down, p.up), (Rate::from_kbit(down), Rate::from_kbit(up)));
            assert_eq!((p.base_rtt(), p.fifo()), (Time::from_millis(rtt), fifo));
            assert_eq!(words(&p), (overhead, 0, Framing::Atm), "{name}");
        }
        let d = get("dsl-2002");
        assert_eq!((d.down, d.up), (Rate::from_kbit(800), Rate::from_kbit(220)));
        assert_eq!(d.link_layer().framing, Framing::Atm);
        // Issue 38's slow deep-buffer line: 4 s of FIFO at the download's rate.
        let s = get("adsl-slow");
        assert_eq!((s.down, s.up), (Rate::from_mbit(3), Rate::from_kbit(512)));
        assert_eq!(words(&s), (10, 0, Framing::Atm));
        let a = get("adsl");
        assert_eq!((a.down, a.up), (Rate::from_mbit(7), Rate::from_kbit(768)));
        assert_eq!(words(&a), (40, 0, Framing::Atm));
        // Issue 13's two more: PPPoA/VC-mux ATM at ADSL2+ rates, and PTM without a VLAN.
        let p = get("adsl2-pppoa");
        assert_eq!((p.down, p.up), (Rate::from_mbit(16), Rate::from_mbit(1)));
        assert_eq!(words(&p), (10, 0, Framing::Atm));
        let n = get("vdsl2-novlan");
        assert_eq!((n.down, n.up), (Rate::from_mbit(40), Rate::from_mbit(10)));
        assert_eq!(words(&n), (22, 0, Framing::Ptm));
        let v = get("vdsl2");
        assert_eq!((v.down, v.up), (Rate::from_mbit(80), Rate::from_mbit(20)));
        assert_eq!(words(&v), (26, 0, Framing::Ptm));
        let c = get("docsis");
        assert_eq!((c.down, c.up), (Rate::from_mbit(100), Rate::from_mbit(10)));
        assert_eq!(words(&c), (18, 64, Framing::None));
        let f = get("fiber");
        assert_eq!((f.down, f.up), (Rate::from_mbit(250), Rate::from_mbit(250)));
        assert_eq!(words(&f), (38, 84, Framing::None));
    }

    #[test]
    fn shipped_file_names_match_profile_names() {
        for (name, text) in SHIPPED {
            let p = LinkProfile::from_toml(text, name).expect(name);
            assert_eq!(&p.name, name);
        }
    }

    #[test]
    fn a_misspelt_key_is_an_error_not_a_default() {
        let text = r#"
            name = "x"
            description = "d"
            down = "10mbit"
            up = "1mbit"
            jiter = "2ms"
            [link]
            preset = "ethernet"
        "#;
        let err = LinkProfile::from_toml(text, "t.toml").unwrap_err();
        assert!(err.to_string().contains("jiter"), "{err}");
        let bad_preset = text
            .replace("jiter = \"2ms\"\n", "")
            .replace("ethernet", "ethernett");
        assert!(LinkProfile::from_toml(&bad_preset, "t").is_err());
    }

    #[test]
    fn a_user_profile_with_bytes_fifo_jitter_and_loss() {
        let text = r#"
            name = "lte"
            description = "a cell"
            down = "30mbit"
            up = "5mbit"
            base_rtt = "45ms"
            jitter = "5ms"
            loss_percent = 0.5
            [link]
            preset = "raw"
            overhead = 20
            [modem]
            fifo_bytes = "256k"
        "#;
        let p = LinkProfile::from_toml(text, "lte.toml").expect("valid");
        assert_eq!(p.base_rtt(), Time::from_millis(45));
        assert_eq!(p.jitter, Some(Time::from_millis(5)));
        assert_eq!(p.fifo(), Fifo::Bytes(Size::from_bytes(256 * 1024)));
        assert_eq!(p.link_layer().overhead, 20);
    }

    #[test]
    fn invalid_values_are_refused_with_the_field_named() {
        let base = MINIMAL;
        let cases = [
            (base.replace("1mbit", "1kbit"), "up"),
            (format!("{base}\n[modem]\nfifo_packets = 0"), "fifo_packets"),
            (
                format!("{base}\n[modem]\nfifo_packets = 10\nfifo_bytes = \"64k\""),
                "both",
            ),
            (base.replace("name = \"x\"", "name = \"a/b\""), "name"),
            (
                base.replace("up = \"1mbit\"", "up = \"1mbit\"\nloss_percent = 100.0"),
                "loss_percent",
            ),
            (format!("{base}\n[lan]\ndown = \"1kbit\""), "[lan] down"),
            (
                format!("{base}\n[lan]\nfifo_packets = 0"),
                "[lan] fifo_packets",
            ),
            (format!("{base}\n[lan]\nrate = \"1mbit\""), "rate"),
        ];
        for (text, needle) in cases {
            let err = LinkProfile::from_toml(&text, "t").expect_err(needle);
            assert!(err.to_string().contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn a_lan_section_puts_a_bottleneck_between_the_host_and_the_router() {
        let text = format!("{MINIMAL}\n[lan]\ndown = \"8mbit\"\nignores_ping = true\n");
        let p = LinkProfile::from_toml(&text, "t").expect("valid");
        let lan = p.lan.expect("the LAN hop");
        assert_eq!((lan.down, lan.up), (Some(Rate::from_mbit(8)), None));
        assert_eq!(lan.fifo_packets, DEFAULT_FIFO_PACKETS);
        assert!(p.to_string().contains("LAN hop 8mbit down / - up"), "{p}");
        let router = std::net::Ipv4Addr::new(10, 77, 1, 2);
        let cmds: Vec<String> = crate::topology::lan_commands(&p, router)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(
            cmds,
            [
                "tc qdisc add dev lan0 root netem limit 1000 rate 8000000bit",
                "tc qdisc add dev lan0 handle ffff: ingress",
                "tc filter add dev lan0 parent ffff: protocol ip prio 1 u32 match ip protocol 1 0xff match ip dst 10.77.1.2/32 action drop"
            ]
        );
        // Upload: the host's packets are redirected from lan0's ingress through an IFB.
        let up = format!("{MINIMAL}\n[lan]\nup = \"2mbit\"\nfifo_packets = 200\n");
        let p = LinkProfile::from_toml(&up, "t").expect("valid");
        let cmds = crate::topology::lan_commands(&p, router);
        let text: Vec<String> = cmds.iter().map(|c| c.to_string()).collect();
        assert!(
            text.iter()
                .any(|c| c == "tc qdisc add dev ifb4lan0 root netem limit 200 rate 2000000bit"),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|c| c.contains("mirred egress redirect dev ifb4lan0")),
            "{text:?}"
        );
        // No section: nothing on the LAN side, and the profile's JSON is as before.
        let plain = LinkProfile::from_toml(MINIMAL, "t").expect("valid");
        assert!(crate::topology::lan_commands(&plain, router).is_empty());
        assert!(!serde_json::to_string(&plain)
            .expect("json")
            .contains("\"lan\""));
    }

    #[test]
    fn an_unbloat_section_overrides_the_defaults_and_is_checked_at_load() {
        let base = &MINIMAL.replace("ethernet", "bridged-ptm");
        let p = LinkProfile::from_toml(base, "t").expect("valid");
        let plain = p.unbloat_options(Rate::from_mbit(9), Rate::from_kbit(950));
        assert_eq!((plain.diffserv, plain.rtt), (None, None));
        let text = format!("{base}\n[unbloat]\ndiffserv = \"besteffort\"\nrtt = \"metro\"\n");
        let p = LinkProfile::from_toml(&text, "t").expect("valid");
        let o = p.unbloat_options(Rate::from_mbit(9), Rate::from_kbit(950));
        assert_eq!(o.diffserv, Some(Diffserv::Besteffort));
        assert_eq!(o.rtt, Some(Time::from_millis(10)));
        assert_eq!(o.down, Some(Rate::from_mbit(9)), "the lab's rates stay");
        assert_eq!(
            o.link,
            Some(LinkPreset::BridgedPtm),
            "the link section stays"
        );
        // Unknown keys, and options unbloat start would refuse, fail the load.
        for (bad, needle) in [
            ("difserv = \"besteffort\"", "difserv"),
            (
                "qdisc = \"fq_codel\"\ndiffserv = \"diffserv4\"",
                "[unbloat]",
            ),
        ] {
            let err =
                LinkProfile::from_toml(&format!("{base}\n[unbloat]\n{bad}\n"), "t").expect_err(bad);
            assert!(err.to_string().contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn load_tells_names_from_paths_and_lists_the_shipped_ones() {
        assert_eq!(LinkProfile::load("vdsl2").expect("vdsl2").name, "vdsl2");
        let err = LinkProfile::load("vdls2").unwrap_err();
        assert!(
            err.to_string().contains("vdsl2, vdsl2-novlan, docsis"),
            "{err}"
        );
        let err = LinkProfile::load("/nonexistent/x.toml").unwrap_err();
        assert!(matches!(err, ProfileError::Read { .. }), "{err}");
    }

    #[test]
    fn traces_are_read_beside_the_profile_file_and_bad_ones_are_named() {
        let dir = unbloat_system::sqm::workdir::WorkDir::new("profile-traces").unwrap();
        std::fs::create_dir_all(dir.0.join("traces")).unwrap();
        // One packet per ms: 12 Mbit/s down.
        std::fs::write(dir.0.join("traces/lte.down"), "1\n").unwrap();
        std::fs::write(dir.0.join("traces/bad.up"), "5\n3\n").unwrap();
        let profile = |up_trace: &str| {
            format!(
                "name = \"lte\"\ndescription = \"x\"\ndown = \"12mbit\"\nup = \"2mbit\"\n\
                 down_trace = \"traces/lte.down\"\n{up_trace}[link]\npreset = \"ethernet\"\n"
            )
        };
        let path = dir.0.join("lte.toml");
        std::fs::write(&path, profile("")).unwrap();
        let p = LinkProfile::from_file(&path).unwrap();
        assert_eq!(p.traces.down.as_ref().unwrap().mean(), Rate::from_mbit(12));
        assert!(p.traces.up.is_none());

        std::fs::write(&path, profile("up_trace = \"traces/bad.up\"\n")).unwrap();
        let e = LinkProfile::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("bad.up") && e.contains("line 2"), "{e}");
        std::fs::write(&path, profile("up_trace = \"traces/missing.up\"\n")).unwrap();
        let e = LinkProfile::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("missing.up"), "{e}");
    }
}
