//! What the hostile benchmark found, per attack, and its table.

use serde::Serialize;

use super::attack::{Kind, Outcomes};
use super::legit::{Probes, TestRun, TEST_NOMINAL_S};
use super::net::Source;
use crate::procstat::Watched;

/// The attacked servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// `unbloat serve`.
    Serve,
    /// The daemon's web page (`unbloat daemon --web`).
    Page,
    /// The daemon's metrics (`unbloat daemon --metrics`).
    Metrics,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Serve, Target::Page, Target::Metrics];

    pub fn name(self) -> &'static str {
        match self {
            Target::Serve => "serve",
            Target::Page => "page",
            Target::Metrics => "metrics",
        }
    }

    pub fn by_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// One attack on one server.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub target: Target,
    pub attack: Kind,
    pub source: Source,
    pub outcomes: Outcomes,
    /// The legitimate client's asks through the attack.
    pub legit: Probes,
    /// Against `serve`: one real `unbloat test`.
    pub test: Option<TestRun>,
    /// The server process, sampled every 50 ms (and the kernel's own peak, VmHWM).
    pub server: Watched,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostileBench {
    pub version: u32,
    pub kernel: String,
    pub cpus: usize,
    pub connections: usize,
    pub seconds: f64,
    pub gap_s: f64,
    pub flood_rate: u32,
    pub cases: Vec<Case>,
}

pub fn render(b: &HostileBench) -> String {
    let mut s = format!(
        "Hostile clients against serve, the page and metrics (Linux {}, {} CPUs): {} connections \
         an attack for {} s; slow: a byte every {} s each; flood: at most {} connects/s\n\n",
        b.kernel, b.cpus, b.connections, b.seconds, b.gap_s, b.flood_rate
    );
    s.push_str(&format!(
        "{:<8} {:<6} {:<12} {:>8} {:>8} {:>9} {:>6} {:>8} {:>6} {:>9} {:>15} {:>9} {:>8} {:>5}\n",
        "target",
        "attack",
        "from",
        "connects",
        "503",
        "closed<1s",
        "cut",
        "held max",
        "at end",
        "legit",
        "wait p50/max",
        "peak RSS",
        "threads",
        "fds"
    ));
    for c in &b.cases {
        let o = &c.outcomes;
        s.push_str(&format!(
            "{:<8} {:<6} {:<12} {:>8} {:>8} {:>9} {:>6} {:>7.1}s {:>6} {:>9} {:>6.1}/{:<6.1}ms {:>5} MiB {:>8} {:>5}\n",
            c.target.name(),
            c.attack.name(),
            c.source.name(),
            o.connects,
            o.refused_503,
            o.closed_at_once,
            o.cut,
            o.longest_held_s,
            o.held_at_end,
            format!("{}/{}", c.legit.served, c.legit.asked),
            c.legit.wait_ms_p50,
            c.legit.wait_ms_max,
            c.server.peak.hwm_kib / 1024,
            c.server.peak.threads,
            c.server.peak.fds,
        ));
    }
    s.push('\n');
    for c in &b.cases {
        let head = format!(
            "{} {} from {}",
            c.target.name(),
            c.attack.name(),
            c.source.name()
        );
        if let Some(t) = &c.test {
            match &t.error {
                None => s.push_str(&format!(
                    "{head}: unbloat test ran: {:.1} s from start to end, {:.0} s of it the test's own\n",
                    t.wall_s, TEST_NOMINAL_S
                )),
                Some(e) => s.push_str(&format!("{head}: unbloat test FAILED: {e}\n")),
            }
        }
        if let Some(f) = &c.legit.failure {
            s.push_str(&format!(
                "{head}: the legitimate client was once not served: {f}\n"
            ));
        }
        if c.outcomes.connect_errors > 0 {
            s.push_str(&format!(
                "{head}: {} connects failed\n",
                c.outcomes.connect_errors
            ));
        }
    }
    if let Some(r) = b.cases.iter().find_map(|c| c.outcomes.refusal.as_ref()) {
        s.push_str(&format!("\nA 503's body: {r}\n"));
    }
    s.push_str(
        "\n503: answered 503 + Retry-After (page, metrics); closed<1s: closed within a second \
         without a word (serve's refusal); cut: closed later (a deadline), held max the longest \
         any was held; at end: still open when the attack stopped; legit: the other address's \
         asks (serve's hello, GET / or /metrics) served of those made, once a second; peak RSS \
         is the kernel's VmHWM.\n",
    );
    s
}
