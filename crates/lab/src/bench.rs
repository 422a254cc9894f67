//! `unbloat-lab bench lab`: every shipped profile x every strategy, and the table issue 4 §7 asks
//! for, with its checks:
//! - `none` gets grade C or worse on every profile (in every run);
//! - `unbloat` keeps UDP BE induced p99 within 10 ms + two full-size packet times of the slower
//!   direction, with goodput at least 90 % of the theoretical both ways;
//! - `unbloat` is no worse than `sqm-piece-of-cake` on latency (UDP BE induced p99) or goodput.
//!
//! By default the real sqm-scripts run too, each beside its re-creation (`sqm-scripts:simple`
//! after `sqm-simple`, `sqm-scripts:piece_of_cake` after `sqm-piece-of-cake`), when its source is
//! usable ([`unbloat_testbed::sqm::locate`]); the checks above stay on the re-creations.
//!
//! With `--runs N` each profile's lab runs N times and the checks take the medians over the runs
//! (see [`crate::spread`] for why one run is not enough on slow links).
//!
//! A whole matrix takes about 5 profiles x (calibration + 7 strategies x (load + 15 s)): with the
//! default 30 s of load, roughly 40 minutes per run.

use std::path::{Path, PathBuf};

use serde::Serialize;
use unbloat_report::stats::Grade;
use unbloat_units::Time;

use crate::bench_tuned::{self, TunedVsSqm};
use crate::lab::{io, run_lab, validate, LabArgs, LabError, LabReport};
use crate::profile::{shipped_names, LinkProfile};
use crate::spread::{self, Spread, StrategySpread};
use crate::strategies::Strategy;

/// `unbloat-lab bench lab` arguments.
#[derive(Debug, Clone)]
pub struct BenchLabArgs {
    /// Profiles to run, comma-separated: shipped names or TOML files (default: every shipped
    /// profile).
    pub profiles: Option<String>,
    /// Strategies to compare, comma-separated, as `unbloat-lab run --strategies` takes them (its
    /// --help says more). Default: the five the lab writes, with the real sqm-scripts beside its
    /// re-creations (sqm-scripts:simple, sqm-scripts:piece_of_cake) when its source is found.
    /// The checks that involve a strategy left out are not made.
    pub strategies: Option<String>,
    /// sqm-scripts' source (the directory with src/start-sqm); default: third_party/sqm-scripts
    /// of the source tree unbloat was built from.
    pub sqm_scripts: Option<PathBuf>,
    /// Run each profile's lab N times; the checks use the medians over the runs, and a table
    /// shows each number's median and range.
    pub runs: usize,
    /// The `unbloat test` profile.
    pub test: String,
    /// Load per test (a bare number is seconds).
    pub duration: Time,
    /// Report directory: one subdirectory per profile (and per run, with --runs above 1).
    pub out: PathBuf,
    /// Keep the runs --out already holds (their lab.json, from the same strategies) and run only
    /// the missing ones: five runs of several profiles take hours, and can be run in parts.
    pub resume: bool,
    /// Print every run's comparison, the spreads and the failed checks as JSON.
    pub json: bool,
    /// Run nothing: check and print a finished benchmark again from its report directory
    /// (every `PROFILE/lab.json` or `PROFILE/run-K/lab.json` in DIR).
    pub from: Option<PathBuf>,
}

/// One profile of the benchmark: its runs, their spread and the checks that failed.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileBench {
    pub profile: LinkProfile,
    /// The bound on unbloat's UDP BE induced p99, ms.
    pub bound_ms: f64,
    pub runs: Vec<LabReport>,
    pub spread: Vec<StrategySpread>,
    pub failed: Vec<String>,
    /// `unbloat-tuned` against the real sqm-scripts piece_of_cake, when both ran.
    pub tuned: Option<TunedVsSqm>,
}

