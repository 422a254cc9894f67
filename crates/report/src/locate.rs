//! Where the queue stands (issue 39): the delay a load induces, attributed to this machine, the
//! first hop (between it and its gateway: the LAN or Wi-Fi) and the rest of the path (the
//! access link and beyond), each direction apart where one-way delays allow. Pure: it reads a
//! [`Results`] whose probes include a [`Hop::Gateway`] series beside the far end's.
//!
//! Why it works: a queue delays every packet that crosses it. The gateway's answers cross this
//! machine's queue and the first hop's; the far end's cross those and the rest. So, per
//! percentile of the steady state's induced delay (the load without its first 3 s):
//! - this machine: what its own egress qdisc held ([`Results::backlog`]), in time at the upload's
//!   goodput (upload only: a receiver's queue is its socket, not the path);
//! - the first hop: the gateway's induced delay less this machine's;
//! - the rest: the far end's less the gateway's.
//!
//! What it will not do: fold a gateway it cannot read into a hop. A gateway that answered too
//! few probes is [`Gateway::Silent`] ("cannot tell the first hop"); one whose answers are slower
//! than the far end's, which crossed it, is answering late from its CPU, not queueing
//! ([`Gateway::SlowToAnswer`]): then the first hop and the rest are told only together.

use serde::{Deserialize, Serialize};

use crate::model::{Hop, ProbeSample, ProbeSeries, Results, STARTUP_S};
use crate::stats::{self, Sorted};

/// The least share of the far end's p95 induced delay, and the least milliseconds, that make a
/// place a finding: below either it is noise or a packet's own time on the wire.
pub const FINDING_SHARE: f64 = 0.2;
pub const FINDING_MS: f64 = 5.0;
/// The least share of its probes sent under load that the gateway must answer to be read.
pub const GATEWAY_ANSWERED: f64 = 0.5;
/// How much slower than the far end's (at p50) the gateway's answers may be before they count
/// as its CPU answering late: [`FINDING_MS`], or this share of the far end's, whichever is more.
pub const SLOW_ANSWER_SHARE: f64 = 0.2;

/// Which way a delay was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Way {
    Up,
    Down,
    /// Both ways together: no one-way delays (a far end or gateway that does not stamp them).
    RoundTrip,
}

impl Way {
    pub fn words(self) -> &'static str {
        match self {
            Way::Up => "upload",
            Way::Down => "download",
            Way::RoundTrip => "round trip",
        }
    }
}

/// Where a queue stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    ThisMachine,
    /// Between this machine and its gateway: the LAN or Wi-Fi.
    FirstHop,
    /// Beyond the gateway: the access link (modem, ISP) and the rest of the path.
    Beyond,
    /// The first hop and the rest together, when the gateway cannot be read.
    PastThisMachine,
}

impl Place {
    pub fn words(self) -> &'static str {
        match self {
            Place::ThisMachine => "this machine",
            Place::FirstHop => "first hop",
            Place::Beyond => "beyond the gateway",
            Place::PastThisMachine => "past this machine",
        }
    }
}

/// A place's share of one way's induced delay, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub place: Place,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// What the gateway's answers allow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum Gateway {
    Answered,
    /// No gateway was probed: none on the route, or it could not be (the results' notes say).
    NotProbed,
    /// Too few answers under load.
    Silent {
        answered: f64,
    },
    /// Its answers came later than the far end's, which crossed it: by this much at p50.
    SlowToAnswer {
        excess_ms: f64,
    },
}

/// One way's attribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WayLocation {
    pub way: Way,
    /// The far end's induced delay, the whole to attribute.
    pub total_p50_ms: f64,
    pub total_p95_ms: f64,
    pub shares: Vec<Share>,
    /// The places that hold a finding's share, largest first.
    pub findings: Vec<Place>,
    /// 0..1: the largest finding's share of the whole at p95, less when probes were few.
    pub sureness: f64,
}

/// The attribution of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub gateway: Gateway,
    pub ways: Vec<WayLocation>,
    /// One line per finding a user can act on, and what could not be told.
    pub advice: Vec<String>,
}

/// Whether the run measured where its delay stands (`--no-locate` did not): a gateway probed
/// or this machine's backlog read.
pub fn measured(r: &Results) -> bool {
    !r.backlog.is_empty() || r.probes.iter().any(|p| p.hop == Hop::Gateway)
}

