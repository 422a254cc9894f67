//! What the test's timeline needs from a far end, whatever server it is.
//!
//! `unbloat test` runs one timeline (idle baseline, load, idle tail; [`crate::client`]) against
//! four kinds of far end: `unbloat serve`, a web server (HTTP/1.1 or HTTP/2 over TLS, the IETF
//! responsiveness draft's endpoints), a stock `irtt server` (latency probes) and a stock
//! `iperf3 -s` (load). A far end gives the timeline two things:
//! - [`Load`]: the load streams, started at the load phase's start and stopped at its end. Their
//!   goodput is sampled every 200 ms; a far end may add streams while it runs (the HTTP load adds
//!   connections until goodput stops rising), so the set only grows and keeps its order.
//! - [`Probes`]: latency probes sent from the start of the idle baseline to the end of the idle
//!   tail, every one recorded, answered or not.
//!
//! Both are driven from one thread and only polled: no method may block for longer than a
//! connection timeout, and none may panic on what a server sends.

use std::time::Duration;

use unbloat_report::{Direction, ProbeKind, ProbeSeries};

use crate::MeasureError;

/// One load stream as the results name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Display name, unique in the run: "TCP upload BE", "HTTP download 3", "iperf3 upload 2".
    pub name: String,
    pub direction: Direction,
    pub dscp: u8,
}

/// The load of a run.
pub trait Load {
    /// Connects and starts every stream. Called once, at the start of the load phase; nothing
    /// may move before. Returns when the first streams move data.
    fn start(&mut self) -> Result<(), MeasureError>;
    /// Every stream so far, in a stable order (stream `i` stays `i`; new ones are appended).
    fn streams(&self) -> Vec<StreamInfo>;
    /// Goodput bytes of every stream so far, in the order of [`Load::streams`] (a stream added
    /// since that call may appear at the end). Counted where the bytes arrive: for downloads what
    /// this side's TCP received in order, for uploads what the far side's TCP acknowledged.
    fn bytes(&self) -> Vec<u64>;
    /// Why the load failed (a stream broke, the far end went away), or `None` while it runs.
    fn error(&self) -> Option<String>;
    /// Stops every stream at once (connections reset, not drained). Called once, at the end of
    /// the load phase or when the run ends early.
    fn stop(&mut self);
    /// After [`Load::stop`]: ends the session with the far end (iperf3 exchanges results) and
    /// returns remarks for the results' notes. An error here means the far end did not see the
    /// test to its end.
    fn finish(&mut self) -> Result<Vec<String>, MeasureError>;
}

/// The latency probes of a run; started before the idle baseline.
pub trait Probes {
    /// Probes sent and answered so far of this kind: (sent, answered).
    fn counts(&self, kind: ProbeKind) -> (usize, u64);
    /// Replies so far over every class (to notice a dead link).
    fn replies(&self) -> u64;
    /// The latest round trip of the primary class, for the progress line.
    fn latest_rtt_ms(&self) -> Option<f64>;
    /// Remarks for the results' notes (a class skipped and why, what the server allowed).
    fn notes(&self) -> Vec<String>;
    /// Stops sending, waits `grace` for late replies and returns every class's series; one-way
    /// delays (where the far end stamps) relate the clocks on probes sent before `idle_end_ns`
    /// (ns since the run's epoch).
    fn finish(self: Box<Self>, grace: Duration, idle_end_ns: u64) -> Vec<ProbeSeries>;
}

/// irtt's and iperf3's well-known ports (irtt's `server -b` default, iperf3's `-p` default).
pub const IRTT_PORT: u16 = 2112;
pub const IPERF3_PORT: u16 = 5201;

/// A far end as the user named it: `--server`, `--load` or `--probe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `unbloat serve`: `HOST[:PORT]` or `unbloat://HOST[:PORT]` (port 4420).
    Unbloat { host: String, port: u16 },
    /// A web server: `https://HOST[:PORT][/PATH]` or `http://...`. A URL with no path means the
    /// networkQuality config at `/.well-known/nq`; any other path is taken as that config.
    Http { config_url: String, host: String },
    /// A stock `irtt server`: `irtt://HOST[:PORT]` (port 2112); latency probes only.
    Irtt { host: String, port: u16 },
    /// A stock `iperf3 -s`: `iperf3://HOST[:PORT]` (port 5201); load only.
    Iperf3 { host: String, port: u16 },
}

