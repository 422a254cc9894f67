//! `unbloat-lab bench locate` (issue 39): does `unbloat test` put the queue where the emulation
//! has it? Each scenario is a lab whose bloat stands in a known place (the modem, the LAN hop,
//! both, one per direction) or whose gateway cannot be read (it drops pings, or answers late
//! under load). In it `unbloat test` runs from the LAN host against `unbloat serve`, as root (so
//! with the gateway's ICMP timestamps: one-way delays), while [`crate::truth`] reads every
//! emulated queue. Per run and way it compares:
//! - the verdict: the places the test names against those the queues' own delays name by the
//!   same rule (`unbloat_report::locate::FINDING_MS` and `FINDING_SHARE`); with a gateway that
//!   cannot be read, "past this machine" wherever the truth has a finding. A place whose queue's
//!   p95 is within the bound below of the rule's threshold may be named or not;
//! - each place's p50 and p95 against the queue's, within 20 % or 5 ms, whichever is larger.
//!
//! And what probing the gateway costs the test: the first scenario again with `--no-locate`,
//! runs interleaved, goodput and the far end's steady p95/p99 side by side.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use unbloat_report::locate::{Gateway, Location, Place, Way};
use unbloat_report::model::Results;
use unbloat_report::summary::Summary;
use unbloat_shaper::invocation::{Invocation, Test};
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_units::Time;

use crate::farend::{FarEndKind, Started};
use crate::lab::LabError;
use crate::profile::LinkProfile;
use crate::strategies::in_netns;
use crate::topology::{lan_answers_late, LiveTopology, Node, Topology};
use crate::truth::{close, way_truth, QueueSeries, TruthSampler, WayTruth};

/// The idle phase of each test: the gateway's late answers start after it and the lab's start-up.
const IDLE_S: u64 = 3;
const LATE_AFTER: Duration = Duration::from_millis(IDLE_S * 1000 + 1500);

/// One place, one known truth.
pub struct Scenario {
    pub name: &'static str,
    /// The lab profile (TOML): the access link, the modem's FIFO, the LAN hop.
    pub profile: &'static str,
    /// The `unbloat test` profiles run in it, each its own test.
    pub tests: &'static [&'static str],
}

/// The scenarios, in table order; the first is also run without the gateway's probes.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "modem-bloat",
        profile: include_str!("../locate/modem-bloat.toml"),
        tests: &["rrul"],
    },
    Scenario {
        name: "lan-bloat",
        profile: include_str!("../locate/lan-bloat.toml"),
        // One way at a time: under rrul the bloated upload bunches the download's ACKs and the
        // senders' bursts queue in the modem too, for real (the truth shows it).
        tests: &["download", "upload"],
    },
    Scenario {
        name: "both-hops",
        profile: include_str!("../locate/both-hops.toml"),
        tests: &["rrul"],
    },
    Scenario {
        name: "lan-down-modem-up",
        profile: include_str!("../locate/lan-down-modem-up.toml"),
        tests: &["rrul"],
    },
    Scenario {
        name: "silent-gateway",
        profile: include_str!("../locate/silent-gateway.toml"),
        tests: &["rrul"],
    },
    Scenario {
        name: "slow-gateway",
        profile: include_str!("../locate/slow-gateway.toml"),
        tests: &["rrul"],
    },
];

impl Scenario {
    pub fn by_name(name: &str) -> Option<&'static Scenario> {
        SCENARIOS.iter().find(|s| s.name == name)
    }

    pub fn link(&self) -> Result<LinkProfile, LabError> {
        LinkProfile::from_toml(self.profile, &format!("{:?} (locate scenario)", self.name))
            .map_err(|e| LabError::Locate(e.to_string()))
    }
}

/// One place's attribution held against its queue.
#[derive(Debug, Clone, Serialize)]
pub struct PlaceCheck {
    pub place: Place,
    pub attributed_p50_ms: f64,
    pub attributed_p95_ms: f64,
    pub truth_p50_ms: f64,
    pub truth_p95_ms: f64,
    /// Both percentiles within [`WITHIN_SHARE`] or [`WITHIN_MS`].
    pub within: bool,
}

/// One way of one run.
#[derive(Debug, Clone, Serialize)]
pub struct WayCheck {
    pub way: Way,
    pub named: Vec<Place>,
    pub expected: Vec<Place>,
    /// Too close to the threshold to tell: named or not, the verdict is right.
    pub borderline: Vec<Place>,
    pub right: bool,
    pub places: Vec<PlaceCheck>,
    pub truth: WayTruth,
}