impl ProfileBench {
    /// The spreads of `runs` (all of the same profile) and the checks on them.
    pub fn new(runs: Vec<LabReport>) -> Option<ProfileBench> {
        let profile = runs.first()?.profile.clone();
        let bound_ms = latency_bound_ms(&profile);
        let spread = spread::spreads(&runs);
        let cpu_bound = runs.iter().filter(|r| r.machine_bound().is_some()).count();
        let failed = checks(&profile.name, bound_ms, &spread, cpu_bound);
        let no_rate = bench_tuned::NoRateKept {
            runs: runs.iter().filter(|r| tune_missed_the_download(r)).count(),
            of: runs.len(),
        };
        let tuned = bench_tuned::compare(&profile.name, &spread, cpu_bound > 0, no_rate);
        Some(ProfileBench {
            tuned,
            profile,
            bound_ms,
            runs,
            spread,
            failed,
        })
    }
}

/// Whether the run's `unbloat tune` said its download search kept no rate within its bound.
fn tune_missed_the_download(run: &LabReport) -> bool {
    run.runs
        .iter()
        .filter_map(|s| s.tuned.as_ref())
        .any(|t| t.missed.iter().any(|m| m.phase == "download"))
}

/// The bound on unbloat's UDP BE induced p99 for a profile, ms: 10 ms plus two times one
/// full-size (1500-byte) packet takes on the wire of the slower direction (issue 4 §7).
pub fn latency_bound_ms(profile: &LinkProfile) -> f64 {
    let wire = unbloat_shaper::goodput::LinkFraming::from(&profile.link_layer()).wire_bytes(1500);
    10.0 + 2.0 * profile.slower_rate().seconds_for(wire) * 1000.0
}

/// The failed checks of one profile, in words, from the medians over its runs. `cpu_bound` is how
/// many of the runs measured the machine rather than the link ([`LabReport::machine_bound`]).
pub fn checks(name: &str, bound: f64, rows: &[StrategySpread], cpu_bound: usize) -> Vec<String> {
    let mut failed = Vec::new();
    let row = |s: Strategy| rows.iter().find(|r| r.strategy == s);
    let median = |s: &Option<Spread>| s.as_ref().map(|s| s.median);
    if let Some(none) = row(Strategy::None) {
        if let Some(best) = none.best_grade().filter(|g| *g < Grade::C) {
            failed.push(format!("{name}: none graded {best} (expected C or worse)"));
        }
    }
    if let Some(u) = row(Strategy::Unbloat) {
        match median(&u.be_p99_ms) {
            Some(p) if p <= bound => {}
            Some(p) => failed.push(format!(
                "{name}: unbloat UDP BE induced p99 {p:.1} ms above {bound:.1} ms"
            )),
            None => failed.push(format!("{name}: unbloat has no UDP BE induced p99")),
        }
        for (dir, share) in [("down", &u.down_share), ("up", &u.up_share)] {
            match median(share) {
                Some(s) if s >= 0.90 => {}
                Some(s) => failed.push(format!(
                    "{name}: unbloat {dir} goodput {:.1} % below 90 % of theoretical",
                    s * 100.0
                )),
                None => failed.push(format!("{name}: unbloat has no {dir} goodput")),
            }
        }
        if let Some(c) = row(Strategy::SqmPieceOfCake) {
            if let (Some(a), Some(b)) = (&u.be_p99_ms, &c.be_p99_ms) {
                let (worse, p) = spread::worse(a, b);
                let evidence = p.map_or(String::new(), |p| {
                    format!(" (rank test over {} + {} runs: p = {p:.3})", a.n, b.n)
                });
                if worse {
                    failed.push(format!(
                        "{name}: unbloat p99 {:.1} ms worse than sqm-piece-of-cake {:.1} ms{evidence}",
                        a.median, b.median
                    ));
                }
            }
            for (dir, a, b) in [
                ("down", &u.down_share, &c.down_share),
                ("up", &u.up_share, &c.up_share),
            ] {
                if let (Some(a), Some(b)) = (median(a), median(b)) {
                    // One point of slack: goodput varies by about that between identical runs.
                    if a + 0.01 < b {
                        failed.push(format!(
                            "{name}: unbloat {dir} goodput {:.1} % below sqm-piece-of-cake {:.1} %",
                            a * 100.0,
                            b * 100.0
                        ));
                    }
                }
            }
        }
    }
    if cpu_bound > 0 {
        failed.push(format!(
            "{name}: CPU-bound in {cpu_bound} run(s) (calibration, or a second under 10 % idle): numbers are not the link's"
        ));
    }
    failed
}