impl Endpoint {
    /// Reads a far end as typed; a bare `HOST[:PORT]` is `unbloat serve`, as it always was.
    pub fn parse(text: &str) -> Result<Endpoint, MeasureError> {
        let bad = |why: String| MeasureError::InvalidArgument(format!("server {text:?}: {why}"));
        let Some((scheme, rest)) = text.split_once("://") else {
            let (host, port) = parse_host_port(text, crate::server::DEFAULT_PORT).map_err(bad)?;
            return Ok(Endpoint::Unbloat { host, port });
        };
        let host_port = |rest: &str, default: u16| -> Result<(String, u16), MeasureError> {
            if rest.contains('/') && !rest.ends_with('/') || rest.contains(['?', '#', '@']) {
                return Err(bad(format!("{scheme}:// takes HOST[:PORT] only")));
            }
            parse_host_port(rest.trim_end_matches('/'), default).map_err(bad)
        };
        match scheme.to_ascii_lowercase().as_str() {
            "unbloat" => {
                let (host, port) = host_port(rest, crate::server::DEFAULT_PORT)?;
                Ok(Endpoint::Unbloat { host, port })
            }
            "irtt" => {
                let (host, port) = host_port(rest, IRTT_PORT)?;
                Ok(Endpoint::Irtt { host, port })
            }
            "iperf3" => {
                let (host, port) = host_port(rest, IPERF3_PORT)?;
                Ok(Endpoint::Iperf3 { host, port })
            }
            s @ ("http" | "https") => {
                let (authority, path) = match rest.find('/') {
                    Some(i) => (&rest[..i], &rest[i..]),
                    None => (rest, ""),
                };
                if authority.contains('@') {
                    return Err(bad("user names in the URL are not supported".into()));
                }
                let default = if s == "https" { 443 } else { 80 };
                let (host, _) = parse_host_port(authority, default).map_err(bad)?;
                let path = if path.is_empty() || path == "/" {
                    "/.well-known/nq"
                } else {
                    path
                };
                Ok(Endpoint::Http {
                    config_url: format!("{s}://{authority}{path}"),
                    host,
                })
            }
            other => Err(bad(format!(
                "unknown scheme {other:?}: use unbloat://, https://, http://, irtt:// or iperf3://"
            ))),
        }
    }

    /// The host the user named: every byte of load and every probe goes there and nowhere else.
    pub fn host(&self) -> &str {
        match self {
            Endpoint::Unbloat { host, .. }
            | Endpoint::Http { host, .. }
            | Endpoint::Irtt { host, .. }
            | Endpoint::Iperf3 { host, .. } => host,
        }
    }