/// One `unbloat test` in a scenario's lab.
#[derive(Debug, Clone, Serialize)]
pub struct LocateRun {
    pub scenario: String,
    pub test: String,
    pub run: usize,
    /// false: `--no-locate` (the cost runs).
    pub locate: bool,
    pub gateway: Option<Gateway>,
    /// What the test told the user.
    pub advice: Vec<String>,
    pub ways: Vec<WayCheck>,
    pub down_goodput_bps: Option<f64>,
    pub up_goodput_bps: Option<f64>,
    pub far_steady_p95_ms: Option<f64>,
    pub far_steady_p99_ms: Option<f64>,
    pub notes: Vec<String>,
}

impl LocateRun {
    /// Every way's verdict right (a run without an attribution is not).
    pub fn right(&self) -> bool {
        !self.ways.is_empty() && self.ways.iter().all(|w| w.right)
    }

    /// Every place within its bound.
    pub fn within(&self) -> bool {
        self.ways.iter().all(|w| w.places.iter().all(|p| p.within))
    }
}

/// What each run of a lab does.
pub struct RunPlan<'a> {
    pub exe: &'a Path,
    pub dir: &'a Path,
    pub duration_s: u64,
    /// (run number, with the gateway's probes) per round, in order.
    pub rounds: Vec<(usize, bool)>,
}

/// Runs `scenario`'s tests for every round of `plan` in one lab; a run per test and round.
pub fn run_scenario(scenario: &Scenario, plan: &RunPlan) -> Result<Vec<LocateRun>, LabError> {
    let profile = scenario.link()?;
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(Topology::new(&profile), &runner)?;
    let started = FarEndKind::Unbloat.start(&mut live, plan.dir, plan.exe)?;
    let mut runs = vec![];
    let mut failed = None;
    'rounds: for &(k, locate) in &plan.rounds {
        for test in scenario.tests {
            let out = plan.dir.join(format!(
                "{test}-{}{k}",
                if locate { "" } else { "no-locate-" }
            ));
            let args = TestRun {
                exe: plan.exe,
                far: &started,
                test,
                out: &out,
                locate,
                duration_s: plan.duration_s,
            };
            match one_test(&live, &args) {
                Ok(tested) => runs.push(judge(scenario.name, test, k, locate, tested)),
                Err(e) => {
                    failed = Some(e);
                    break 'rounds;
                }
            }
            // A deep FIFO drains before the next test's idle phase.
            std::thread::sleep(Duration::from_secs(3));
        }
    }
    live.stop_all();
    live.teardown()?;
    match failed {
        Some(e) => Err(e),
        None => Ok(runs),
    }
}

struct TestRun<'a> {
    exe: &'a Path,
    far: &'a Started,
    test: &'a str,
    out: &'a Path,
    locate: bool,
    duration_s: u64,
}

/// What one test gave: the summary it printed (`--json`), the start of its clock, the queues'
/// delays, notes.
struct Tested {
    summary: Summary,
    started_at_unix: f64,
    series: Vec<QueueSeries>,
    notes: Vec<String>,
}