/// The attribution of a run that measured it ([`measured`]): what the summary and the plot show.
pub fn located(results: &Results) -> Option<Location> {
    measured(results).then(|| locate(results)).flatten()
}

/// The attribution of `results`; `None` without a far-end probe with an idle baseline and a
/// steady state.
pub fn locate(results: &Results) -> Option<Location> {
    let far = results.primary_probe()?;
    let gateway = results.probes.iter().find(|p| p.hop == Hop::Gateway);
    let window = Window::of(results);
    let state = gateway_state(far, gateway, &window);
    let readable = gateway.filter(|_| state == Gateway::Answered);
    let one_way = has_one_way(far) && readable.is_none_or(has_one_way);
    let ways: &[Way] = if one_way {
        &[Way::Down, Way::Up]
    } else {
        &[Way::RoundTrip]
    };
    let rate = results.upload_goodput_bps();
    let mut located = vec![];
    for &way in ways {
        let held = held(results, far, readable, way, &window, rate)?;
        located.push(judge(way, &held));
    }
    let advice = advise(&state, &located);
    Some(Location {
        gateway: state,
        ways: located,
        advice,
    })
}

/// The steady state's induced delay of one way, p50 and p95, as each place sees it: this
/// machine's backlog, the gateway's answers (which cross this machine's queue and the first
/// hop's), the far end's (which cross every queue).
struct Held {
    mine: (f64, f64),
    gateway: Option<(f64, f64)>,
    far: (f64, f64),
    probes: usize,
}

/// [`Held`] for `way`. Each place's share is the difference of two of these percentiles, not the
/// percentile of probe-by-probe differences: a far-end probe and the gateway's nearest one cross
/// a queue that changes within milliseconds at different moments, and their differences put
/// tens of milliseconds of noise into a p95 (issue 39's lab: 44 ms "beyond" on a LAN-only
/// download), where each distribution's own percentile is steady.
fn held(
    r: &Results,
    far: &ProbeSeries,
    gw: Option<&ProbeSeries>,
    way: Way,
    w: &Window,
    upload_bps: Option<f64>,
) -> Option<Held> {
    let far_values = induced_values(far, way, w)?;
    let gateway = match gw {
        Some(g) => Some(pair(&induced_values(g, way, w)?)?),
        None => None,
    };
    // A receiver's queue is its socket, not the path: the backlog counts against the upload.
    let mine: Vec<f64> = match (way, upload_bps) {
        (Way::Down, _) | (_, None) => vec![],
        (_, Some(bps)) => r
            .backlog
            .iter()
            .filter(|b| w.steady(b.t))
            .map(|b| b.bytes as f64 * 8.0 / bps * 1000.0)
            .collect(),
    };
    Some(Held {
        mine: pair(&mine).unwrap_or((0.0, 0.0)),
        gateway,
        far: pair(&far_values)?,
        probes: far_values.len(),
    })
}

/// The p50 and p95 of `values`.
fn pair(values: &[f64]) -> Option<(f64, f64)> {
    let s = Sorted::new(values);
    Some((s.percentile(50.0)?, s.percentile(95.0)?))
}