/// The whole matrix as text: each run's lab table, the spreads when there are several runs, then
/// the failed checks (or "all hold").
pub fn render_benchmark(benches: &[ProfileBench]) -> String {
    let mut out = String::new();
    for b in benches {
        let n = b.runs.len();
        for (i, r) in b.runs.iter().enumerate() {
            if n > 1 {
                out.push_str(&format!("run {} of {n}: ", i + 1));
            }
            out.push_str(&r.render_text());
            out.push('\n');
        }
        if n > 1 {
            out.push_str(&format!(
                "{} over {n} runs: median (min-max)\n{}\n",
                b.profile.name,
                spread::render_text(&b.spread)
            ));
        }
        out.push_str(&format!(
            "unbloat's UDP BE p99 bound on {}: {:.1} ms\n\n",
            b.profile.name, b.bound_ms
        ));
    }
    let tuned: Vec<TunedVsSqm> = benches.iter().filter_map(|b| b.tuned.clone()).collect();
    out.push_str(&bench_tuned::render(&tuned));
    let failed: Vec<&String> = benches.iter().flat_map(|b| &b.failed).collect();
    if failed.is_empty() {
        out.push_str("every check of issue 4 §7 holds\n");
    } else {
        out.push_str("checks that failed:\n");
        for f in failed {
            out.push_str(&format!("  {f}\n"));
        }
    }
    out
}

/// Everything as one JSON document: the profiles, and every failed check.
pub fn render_json(benches: &[ProfileBench]) -> Result<String, serde_json::Error> {
    let failed: Vec<&String> = benches.iter().flat_map(|b| &b.failed).collect();
    serde_json::to_string_pretty(&serde_json::json!({
        "profiles": benches,
        "failed": failed,
    }))
}

