//! The probes' vocabulary, shared by the pure modules ([`crate::reflectors`],
//! [`crate::controller`]) and the one that sends them ([`crate::pinger`]): which kind of probe,
//! which the user asked for, and what an answer measured.

use std::net::IpAddr;

/// The kind of one probe on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// ICMP echo: the round trip (answered by nearly every host).
    Echo,
    /// ICMP timestamp: one-way delays each way (IPv4 only).
    Timestamp,
}

/// Which probes to send (`--probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Probe {
    /// Timestamps to every IPv4 reflector, echo to a reflector that never answers them (and
    /// to IPv6 ones).
    Auto,
    Echo,
    Timestamp,
}

impl std::str::FromStr for Probe {
    type Err = String;
    fn from_str(s: &str) -> Result<Probe, String> {
        match s {
            "auto" => Ok(Probe::Auto),
            "echo" | "icmp" => Ok(Probe::Echo),
            "timestamp" | "icmp-timestamp" => Ok(Probe::Timestamp),
            _ => Err(format!("{s:?}: the probes are auto, echo or timestamp")),
        }
    }
}

impl Probe {
    /// What a reflector is probed with first.
    pub fn first(self, to: IpAddr) -> Method {
        match (self, to) {
            (Probe::Echo, _) | (_, IpAddr::V6(_)) => Method::Echo,
            _ => Method::Timestamp,
        }
    }
}

/// What a reflector's answer measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// An echo's round trip, in milliseconds.
    Rtt(f64),
    /// An ICMP timestamp's one-way delays (each with the two clocks' offset in it, which the
    /// baseline takes out), in milliseconds, and the same probe's round trip on our own clock:
    /// what the one-way delays are held to ([`crate::baseline::OneWay`]).
    OneWay { down: f64, up: f64, rtt: f64 },
}

/// The deltas of one answer over its reflector's baselines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Deltas {
    Rtt(f64),
    OneWay { down: f64, up: f64 },
}