/// One `unbloat test` from the LAN host with the queues read beside it.
fn one_test(live: &LiveTopology, t: &TestRun) -> Result<Tested, LabError> {
    let timeout = (t.duration_s + 50).to_string();
    let test = t.far.aim(Test {
        profile: Some(t.test.to_string()),
        duration: Some(Time::from_secs(t.duration_s)),
        idle: Some(Time::from_secs(IDLE_S)),
        probe_rate: Some(20.0),
        no_locate: !t.locate,
        out: Some(t.out.to_path_buf()),
        json: true,
        ..Test::default()
    });
    let cmd = Cmd::new("timeout")
        .args(["-s", "KILL", timeout.as_str()])
        .arg(t.exe.display().to_string())
        .args(Invocation::Test(test).argv()?);
    let truth = TruthSampler::start(&live.topo).map_err(LabError::Locate)?;
    let late = lan_answers_late(&live.topo.profile, true);
    let router = live.topo.ns(Node::Router);
    let ran = std::thread::scope(|s| {
        if let Some(late) = &late {
            // The router's CPU turns busy once the load has started: its answers come late.
            let router = router.clone();
            s.spawn(move || {
                std::thread::sleep(LATE_AFTER);
                SystemRunner::from_env().run(&in_netns(late, &router))
            });
        }
        live.run_in(Node::Lan, &cmd)
    })?;
    let (series, mut notes) = truth.finish();
    // Beside the test's results: what the queues held, for a plot or a second look.
    let queues = t.out.join("queues.json");
    let text = serde_json::to_string(&series).map_err(|e| LabError::Locate(e.to_string()))?;
    unbloat_safefs::ensure_dir(t.out).map_err(crate::error::io("creating", t.out))?;
    unbloat_safefs::write(&queues, text, 0o644).map_err(crate::error::io("writing", &queues))?;
    if let Some(calm) = lan_answers_late(&live.topo.profile, false) {
        live.apply(Node::Router, &[calm])?;
    }
    if ran.status != 0 {
        return Err(LabError::Locate(format!(
            "unbloat test --profile {} failed (status {}): {}",
            t.test,
            ran.status,
            ran.stderr.trim()
        )));
    }
    let summary: Summary = serde_json::from_str(&ran.stdout).map_err(|e| {
        LabError::Locate(format!(
            "unbloat test --json printed no summary ({e}): {}",
            ran.stdout.trim()
        ))
    })?;
    let results = read_results_in(t.out)?;
    notes.extend(results.metadata.notes.iter().cloned());
    Ok(Tested {
        summary,
        started_at_unix: results.metadata.started_at_unix,
        series,
        notes,
    })
}

/// The results file `unbloat test --out DIR` wrote (`unbloat-PROFILE-TIME.json`).
fn read_results_in(dir: &Path) -> Result<Results, LabError> {
    let found: Option<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| LabError::Locate(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with("unbloat-") && name.ends_with(".json")
        });
    let path =
        found.ok_or_else(|| LabError::Locate(format!("no results file in {}", dir.display())))?;
    unbloat_report::files::read_results(&path).map_err(|e| LabError::Locate(e.to_string()))
}

/// A run's checks against the queues' truth over the test's steady state.
fn judge(scenario: &str, test: &str, run: usize, locate: bool, t: Tested) -> LocateRun {
    let Tested {
        summary,
        started_at_unix: origin,
        series,
        notes,
    } = t;
    let from = origin + summary.phases.load_start() + unbloat_report::model::STARTUP_S;
    let to = origin + summary.phases.load_end();
    let ways = summary
        .location
        .as_ref()
        .map(|l| check_ways(l, &series, from, to))
        .unwrap_or_default();
    let far = summary.primary();
    LocateRun {
        scenario: scenario.into(),
        test: test.into(),
        run,
        locate,
        gateway: summary.location.as_ref().map(|l| l.gateway),
        advice: summary
            .location
            .as_ref()
            .map(|l| l.advice.clone())
            .unwrap_or_default(),
        ways,
        down_goodput_bps: summary.download.goodput_bps,
        up_goodput_bps: summary.upload.goodput_bps,
        far_steady_p95_ms: far.and_then(|p| p.steady_induced_p95_ms),
        far_steady_p99_ms: far.and_then(|p| p.steady_induced_p99_ms),
        notes,
    }
}