/// Each profile's lab request, checked (by the lab's own validation) before the first lab starts,
/// so that a typo in the last profile does not surface half an hour in.
fn plan(args: &BenchLabArgs) -> Result<Vec<LabArgs>, LabError> {
    if args.runs == 0 {
        return Err(LabError::Runs);
    }
    let names: Vec<String> = match &args.profiles {
        Some(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        None => shipped_names().iter().map(|s| s.to_string()).collect(),
    };
    let strategies = args
        .strategies
        .clone()
        .unwrap_or_else(|| default_strategies(sqm_given_or_found(args)));
    names
        .into_iter()
        .map(|name| {
            let lab = LabArgs {
                out: args.out.join(dir_name(&name)),
                profile: name,
                strategies: strategies.clone(),
                sqm_scripts: args.sqm_scripts.clone(),
                test: args.test.clone(),
                duration: args.duration,
                ..LabArgs::default()
            };
            validate(&lab)?;
            Ok(lab)
        })
        .collect()
}

/// Whether the real sqm-scripts can be run: `--sqm-scripts` was given (the lab's check then says
/// whether it holds sqm-scripts), or the vendored copy can be used.
fn sqm_given_or_found(args: &BenchLabArgs) -> bool {
    args.sqm_scripts.is_some() || unbloat_testbed::sqm::locate(None).is_ok()
}

/// The strategies of a benchmark that names none: [`Strategy::with_real_sqm`] when sqm-scripts
/// can be run, else the five the lab writes itself.
fn default_strategies(with_real_sqm: bool) -> String {
    let list = if with_real_sqm {
        Strategy::with_real_sqm()
    } else {
        Strategy::ALL.to_vec()
    };
    let names: Vec<String> = list.iter().map(Strategy::name).collect();
    names.join(",")
}

/// Everything [`run_benchmark`] could refuse as invalid input (exit status 2), before any lab
/// starts: each profile's request, and that the report directory can be written. `--from` runs
/// nothing, so only its own reading can fail.
pub fn check(args: &BenchLabArgs) -> Result<(), LabError> {
    if args.from.is_some() {
        return Ok(());
    }
    plan(args)?;
    unbloat_report::files::check_writable(&args.out).map_err(|source| LabError::Out {
        path: args.out.clone(),
        source,
    })
}

/// Runs every profile (or those asked) with every strategy (or those asked), `runs` times each.
/// Progress on stderr.
pub fn run_benchmark(
    args: &BenchLabArgs,
    unbloat_exe: &Path,
) -> Result<Vec<ProfileBench>, LabError> {
    let labs = plan(args)?;
    if args.strategies.is_none() && args.sqm_scripts.is_none() {
        if let Err(why) = unbloat_testbed::sqm::locate(None) {
            eprintln!(
                "bench lab: the real sqm-scripts are left out: its vendored copy cannot be used \
                 ({why}); give --sqm-scripts DIR"
            );
        }
    }
    let mut benches = Vec::new();
    for lab in labs {
        let mut runs = Vec::new();
        for i in 1..=args.runs {
            let mut run = lab.clone();
            if args.runs > 1 {
                eprintln!("bench lab: {}, run {i} of {}", lab.profile, args.runs);
                run.out = lab.out.join(format!("run-{i}"));
            }
            let kept = if args.resume {
                LabReport::finished(&run.out)?
            } else {
                None
            };
            if let Some(done) = kept {
                eprintln!(
                    "bench lab: {}, run {i}: kept from {}",
                    lab.profile,
                    run.out.join("lab.json").display()
                );
                runs.push(done);
                continue;
            }
            runs.push(run_lab(&run, unbloat_exe)?);
        }
        benches.extend(ProfileBench::new(runs));
    }
    Ok(benches)
}

/// Reads a finished benchmark back from `dir`: one profile per subdirectory, its runs from
/// `lab.json` there or from `run-K/lab.json` (in the order of K).
pub fn load_benchmark(dir: &Path) -> Result<Vec<ProfileBench>, LabError> {
    let subdirs = |d: &Path| -> Result<Vec<PathBuf>, LabError> {
        let entries = std::fs::read_dir(d).map_err(io("cannot list", d))?;
        let mut v: Vec<PathBuf> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        Ok(v)
    };
    let mut benches = Vec::new();
    for profile_dir in subdirs(dir)? {
        let single = profile_dir.join("lab.json");
        let paths: Vec<PathBuf> = if single.is_file() {
            vec![single]
        } else {
            let mut numbered: Vec<(u32, PathBuf)> = subdirs(&profile_dir)?
                .into_iter()
                .filter_map(|p| {
                    let k = p
                        .file_name()?
                        .to_str()?
                        .strip_prefix("run-")?
                        .parse()
                        .ok()?;
                    Some((k, p.join("lab.json")))
                })
                .filter(|(_, p)| p.is_file())
                .collect();
            numbered.sort();
            numbered.into_iter().map(|(_, p)| p).collect()
        };
        let runs = paths
            .iter()
            .map(|p| LabReport::read(p, "cannot read"))
            .collect::<Result<Vec<_>, _>>()?;
        benches.extend(ProfileBench::new(runs));
    }
    if benches.is_empty() {
        return Err(LabError::NoBenchmark(dir.to_path_buf()));
    }
    Ok(benches)
}

/// Test fixture: two real adsl runs of `bench lab --runs 5` (session 4) laid out as a benchmark
/// writes them, `dir/run-1/lab.json` and `dir/run-2/lab.json`.
#[cfg(test)]
pub(crate) fn lay_out_adsl_runs(dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-adsl");
    for k in [1, 2] {
        let run = dir.join(format!("run-{k}"));
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::copy(fixtures.join(format!("run-{k}.json")), run.join("lab.json")).expect("copy");
    }
}

/// A profile's report subdirectory: its name, or a file's stem (`my/adsl-x.toml` -> `adsl-x`).
fn dir_name(profile: &str) -> String {
    Path::new(profile)
        .file_stem()
        .map_or(profile.to_string(), |s| s.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_bounds_are_those_of_issue_4() {
        // dsl-2002: 1500 + 10 = 1510 bytes -> 32 cells = 1696 bytes at 220 kbit/s = 61.7 ms.
        let dsl = latency_bound_ms(&LinkProfile::shipped("dsl-2002").expect("dsl-2002"));
        assert!(
            (dsl - (10.0 + 2.0 * 1696.0 * 8.0 / 220.0)).abs() < 1e-6,
            "{dsl}"
        );
        assert!((130.0..136.0).contains(&dsl), "{dsl}");
        // vdsl2: ~1.2 ms per packet at 20 Mbit/s: about 11 ms.
        let v = latency_bound_ms(&LinkProfile::shipped("vdsl2").expect("vdsl2"));
        assert!((11.0..11.5).contains(&v), "{v}");
    }

    fn one(v: f64) -> Option<Spread> {
        Spread::of([v])
    }

    fn row(strategy: Strategy, p99: f64, down: f64, up: f64, grade: Grade) -> StrategySpread {
        StrategySpread {
            strategy,
            be_p50_ms: one(p99 / 4.0),
            be_p99_ms: one(p99),
            be_steady_p99_ms: None,
            down_share: one(down),
            up_share: one(up),
            grades: vec![Some(grade)],
        }
    }

    #[test]
    fn a_table_that_meets_section_7_passes_every_check() {
        let rows = [
            row(Strategy::None, 400.0, 0.6, 0.99, Grade::D),
            row(Strategy::SqmPieceOfCake, 18.0, 0.95, 0.95, Grade::APlus),
            row(Strategy::Unbloat, 6.0, 0.95, 0.94, Grade::APlus),
        ];
        assert_eq!(checks("vdsl2", 11.0, &rows, 0), Vec::<String>::new());
    }

    #[test]
    fn each_check_fails_on_its_own_number() {
        let rows = [
            row(Strategy::None, 50.0, 0.6, 0.99, Grade::B),
            row(Strategy::SqmPieceOfCake, 18.0, 0.96, 0.95, Grade::APlus),
            row(Strategy::Unbloat, 20.0, 0.93, 0.89, Grade::A),
        ];
        let failed = checks("x", 11.0, &rows, 1);
        let expect = [
            "x: none graded B (expected C or worse)",
            "x: unbloat UDP BE induced p99 20.0 ms above 11.0 ms",
            "x: unbloat up goodput 89.0 % below 90 % of theoretical",
            "x: unbloat p99 20.0 ms worse than sqm-piece-of-cake 18.0 ms",
            "x: unbloat down goodput 93.0 % below sqm-piece-of-cake 96.0 %",
            "x: unbloat up goodput 89.0 % below sqm-piece-of-cake 95.0 %",
            "x: CPU-bound in 1 run(s) (calibration, or a second under 10 % idle): numbers are not the link's",
        ];
        assert_eq!(failed, expect);
    }

    #[test]
    fn over_several_runs_the_checks_use_the_medians_and_none_must_never_grade_above_c() {
        let mut u = row(Strategy::Unbloat, 0.0, 0.95, 0.95, Grade::A);
        // One unlucky run of three above the bound: the median is within it.
        u.be_p99_ms = Spread::of([9.0, 40.0, 10.0]);
        let mut none = row(Strategy::None, 400.0, 0.6, 0.99, Grade::D);
        none.grades = vec![Some(Grade::D), Some(Grade::B), Some(Grade::F)];
        let failed = checks("y", 11.0, &[none, u], 0);
        assert_eq!(failed, ["y: none graded B (expected C or worse)"]);
    }

    #[test]
    fn over_several_runs_a_higher_p99_is_worse_only_when_the_rank_test_says_so() {
        let with_p99 = |strategy, values: [f64; 5]| StrategySpread {
            be_p99_ms: Spread::of(values),
            be_steady_p99_ms: None,
            ..row(strategy, 0.0, 0.95, 0.95, Grade::A)
        };
        let cake = with_p99(Strategy::SqmPieceOfCake, [10.39, 18.14, 24.78, 43.2, 8.38]);
        // docsis, five runs each: unbloat's median is higher, but the runs overlap.
        let u = with_p99(Strategy::Unbloat, [19.46, 23.23, 35.49, 15.04, 14.71]);
        assert_eq!(
            checks("d", 50.0, &[cake.clone(), u], 0),
            Vec::<String>::new()
        );
        // Every unbloat run above every piece_of_cake run: p = 1/252.
        let u = with_p99(Strategy::Unbloat, [44.0, 45.0, 46.0, 47.0, 48.0]);
        assert_eq!(
            checks("d", 50.0, &[cake, u], 0),
            ["d: unbloat p99 46.0 ms worse than sqm-piece-of-cake 18.1 ms (rank test over 5 + 5 runs: p = 0.004)"]
        );
    }

    #[test]
    fn bad_requests_fail_before_any_lab_runs() {
        let args = |profiles: &str, strategies: &str, runs: usize| BenchLabArgs {
            profiles: Some(profiles.into()),
            strategies: Some(strategies.into()),
            sqm_scripts: None,
            runs,
            test: "rrul".into(),
            duration: Time::from_secs(30),
            out: "unused".into(),
            resume: false,
            json: false,
            from: None,
        };
        let err = |a: BenchLabArgs| plan(&a).expect_err("must fail").to_string();
        assert!(err(args("adsl", "none", 0)).contains("--runs"));
        assert!(err(args("adsl,nosuch", "none", 1)).contains("nosuch"));
        assert!(err(args("adsl", "none,cake", 1)).contains("unknown strategy \"cake\""));
        let mut short = args("adsl", "none", 1);
        short.duration = Time::from_secs(1);
        assert!(err(short).contains("--duration"));
        let labs = plan(&args("adsl, vdsl2", "none,unbloat", 2)).expect("valid");
        let got: Vec<(&str, &str)> = labs
            .iter()
            .map(|l| (l.profile.as_str(), l.strategies.as_str()))
            .collect();
        assert_eq!(got, [("adsl", "none,unbloat"), ("vdsl2", "none,unbloat")]);
    }

    #[test]
    fn a_finished_benchmark_is_checked_again_from_its_lab_json_files() {
        let dir = std::env::temp_dir().join(format!("unbloat-bench-from-{}", std::process::id()));
        lay_out_adsl_runs(&dir.join("adsl"));
        let loaded = load_benchmark(&dir);
        let empty = load_benchmark(&dir.join("adsl/run-1"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
        let benches = loaded.expect("loads");
        assert_eq!(benches.len(), 1);
        let b = &benches[0];
        assert_eq!((b.profile.name.as_str(), b.runs.len()), ("adsl", 2));
        let u = b
            .spread
            .iter()
            .find(|s| s.strategy == Strategy::Unbloat)
            .expect("unbloat");
        let p99 = u.be_p99_ms.as_ref().expect("p99");
        // The two runs' UDP BE p99: 92.0 and 113.5 ms.
        assert_eq!(p99.n, 2);
        assert!(
            (p99.min - 92.0).abs() < 0.1 && (p99.max - 113.5).abs() < 0.1,
            "{p99:?}"
        );
        assert!(b
            .failed
            .iter()
            .any(|f| f.starts_with("adsl: unbloat UDP BE induced p99")));
        let err = empty
            .expect_err("no lab.json below a run directory")
            .to_string();
        assert!(err.contains("holds no PROFILE/lab.json"), "{err}");
    }

    #[test]
    fn resume_keeps_the_finished_runs_and_starts_no_lab() {
        // Two real adsl runs (none and unbloat) where bench lab --runs 2 writes them: with
        // --resume both are read back, and no lab is started (the binary does not exist).
        let out = std::env::temp_dir().join(format!("unbloat-bench-resume-{}", std::process::id()));
        lay_out_adsl_runs(&out.join("adsl"));
        let args = BenchLabArgs {
            profiles: Some("adsl".into()),
            strategies: Some("none,unbloat".into()),
            sqm_scripts: None,
            runs: 2,
            test: "rrul".into(),
            duration: Time::from_secs(30),
            out: out.clone(),
            resume: true,
            json: false,
            from: None,
        };
        let got = run_benchmark(&args, Path::new("/nonexistent/unbloat"));
        std::fs::remove_dir_all(&out).expect("cleanup");
        let benches = got.expect("both runs kept");
        assert_eq!(benches.len(), 1);
        assert_eq!(benches[0].runs.len(), 2);
    }

    #[test]
    fn a_profile_file_reports_under_its_stem() {
        assert_eq!(dir_name("adsl"), "adsl");
        assert_eq!(dir_name("/tmp/exp/adsl-ack.toml"), "adsl-ack");
    }
}