    /// What kind of far end, in a word, for messages and the results' notes.
    pub fn kind(&self) -> &'static str {
        match self {
            Endpoint::Unbloat { .. } => "unbloat serve",
            Endpoint::Http { .. } => "web server",
            Endpoint::Irtt { .. } => "irtt server",
            Endpoint::Iperf3 { .. } => "iperf3 server",
        }
    }

    /// Whether this far end can carry the load (irtt cannot).
    pub fn loads(&self) -> bool {
        !matches!(self, Endpoint::Irtt { .. })
    }

    /// Whether this far end answers UDP probes with stamps (a web server and iperf3 do not:
    /// with them the UDP classes fall back to ICMP and the web server's own probes).
    pub fn probes_udp(&self) -> bool {
        matches!(self, Endpoint::Unbloat { .. } | Endpoint::Irtt { .. })
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; a bare IPv6 address takes no port.
pub(crate) fn parse_host_port(text: &str, default: u16) -> Result<(String, u16), String> {
    let port = |p: &str| match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("the port {p:?} must be a number 1..65535")),
        Ok(n) => Ok(n),
    };
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("missing ]")?;
        match after {
            "" => (host, default),
            p => (
                host,
                port(p.strip_prefix(':').ok_or("expected :PORT after ]")?)?,
            ),
        }
    } else {
        match text.matches(':').count() {
            0 => (text, default),
            1 => {
                let (h, p) = text.split_once(':').ok_or("bad port")?;
                (h, port(p)?)
            }
            _ => (text, default),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_reads_with_its_default_port() {
        let p = |s: &str| Endpoint::parse(s).map_err(|e| e.to_string());
        let unbloat = |h: &str, port| {
            Ok(Endpoint::Unbloat {
                host: h.into(),
                port,
            })
        };
        assert_eq!(p("server"), unbloat("server", 4420));
        assert_eq!(p("server:99"), unbloat("server", 99));
        assert_eq!(p("unbloat://server"), unbloat("server", 4420));
        assert_eq!(p("unbloat://[2001:db8::1]:7"), unbloat("2001:db8::1", 7));
        assert_eq!(
            p("irtt://h"),
            Ok(Endpoint::Irtt {
                host: "h".into(),
                port: 2112
            })
        );
        assert_eq!(
            p("IPERF3://10.0.0.2:5202/"),
            Ok(Endpoint::Iperf3 {
                host: "10.0.0.2".into(),
                port: 5202
            })
        );
        assert_eq!(
            p("https://nq.example"),
            Ok(Endpoint::Http {
                config_url: "https://nq.example/.well-known/nq".into(),
                host: "nq.example".into()
            })
        );
        assert_eq!(
            p("http://[::1]:8080/config.json"),
            Ok(Endpoint::Http {
                config_url: "http://[::1]:8080/config.json".into(),
                host: "::1".into()
            })
        );
    }

    #[test]
    fn unknown_schemes_paths_and_ports_are_refused_with_the_text_named() {
        for bad in [
            "ftp://h",
            "irtt://h/path",
            "iperf3://h:0",
            "iperf3://h:x",
            "unbloat://",
            "https://user@h/",
            "irtt://h?x=1",
            "://h",
        ] {
            let e = Endpoint::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}

/// Where a test's load and probes go, and the web server's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FarEnds {
    /// `None` when the profile has no load (`ping`).
    pub load: Option<Endpoint>,
    pub probe: Endpoint,
    pub http: HttpChoice,
}

/// What the user said of a web server far end beyond its URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpChoice {
    /// A PEM file of extra certificate authorities to trust (a lab's or a LAN's own).
    pub ca_file: Option<std::path::PathBuf>,
    /// The most load connections per direction.
    pub max_connections: Option<usize>,
    /// The small, large and upload URLs, given directly instead of the config's.
    pub urls: Option<[String; 3]>,
}

impl FarEnds {
    /// `unbloat serve` at `remote` for both, as `unbloat test HOST` always meant.
    pub fn unbloat(remote: &str) -> Result<FarEnds, MeasureError> {
        let server = Endpoint::parse(remote)?;
        Ok(FarEnds {
            load: Some(server.clone()),
            probe: server,
            http: HttpChoice::default(),
        })
    }

    /// The far ends of `--server`, `--load` and `--probe`: each role takes its own flag, else
    /// the server. A server that cannot play a role is an error that says what to add.
    pub fn choose(
        server: Option<&str>,
        load: Option<&str>,
        probe: Option<&str>,
        needs_load: bool,
    ) -> Result<FarEnds, MeasureError> {
        let server = server.map(Endpoint::parse).transpose()?;
        let load = load.map(Endpoint::parse).transpose()?;
        let probe = probe.map(Endpoint::parse).transpose()?;
        let invalid = |s: String| MeasureError::InvalidArgument(s);
        let probe = match (probe, &server) {
            (Some(p), _) => p,
            (None, Some(s)) => s.clone(),
            (None, None) => {
                return Err(invalid(
                    "no far end: name a server (unbloat test HOST, or --server URL), or both \
                     --load URL and --probe URL"
                        .into(),
                ))
            }
        };
        if let Endpoint::Iperf3 { .. } = probe {
            if server.as_ref() != Some(&probe) {
                return Err(invalid(
                    "--probe iperf3://: iperf3 carries load only; probe with irtt://HOST, \
                     unbloat://HOST or https://HOST"
                        .into(),
                ));
            }
        }
        let load = if needs_load {
            let chosen = load.or_else(|| server.clone()).ok_or_else(|| {
                invalid("this profile has load: add --load URL (or use --profile ping)".into())
            })?;
            if !chosen.loads() {
                return Err(invalid(format!(
                    "{}: an irtt server answers latency probes only; add --load iperf3://HOST \
                     or https://HOST for the load, or use --profile ping",
                    chosen.host()
                )));
            }
            Some(chosen)
        } else {
            None
        };
        Ok(FarEnds {
            load,
            probe,
            http: HttpChoice::default(),
        })
    }
}