/// Each way the test attributed, against the truth of the same way. A round trip (no one-way
/// delays) has no truth here, since every queue carries one way: it is left out, and a run with
/// nothing else has no checked way and is not right.
fn check_ways(l: &Location, series: &[QueueSeries], from: f64, to: f64) -> Vec<WayCheck> {
    let readable = l.gateway == Gateway::Answered;
    l.ways
        .iter()
        .filter_map(|w| {
            let truth = way_truth(series, w.way, from, to)?;
            // A gateway that cannot be read leaves the test one place past this machine, which
            // holds a finding where any of the truth's places does.
            let (expected, maybe): (Vec<Place>, Vec<Place>) = match readable {
                true => (truth.findings.clone(), truth.borderline.clone()),
                false => {
                    let past = |v: &[Place]| match v.iter().any(|p| *p != Place::ThisMachine) {
                        true => vec![Place::PastThisMachine],
                        false => vec![],
                    };
                    (past(&truth.findings), past(&truth.borderline))
                }
            };
            let places = w
                .shares
                .iter()
                .filter_map(|s| {
                    let (t50, t95) = match s.place {
                        Place::PastThisMachine => (truth.total_p50_ms, truth.total_p95_ms),
                        p => truth
                            .places
                            .iter()
                            .find(|t| t.place == p)
                            .map(|t| (t.p50_ms, t.p95_ms))?,
                    };
                    Some(PlaceCheck {
                        place: s.place,
                        attributed_p50_ms: s.p50_ms,
                        attributed_p95_ms: s.p95_ms,
                        truth_p50_ms: t50,
                        truth_p95_ms: t95,
                        within: close(s.p50_ms, t50) && close(s.p95_ms, t95),
                    })
                })
                .collect();
            // Right: every clear finding named, and nothing named that is neither clear nor
            // too close to the threshold to tell.
            let right = expected.iter().all(|p| w.findings.contains(p))
                && w.findings
                    .iter()
                    .all(|p| expected.contains(p) || maybe.contains(p));
            Some(WayCheck {
                way: w.way,
                right,
                named: w.findings.clone(),
                expected,
                borderline: maybe,
                places,
                truth,
            })
        })
        .collect()
}

/// Every scenario's runs, and the cost of the gateway's probes.
#[derive(Debug, Clone, Serialize)]
pub struct LocateBench {
    pub runs: Vec<LocateRun>,
    /// Verdicts right in every run of every scenario, and every place within its bound.
    pub all_right: bool,
    pub all_within: bool,
}

/// `bench locate`: `runs` rounds of each of `scenarios` (all when empty), and as many without
/// the gateway's probes in the first, interleaved with its own.
pub fn run(
    exe: &Path,
    out: &Path,
    scenarios: &[&'static Scenario],
    runs: usize,
    duration_s: u64,
) -> Result<LocateBench, LabError> {
    if runs == 0 {
        return Err(LabError::Runs);
    }
    let chosen: Vec<&Scenario> = match scenarios.is_empty() {
        true => SCENARIOS.iter().collect(),
        false => scenarios.to_vec(),
    };
    unbloat_safefs::ensure_dir(out).map_err(crate::error::io("creating", out))?;
    let mut all = vec![];
    for (i, scenario) in chosen.iter().enumerate() {
        let dir = out.join(scenario.name);
        unbloat_safefs::ensure_dir(&dir).map_err(crate::error::io("creating", &dir))?;
        let rounds = (1..=runs)
            .flat_map(|k| {
                let without = (i == 0).then_some((k, false));
                std::iter::once((k, true)).chain(without)
            })
            .collect();
        eprintln!(
            "unbloat bench locate: {} ({} test(s) x {runs} run(s){})",
            scenario.name,
            scenario.tests.len(),
            if i == 0 {
                ", and as many without the gateway's probes"
            } else {
                ""
            }
        );
        let plan = RunPlan {
            exe,
            dir: &dir,
            duration_s,
            rounds,
        };
        let done = run_scenario(scenario, &plan)?;
        for r in &done {
            eprintln!("  {}", run_line(r));
        }
        all.extend(done);
    }
    let located: Vec<&LocateRun> = all.iter().filter(|r| r.locate).collect();
    Ok(LocateBench {
        all_right: located.iter().all(|r| r.right()),
        all_within: located.iter().all(|r| r.within()),
        runs: all,
    })
}

/// One run in a line: each way's verdict against the truth's.
pub fn run_line(r: &LocateRun) -> String {
    if !r.locate {
        return format!(
            "{} {} run {}: without the gateway's probes",
            r.scenario, r.test, r.run
        );
    }
    let ways: Vec<String> = r
        .ways
        .iter()
        .map(|w| {
            let verdict = match w.right {
                true => "right".to_string(),
                false => format!("WRONG: the queues say {}", places(&w.expected)),
            };
            format!("{} {} ({verdict})", way_word(w.way), places(&w.named))
        })
        .collect();
    let gateway = match r.gateway {
        Some(Gateway::Answered) => "answered".to_string(),
        Some(Gateway::NotProbed) | None => "not probed".into(),
        Some(Gateway::Silent { answered }) => {
            format!("silent ({:.0} % answered)", answered * 100.0)
        }
        Some(Gateway::SlowToAnswer { excess_ms }) => format!("slow to answer (+{excess_ms:.0} ms)"),
    };
    format!(
        "{} {} run {}: gateway {gateway}; {}",
        r.scenario,
        r.test,
        r.run,
        ways.join("; ")
    )
}

fn way_word(w: Way) -> &'static str {
    match w {
        Way::Down => "down",
        Way::Up => "up",
        Way::RoundTrip => "round trip",
    }
}