/// The steady state's values of `way`, less the idle median (never below 0).
fn induced_values(p: &ProbeSeries, way: Way, w: &Window) -> Option<Vec<f64>> {
    let v: Vec<f64> = less_idle(p, way, w)?
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The steady state's values of `way` less the idle median, as measured (noise can put some
/// below 0).
fn less_idle(p: &ProbeSeries, way: Way, w: &Window) -> Option<Vec<f64>> {
    let idle = idle_median(p, way, w)?;
    Some(
        timed(p, way, w)
            .into_iter()
            .map(|(_, v)| v - idle)
            .collect(),
    )
}

/// The steady state's answered samples of `way`, in time order.
fn timed(p: &ProbeSeries, way: Way, w: &Window) -> Vec<(f64, f64)> {
    p.samples
        .iter()
        .filter(|s| w.steady(s.t))
        .filter_map(|s| value(s, way).map(|v| (s.t, v)))
        .collect()
}

/// The attribution for the terminal: a line per way with each place's share, then the advice.
pub fn render_text(l: &Location) -> String {
    let mut out = String::from("Where the queue stands (steady state, added delay p95 / p50):\n");
    for w in &l.ways {
        let shares: Vec<String> = w
            .shares
            .iter()
            .map(|s| format!("{} {:.0} / {:.0} ms", s.place.words(), s.p95_ms, s.p50_ms))
            .collect();
        out.push_str(&format!(
            "  {:<10} {:.0} / {:.0} ms: {}\n",
            w.way.words(),
            w.total_p95_ms,
            w.total_p50_ms,
            shares.join(", ")
        ));
    }
    for a in &l.advice {
        out.push_str(&format!("  - {a}\n"));
    }
    out
}

/// The steady state of the load: where the delays are compared.
struct Window {
    idle_to: f64,
    from: f64,
    to: f64,
}

impl Window {
    fn of(r: &Results) -> Window {
        Window {
            idle_to: r.phases.load_start(),
            from: r.phases.load_start() + STARTUP_S,
            to: r.phases.load_end(),
        }
    }

    fn steady(&self, t: f64) -> bool {
        t >= self.from && t < self.to
    }
}

fn value(s: &ProbeSample, way: Way) -> Option<f64> {
    match way {
        Way::Up => s.owd_up_ms,
        Way::Down => s.owd_down_ms,
        Way::RoundTrip => s.rtt_ms,
    }
}

fn has_one_way(p: &ProbeSeries) -> bool {
    p.samples
        .iter()
        .any(|s| s.owd_up_ms.is_some() && s.owd_down_ms.is_some())
}

/// The idle median of `way` (the clocks' offset of a one-way delay cancels against it).
fn idle_median(p: &ProbeSeries, way: Way, w: &Window) -> Option<f64> {
    let idle: Vec<f64> = p
        .samples
        .iter()
        .filter(|s| s.t < w.idle_to)
        .filter_map(|s| value(s, way))
        .collect();
    stats::median(&idle)
}

/// The steady state's induced delay of `way`, p50 and p95.
fn induced(p: &ProbeSeries, way: Way, w: &Window) -> Option<(f64, f64)> {
    pair(&less_idle(p, way, w)?)
}

fn gateway_state(far: &ProbeSeries, gw: Option<&ProbeSeries>, w: &Window) -> Gateway {
    let Some(gw) = gw else {
        return Gateway::NotProbed;
    };
    let loaded: Vec<&ProbeSample> = gw.samples.iter().filter(|s| w.steady(s.t)).collect();
    let answered = if loaded.is_empty() {
        0.0
    } else {
        loaded.iter().filter(|s| s.rtt_ms.is_some()).count() as f64 / loaded.len() as f64
    };
    if answered < GATEWAY_ANSWERED {
        return Gateway::Silent { answered };
    }
    // Each way of the gateway's path is part of the far end's: its answers cannot wait longer
    // in a queue than the far end's, one way or the round trip. A late answer shows in the way
    // after the gateway's stamp, so each way is held apart where both series have one-way
    // delays; the round trip alone would hide 400 ms of it behind a far end's 750.
    let mut ways = vec![Way::RoundTrip];
    if has_one_way(gw) && has_one_way(far) {
        ways.extend([Way::Down, Way::Up]);
    }
    let mut excess = None::<f64>;
    let mut read = false;
    for way in ways {
        let (Some(g), Some(f)) = (induced(gw, way, w), induced(far, way, w)) else {
            continue;
        };
        read |= way == Way::RoundTrip;
        let over = g.0 - f.0;
        if over > FINDING_MS.max(SLOW_ANSWER_SHARE * f.0) {
            excess = Some(excess.map_or(over, |e| e.max(over)));
        }
    }
    match excess {
        Some(excess_ms) => Gateway::SlowToAnswer { excess_ms },
        None if read => Gateway::Answered,
        None => Gateway::Silent { answered },
    }
}

/// The findings of one way: every place holding at least [`FINDING_SHARE`] of the whole and
/// [`FINDING_MS`] at p95, largest first. This machine holds its backlog; the first hop what
/// the gateway's answers hold beyond it; the rest what the far end's hold beyond the gateway's.
fn judge(way: Way, h: &Held) -> WayLocation {
    let beyond = |outer: (f64, f64), inner: (f64, f64)| {
        ((outer.0 - inner.0).max(0.0), (outer.1 - inner.1).max(0.0))
    };
    let share = |place: Place, (p50_ms, p95_ms): (f64, f64)| Share {
        place,
        p50_ms,
        p95_ms,
    };
    let mine = (h.mine.0.min(h.far.0), h.mine.1.min(h.far.1));
    let mut shares = vec![share(Place::ThisMachine, mine)];
    match h.gateway {
        Some(gw) => {
            shares.push(share(Place::FirstHop, beyond(gw, mine)));
            shares.push(share(Place::Beyond, beyond(h.far, gw)));
        }
        None => shares.push(share(Place::PastThisMachine, beyond(h.far, mine))),
    }
    let (total_p50_ms, total_p95_ms) = h.far;
    let least = FINDING_MS.max(FINDING_SHARE * total_p95_ms);
    let mut found: Vec<&Share> = shares.iter().filter(|s| s.p95_ms >= least).collect();
    found.sort_by(|a, b| b.p95_ms.total_cmp(&a.p95_ms));
    let held: f64 = shares.iter().map(|s| s.p95_ms).sum();
    // Few probes make a p95 a guess: full weight from 100 (5 s at 20 a second).
    let weight = (h.probes as f64 / 100.0).min(1.0);
    let sureness = found
        .first()
        .map_or(0.0, |s| s.p95_ms / held.max(f64::EPSILON))
        * weight;
    WayLocation {
        way,
        total_p50_ms,
        total_p95_ms,
        findings: found.iter().map(|s| s.place).collect(),
        shares,
        sureness,
    }
}

/// A line per finding, and one for what the gateway kept from being told.
fn advise(gateway: &Gateway, ways: &[WayLocation]) -> Vec<String> {
    let mut lines = vec![];
    match gateway {
        Gateway::Answered => {}
        Gateway::NotProbed => lines.push(
            "cannot tell the first hop: no gateway was probed (none on the route to the far end, or it could not be pinged: the notes say which); the delay past this machine is told as one".into(),
        ),
        Gateway::Silent { answered } => lines.push(format!(
            "cannot tell the first hop: the gateway answered {:.0} % of its probes under load (it may drop ICMP); the delay past this machine is told as one",
            answered * 100.0
        )),
        Gateway::SlowToAnswer { excess_ms } => lines.push(format!(
            "cannot tell the first hop: the gateway answered {excess_ms:.0} ms later than the far end, whose probes crossed it, so its own CPU answers late under load; that is not a queue, and the delay past this machine is told as one"
        )),
    }
    for w in ways {
        for place in &w.findings {
            let s = w
                .shares
                .iter()
                .find(|s| s.place == *place)
                .expect("a finding is a share");
            lines.push(advice(w.way, s));
        }
        if w.findings.is_empty() && w.total_p95_ms >= FINDING_MS {
            lines.push(format!(
                "the {} delay (+{:.0} ms at p95) is spread over the path: no one place holds most of it",
                w.way.words(),
                w.total_p95_ms
            ));
        }
    }
    lines
}

fn advice(way: Way, s: &Share) -> String {
    let dir = match way {
        Way::RoundTrip => {
            "one way or both (the gateway's echo replies carry no one-way times)".to_string()
        }
        _ => format!("in the {}", way.words()),
    };
    let size = format!("about {:.0} ms at p95, {:.0} at p50", s.p95_ms, s.p50_ms);
    match s.place {
        Place::ThisMachine => format!(
            "the queue is in this machine's own egress ({size}): its qdisc holds it; give the interface fq_codel or cake (`unbloat start IFACE --up RATE`); the router cannot fix it"
        ),
        Place::FirstHop => format!(
            "the queue is between this machine and its gateway, {dir} ({size}): your Wi-Fi or LAN; shaping the WAN will not help; use a cable or move nearer the access point, or give the access point fq_codel and airtime fairness"
        ),
        Place::Beyond => format!(
            "the queue is behind your gateway, {dir} ({size}): the modem or the ISP; shape the WAN with `unbloat start` or `unbloat tune` on the router"
        ),
        Place::PastThisMachine => format!(
            "the queue is past this machine, {dir} ({size}): the LAN, the Wi-Fi or the access link, which the gateway's answers could not tell apart"
        ),
    }
}

#[cfg(test)]
mod tests;