fn places(p: &[Place]) -> String {
    if p.is_empty() {
        return "none".into();
    }
    p.iter().map(|p| p.words()).collect::<Vec<_>>().join(" + ")
}

/// The table: per scenario, test, way and place, the verdicts right and the medians of the
/// attributed p50/p95 against the queue's; then the gateway's cost.
pub fn render(b: &LocateBench) -> String {
    use unbloat_report::stats::median;
    let mut out = String::from(
        "scenario           test      way   place               right  within  p50 test/queue ms  p95 test/queue ms\n",
    );
    let mut keys: Vec<(String, String)> = vec![];
    for r in b.runs.iter().filter(|r| r.locate) {
        let k = (r.scenario.clone(), r.test.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (scenario, test) in &keys {
        let runs: Vec<&LocateRun> = b
            .runs
            .iter()
            .filter(|r| r.locate && &r.scenario == scenario && &r.test == test)
            .collect();
        for way in [Way::Down, Way::Up, Way::RoundTrip] {
            let checks: Vec<&WayCheck> = runs
                .iter()
                .filter_map(|r| r.ways.iter().find(|w| w.way == way))
                .collect();
            let Some(first) = checks.first() else {
                continue;
            };
            let right = checks.iter().filter(|w| w.right).count();
            for place in first.places.iter().map(|p| p.place) {
                let of = |f: fn(&PlaceCheck) -> f64| {
                    let v: Vec<f64> = checks
                        .iter()
                        .filter_map(|w| w.places.iter().find(|p| p.place == place))
                        .map(f)
                        .collect();
                    median(&v).unwrap_or(f64::NAN)
                };
                let within = checks
                    .iter()
                    .filter_map(|w| w.places.iter().find(|p| p.place == place))
                    .filter(|p| p.within)
                    .count();
                out.push_str(&format!(
                    "{scenario:<18} {test:<9} {:<5} {:<19} {right}/{:<4} {within}/{:<5} {:>7.1} / {:<7.1}  {:>7.1} / {:<7.1}\n",
                    way_word(way),
                    place.words(),
                    runs.len(),
                    runs.len(),
                    of(|p| p.attributed_p50_ms),
                    of(|p| p.truth_p50_ms),
                    of(|p| p.attributed_p95_ms),
                    of(|p| p.truth_p95_ms),
                ));
            }
        }
    }
    out.push_str(&cost_lines(b));
    out.push_str(&format!(
        "verdicts right in every run: {}; every place within 20 % or 5 ms of its queue: {}\n",
        if b.all_right { "yes" } else { "NO" },
        if b.all_within { "yes" } else { "NO" },
    ));
    out
}

/// The gateway's probes' cost: medians with and without them, in the scenario run both ways.
fn cost_lines(b: &LocateBench) -> String {
    use unbloat_report::stats::median;
    let Some(without) = b.runs.iter().find(|r| !r.locate) else {
        return String::new();
    };
    let side = |locate: bool| {
        let runs: Vec<&LocateRun> = b
            .runs
            .iter()
            .filter(|r| r.locate == locate && r.scenario == without.scenario)
            .collect();
        let m = |f: fn(&LocateRun) -> Option<f64>| {
            median(&runs.iter().filter_map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        (
            m(|r| r.down_goodput_bps) / 1e6,
            m(|r| r.up_goodput_bps) / 1e6,
            m(|r| r.far_steady_p95_ms),
            m(|r| r.far_steady_p99_ms),
            runs.len(),
        )
    };
    let (with, none) = (side(true), side(false));
    format!(
        "\nthe gateway's probes ({}, medians): down {:.2} / {:.2} Mbit/s (ratio {:.3}), up {:.2} / {:.2} (ratio {:.3}), far end's steady p95 {:.1} / {:.1} ms, p99 {:.1} / {:.1} ms (with / without, {} / {} runs)\n",
        without.scenario,
        with.0,
        none.0,
        with.0 / none.0,
        with.1,
        none.1,
        with.1 / none.1,
        with.2,
        none.2,
        with.3,
        none.3,
        with.4,
        none.4,
    )
}
