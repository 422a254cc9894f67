//! `unbloat-lab run`: build the emulated link, measure it unshaped to check the emulation, then run
//! `unbloat test` through it once per strategy, and write the comparison and a report directory.
//!
//! Where it runs: in this kernel when it has every qdisc the run needs (or when we already are the
//! copy running inside a kernel), otherwise in User-Mode Linux: `unbloat-lab run` is run there
//! with the same arguments plus `--in-kernel` ([`Rerun`]), its progress (stderr) streamed out, and it
//! writes the report directory (reached through UML's hostfs) including `lab.json`, which this
//! side reads back. When neither can work (not root, no UML, no qdiscs) the error says which.
//!
//! Each strategy gets a fresh network (topology built, strategy applied, `unbloat serve` started,
//! test run, everything torn down): no modem FIFO backlog, TCP metrics cache or qdisc state
//! carries over from one strategy to the next.
//!
//! Honest numbers (issue 4 §6): before the strategies, a calibration run with no shaping measures
//! each direction alone. If the emulated bottleneck delivers less than [`CALIBRATION_MIN_SHARE`]
//! of the link's theoretical TCP goodput, the machine (or UML's one CPU) cannot emulate this link
//! and the report says the run is CPU-bound instead of presenting the numbers as the link's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use unbloat_report::model::Results;
use unbloat_shaper::invocation::{Invocation, Test};
use unbloat_system::runner::{is_root, SystemRunner};
use unbloat_testbed::kernel::{
    describe_current, in_guest, own_argv, GuestOptions, Kernel, KernelError,
};
use unbloat_tune::run::MaxTime;
use unbloat_units::Time;

use crate::farend::FarEndKind;
use crate::profile::LinkProfile;
use crate::script;
use crate::strategies::{self, Strategy};
use crate::table::Row;
use crate::topology::{LiveTopology, Node, Topology};

/// The calibration passes when each direction unshaped reaches this share of the theoretical.
pub const CALIBRATION_MIN_SHARE: f64 = 0.90;
pub(crate) use crate::error::io;
pub use crate::error::LabError;
pub use crate::farend::SERVE_PORT;
pub(crate) use crate::lab_report::calibration_line;
pub use crate::lab_report::{Calibration, LabReport, StrategyRun};
/// Length of each calibration direction's load.
const CALIBRATION_LOAD: Time = Time::from_secs(6);

/// `unbloat-lab run` arguments.
#[derive(Debug, Clone)]
pub struct LabArgs {
    /// Link profile: a shipped name (dsl-2002, adsl-slow, adsl-remote, adsl-rural, adsl-far, adsl, adsl2-pppoa, vdsl2, vdsl2-novlan, docsis, fiber) or a TOML file.
    pub profile: String,
    /// Strategies to compare, in order: none, wondershaper, sqm-simple, sqm-piece-of-cake,
    /// unbloat, unbloat-tuned, sqm-scripts:RECIPE, script:PATH (--help says more).
    pub strategies: String,
    /// sqm-scripts' source (the directory with src/start-sqm) for the sqm-scripts:RECIPE
    /// strategies; default: third_party/sqm-scripts of the source tree unbloat was built from.
    pub sqm_scripts: Option<PathBuf>,
    /// The `unbloat test` profile each strategy is measured with.
    pub test: String,
    /// TCP streams per direction, for the tests that take it (tcp_ndown, tcp_nup, download,
    /// upload, bidir): `--test tcp_ndown --streams 1` is one long download.
    pub streams: Option<u32>,
    /// How long the load of each test lasts (a bare number is seconds, as for `unbloat test`).
    pub duration: Time,
    /// The far end the server namespace runs: unbloat (`unbloat serve`), http (Debian's nginx
    /// over TLS with HTTP/2, the responsiveness test's endpoints) or irtt-iperf3 (a stock irtt
    /// server for the probes, a stock iperf3 for the load).
    pub far_end: crate::farend::FarEndKind,
    /// cake-autorate's source (the directory with cake-autorate.sh) for the cake-autorate
    /// strategy; default: third_party/cake-autorate of the source tree unbloat was built from.
    pub cake_autorate: Option<PathBuf>,
    /// The `unbloat-tuned` strategy's `unbloat tune --max-time` (its whole tune, before its test).
    pub tune_max_time: MaxTime,
    /// The report directory (HTML page, table, results and flent files).
    pub out: PathBuf,
    /// Print the comparison as JSON instead of the table.
    pub json: bool,
    /// Internal: this process already runs in a kernel that has every qdisc (the UML re-exec).
    pub in_kernel: bool,
}

impl Default for LabArgs {
    fn default() -> LabArgs {
        LabArgs {
            profile: crate::profile::DEFAULT_PROFILE.into(),
            strategies: "none,unbloat".into(),
            sqm_scripts: None,
            cake_autorate: None,
            test: "rrul".into(),
            streams: None,
            duration: Time::from_secs(30),
            far_end: crate::farend::FarEndKind::Unbloat,
            tune_max_time: MaxTime::Auto,
            out: "unbloat-lab-report".into(),
            json: false,
            in_kernel: false,
        }
    }
}

/// The kernel pieces a run of `strategies` needs: the topology's, plus each strategy's.
pub fn kernel_needs(strategies: &[Strategy]) -> Vec<&'static str> {
    let mut needs = vec!["htb", "netem", "pfifo"];
    for s in strategies {
        for n in s.kernel_needs() {
            if !needs.contains(n) {
                needs.push(n);
            }
        }
    }
    needs
}

/// A validated lab request.
pub(crate) struct Request {
    profile: LinkProfile,
    /// With every `script:` path absolute and checked.
    strategies: Vec<Strategy>,
    /// sqm-scripts' source, absolute, when a strategy runs it.
    sqm_scripts: Option<PathBuf>,
    /// cake-autorate's source, absolute, when the cake-autorate strategy runs.
    cake_autorate: Option<PathBuf>,
}

/// `--duration` of the lab and its benchmark: the rule of `unbloat test` (a bare number is
/// seconds), checked again in full by [`validate`].
pub fn parse_lab_duration(text: &str) -> Result<Time, String> {
    unbloat_units::duration::parse_test_duration(text, Time::from_secs(2)..=Time::from_secs(3600))
        .map_err(|e| e.to_string())
}

/// Checks every option without touching anything: the link profile, the strategies, and the
/// test profile and duration as each strategy's `unbloat test` will check them (a name it does not
/// know used to surface only after the calibration, some 45 s in).
pub(crate) fn validate(args: &LabArgs) -> Result<Request, LabError> {
    let profile = LinkProfile::load(&args.profile)?;
    let strategies = strategies::parse_list(&args.strategies)
        .map_err(LabError::Strategies)?
        .into_iter()
        .map(script::resolve)
        .collect::<Result<Vec<_>, _>>()?;
    let sqm_scripts = script::sqm_source(&strategies, args.sqm_scripts.as_deref())?;
    let variable = profile.traces.down.is_some() || profile.traces.up.is_some();
    if let Some(s) = strategies.iter().find(|s| s.is_variable() && !variable) {
        return Err(LabError::Strategies(format!(
            "{s} follows a variable link: give a profile with down_trace or up_trace (--profile FILE.toml)"
        )));
    }
    let cake_autorate = match strategies.contains(&Strategy::CakeAutorate) {
        false => None,
        true => Some(crate::autorate_lab::check_cake_autorate(
            args.cake_autorate.as_deref(),
        )?),
    };
    if unbloat_measure::profile::Profile::by_name(&args.test).is_err() {
        return Err(LabError::TestName {
            name: args.test.clone(),
            known: unbloat_measure::profile::names(),
        });
    }
    let as_test_takes_it = unbloat_measure::parse_duration(&args.duration.to_string());
    if args.duration < Time::from_secs(2)
        || !as_test_takes_it.is_ok_and(|d| d <= unbloat_measure::client::MAX_LOAD)
    {
        return Err(LabError::Duration(args.duration));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(program) = missing_program(args.far_end, &path) {
        return Err(LabError::FarEndProgram {
            kind: args.far_end.name(),
            program,
        });
    }
    Ok(Request {
        profile,
        strategies,
        sqm_scripts,
        cake_autorate,
    })
}

/// The first program `far_end` needs that is not an executable file in a directory of `path`
/// (a `PATH` value) or of `/usr/sbin` and `/sbin`, where nginx lives and a user's `PATH` may
/// not look.
pub(crate) fn missing_program(far_end: FarEndKind, path: &std::ffi::OsStr) -> Option<&'static str> {
    use std::os::unix::fs::PermissionsExt;
    let found = |program: &str| {
        std::env::split_paths(path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|d| d.join(program))
            .any(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    };
    far_end.programs().iter().copied().find(|p| !found(p))
}

/// Everything [`run_lab`] could refuse as invalid input (exit status 2), checked before anything
/// is built or booted: the options, and that the report directory can be created and written.
pub fn check(args: &LabArgs) -> Result<(), LabError> {
    validate(args)?;
    unbloat_report::files::check_writable(&args.out).map_err(|source| LabError::Out {
        path: args.out.clone(),
        source,
    })
}

/// How the lab runs again inside User-Mode Linux when this kernel lacks a qdisc it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rerun {
    /// This process is `unbloat-lab run`: its own command line, forwarded unchanged
    /// ([`unbloat_testbed::kernel::own_argv`]), then `--in-kernel`. The guest runs in the same
    /// current directory, so relative paths (`--out`, `script:PATH`) mean the same there.
    OwnArgs,
    /// A caller with no command line of its own (a benchmark's many runs, a test): the
    /// `unbloat-lab` binary at this path, with the request said again as flags ([`reexec_argv`]).
    Lab(PathBuf),
}

/// Runs the lab as `args` ask, in this kernel or in UML, and returns the comparison. Progress goes
/// to stderr; nothing is printed on stdout (see [`print_report`]). `unbloat_exe` is the unbloat
/// binary: it is run as `unbloat serve` and `unbloat test` in the namespaces. In UML the lab is
/// run again as `unbloat-lab run ... --in-kernel`, from the `unbloat-lab` beside `unbloat_exe`
/// ([`Rerun::Lab`]); `unbloat-lab run` itself forwards its own arguments ([`run_lab_with`]).
pub fn run_lab(args: &LabArgs, unbloat_exe: &Path) -> Result<LabReport, LabError> {
    let lab = unbloat_exe.with_file_name("unbloat-lab");
    run_lab_with(args, unbloat_exe, &Rerun::Lab(lab))
}

/// [`run_lab`], re-run in UML as `rerun` says.
pub fn run_lab_with(
    args: &LabArgs,
    unbloat_exe: &Path,
    rerun: &Rerun,
) -> Result<LabReport, LabError> {
    let req = validate(args)?;
    let out = std::path::absolute(&args.out).map_err(io("cannot resolve", &args.out))?;
    std::fs::create_dir_all(&out).map_err(io("cannot create the report directory", &out))?;
    if args.in_kernel || in_guest() {
        return run_here(&req, args, &out, unbloat_exe, &describe_current());
    }
    let needs = kernel_needs(&req.strategies);
    let kernel = Kernel::detect(&needs).map_err(|source| LabError::Kernel {
        needs: needs.join(", "),
        source,
    })?;
    match kernel {
        Kernel::Host => {
            eprintln!(
                "unbloat lab: running in the host kernel, which has {}",
                needs.join(", ")
            );
            run_here(&req, args, &out, unbloat_exe, "host")
        }
        uml => run_in_kernel(&uml, args, &req, &out, rerun),
    }
}

/// Prints the report as `unbloat-lab run` does: the table, or JSON with `--json`. A run inside UML
/// (`--in-kernel`) prints nothing: the outer process prints what it reads back.
pub fn print_report(args: &LabArgs, report: &LabReport) -> Result<(), LabError> {
    if args.in_kernel {
        return Ok(());
    }
    if args.json {
        let text = serde_json::to_string_pretty(report).map_err(|e| LabError::Results {
            strategy: "-".into(),
            detail: e.to_string(),
        })?;
        println!("{text}");
    } else {
        print!("{}", report.render_text());
    }
    Ok(())
}

/// The arguments of the re-run inside a kernel for a caller with no command line of its own
/// ([`Rerun::Lab`]): `unbloat-lab run` with the same request, an absolute report directory.
pub fn reexec_argv(args: &LabArgs, out: &Path, lab_exe: &Path) -> Vec<String> {
    let mut argv = vec![
        lab_exe.display().to_string(),
        "run".into(),
        "--profile".into(),
        args.profile.clone(),
        "--strategies".into(),
        args.strategies.clone(),
        "--test".into(),
        args.test.clone(),
        "--duration".into(),
        args.duration.to_string(),
    ];
    if let Some(n) = args.streams {
        argv.extend(["--streams".into(), n.to_string()]);
    }
    argv.extend([
        "--far-end".into(),
        args.far_end.name().into(),
        "--tune-max-time".into(),
        args.tune_max_time.to_string(),
        "--out".into(),
        out.display().to_string(),
        "--in-kernel".into(),
    ]);
    if let Some(dir) = &args.sqm_scripts {
        argv.extend(["--sqm-scripts".into(), dir.display().to_string()]);
    }
    if let Some(dir) = &args.cake_autorate {
        argv.extend(["--cake-autorate".into(), dir.display().to_string()]);
    }
    if args.json {
        argv.push("--json".into());
    }
    argv
}

fn run_in_kernel(
    kernel: &Kernel,
    args: &LabArgs,
    req: &Request,
    out: &Path,
    rerun: &Rerun,
) -> Result<LabReport, LabError> {
    eprintln!(
        "unbloat lab: this kernel lacks some qdiscs; running in {}",
        kernel.describe()
    );
    let per_run = args.duration.secs_f64() + 30.0;
    // A program may take its whole time limit before failing; its own error must come first.
    let programs = req
        .strategies
        .iter()
        .filter(|s| matches!(s, Strategy::Script(_) | Strategy::SqmScripts(_)))
        .count();
    // tune stops at its --max-time; the margin covers its phase in progress and the put-back.
    let tunes = req
        .strategies
        .iter()
        .filter(|s| **s == Strategy::UnbloatTuned)
        .count();
    let timeout = Duration::from_secs_f64(
        120.0
            + per_run * (req.strategies.len() as f64 + 1.0)
            + (programs as u64 * script::TIMEOUT_S) as f64
            + tunes as f64 * (args.tune_max_time.most().as_secs_f64() + 60.0),
    );
    let opts = GuestOptions {
        stream: true,
        timeout,
        ..GuestOptions::default()
    };
    let lab_json = out.join("lab.json");
    // A stale lab.json from an earlier run must not pass for this run's.
    let _ = std::fs::remove_file(&lab_json);
    let argv = match rerun {
        Rerun::OwnArgs => own_argv(&["--in-kernel".into()]).map_err(|source| LabError::Kernel {
            needs: kernel_needs(&req.strategies).join(", "),
            source,
        })?,
        Rerun::Lab(lab) => {
            // The request as validated: scripts' paths and sqm-scripts' source absolute.
            let names: Vec<String> = req.strategies.iter().map(Strategy::name).collect();
            let args = LabArgs {
                strategies: names.join(","),
                sqm_scripts: req.sqm_scripts.clone(),
                cake_autorate: req.cake_autorate.clone(),
                ..args.clone()
            };
            reexec_argv(&args, out, lab)
        }
    };
    let res = kernel.run(&argv, &opts).map_err(|source| match source {
        KernelError::Interrupted { .. } => LabError::Interrupted(source),
        source => LabError::Kernel {
            needs: kernel_needs(&req.strategies).join(", "),
            source,
        },
    })?;
    if res.status != 0 {
        let tail: Vec<&str> = res.stderr.lines().rev().take(5).collect();
        let detail = if tail.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        };
        return Err(LabError::Guest {
            kernel: kernel.describe(),
            status: res.status,
            detail,
        });
    }
    let mut report = LabReport::read(&lab_json, "cannot read the guest's report")?;
    report.kernel = kernel.describe();
    Ok(report)
}

fn run_here(
    req: &Request,
    args: &LabArgs,
    out: &Path,
    exe: &Path,
    kernel: &str,
) -> Result<LabReport, LabError> {
    if !is_root() {
        return Err(LabError::NotRoot);
    }
    let profile = &req.profile;
    eprintln!("unbloat lab: {profile}");
    let calibration = calibrate(profile, out, exe)?;
    eprintln!("unbloat lab: {}", calibration_line(&calibration));
    let mut notes = Vec::new();
    if !calibration.ok {
        notes.push(format!(
            "the emulated link delivered less than {:.0} % of its theoretical goodput with no shaping at all: this machine \
             cannot emulate {} at full rate, so goodput and latency below reflect the CPU, not the strategies",
            CALIBRATION_MIN_SHARE * 100.0,
            profile.name
        ));
    }
    let mut runs = Vec::new();
    for strategy in &req.strategies {
        eprintln!(
            "unbloat lab: strategy {strategy}: {} of {} load",
            args.test, args.duration
        );
        let dir = out.join(strategy.dir_name());
        let test = Test {
            profile: Some(args.test.clone()),
            duration: Some(args.duration),
            streams: args.streams,
            ..Test::default()
        };
        let Ran {
            results,
            busy,
            shown: commands,
            tuned,
            controller,
            trace_started_unix,
        } = run_strategy(
            profile,
            strategy,
            req,
            args.far_end,
            args.tune_max_time,
            &test,
            &dir,
            exe,
        )?;
        let mut row = Row::from_results(strategy.clone(), &results, profile);
        row.cpu_busy = busy.map(|c| c.mean);
        row.cpu_peak_busy = busy.map(|c| c.peak);
        if let Some(c) = busy.filter(|c| c.bound()) {
            notes.push(format!(
                "CPU-bound: during the {strategy} test's load the CPU was busy {:.0} % of its busiest second ({:.0} % on average; \
                 less than {:.0} % idle is seed 001's sign of a CPU limit): its latency and goodput reflect this machine, not only the strategy",
                c.peak * 100.0,
                c.mean * 100.0,
                crate::cpu::IDLE_MIN * 100.0
            ));
        }
        if row.partial {
            notes.push(format!(
                "the {strategy} test ended early: {}",
                results.metadata.partial_reason.clone().unwrap_or_default()
            ));
        }
        let results_file = results_file_in(&dir)?
            .strip_prefix(out)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if let Some(t) = &tuned {
            notes.push(format!("{strategy}: {}", t.summary()));
            if let Some(held) = t.held(&row) {
                notes.push(format!("{strategy}: {held}"));
            }
        }
        if let Some(c) = &controller {
            notes.push(format!("{strategy}: {}", c.summary()));
        }
        let trace_offset_s = trace_started_unix.map(|t| results.metadata.started_at_unix - t);
        runs.push(StrategyRun {
            row,
            commands,
            results_file,
            tuned,
            controller,
            trace_offset_s,
        });
    }
    let report = LabReport {
        profile: profile.clone(),
        test: args.test.clone(),
        duration_s: args.duration.secs_f64(),
        kernel: kernel.to_string(),
        calibration,
        runs,
        out_dir: out.to_path_buf(),
        notes,
    };
    crate::report_dir::write(&report, out)?;
    Ok(report)
}

/// Runs `unbloat test` once through a fresh network with `strategy` set up (with sqm-scripts'
/// source, for the strategies that run it). Returns the results and what the report shows of
/// the strategy's setup (its commands as shell lines; see [`script::set_up`]).
#[allow(clippy::too_many_arguments)]
fn run_strategy(
    profile: &LinkProfile,
    strategy: &Strategy,
    req: &Request,
    far_end: FarEndKind,
    tune_max_time: MaxTime,
    test: &Test,
    dir: &Path,
    exe: &Path,
) -> Result<Ran, LabError> {
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(Topology::new(profile), &runner)?;
    // On any error below, dropping `live` removes the namespaces and what was made in them.
    let mut controller = None;
    let (shown, tuned) = if *strategy == Strategy::UnbloatTuned {
        // Its files go beside the test's, which `measure` clears first: keep them apart.
        let tune_dir = dir.with_file_name(format!("{}-tune", strategy.dir_name()));
        let (shown, row) =
            crate::tune_lab::tune_and_apply(&mut live, profile, exe, &tune_dir, tune_max_time)
                .map_err(|e| LabError::Script {
                    strategy: strategy.name(),
                    how: "unbloat tune".into(),
                    stderr: e.to_string(),
                })?;
        (shown, Some(row))
    } else if strategy.is_variable() {
        let ctl_dir = dir.with_file_name(format!("{}-controller", strategy.dir_name()));
        let (shown, c) = crate::autorate_lab::set_up(
            &mut live,
            strategy,
            profile,
            &ctl_dir,
            exe,
            req.cake_autorate.as_deref(),
        )?;
        controller = c;
        (shown, None)
    } else {
        (
            script::set_up(&live, strategy, profile, req.sqm_scripts.as_deref())?,
            None,
        )
    };
    // A variable link: the modem follows the profile's traces from the test's start, the same
    // way for every strategy.
    let trace_started = std::time::Instant::now();
    let trace_started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let player = match &profile.traces {
        t if t.down.is_some() || t.up.is_some() => Some(
            crate::trace_player::TracePlayer::start(&live, profile, t.clone())
                .map_err(io("cannot start the trace player for", dir))?,
        ),
        _ => None,
    };
    let played = player.is_some();
    let measured = measure(&mut live, &strategy.name(), far_end, test, dir, exe);
    if let Some(p) = player {
        p.stop().map_err(|e| LabError::Script {
            strategy: strategy.name(),
            how: "the trace player".into(),
            stderr: e,
        })?;
    }
    let (results, busy) = measured?;
    // The test's end stopped the controller with the other processes: what did it cost?
    let controller = controller
        .map(|c| c.finish(&dir.join("controller-rates.svg"), Some(trace_started)))
        .transpose()?;
    live.teardown()?;
    Ok(Ran {
        results,
        busy,
        shown,
        tuned,
        controller,
        trace_started_unix: played.then_some(trace_started_unix),
    })
}

/// A strategy's run.
struct Ran {
    results: Results,
    /// How busy the CPU was during the load.
    busy: Option<crate::cpu::CpuUse>,
    /// Its setup, as shown.
    shown: Vec<String>,
    /// What tune found.
    tuned: Option<crate::tune_lab::TuneRow>,
    /// What a rate controller cost.
    controller: Option<crate::autorate_lab::ControllerRun>,
    /// When the trace player started (Unix seconds), on a variable link.
    trace_started_unix: Option<f64>,
}

/// Starts the far end's servers in the server namespace, runs `test` aimed at them from the LAN
/// host with `--out dir`, stops the servers, and reads the results file. Also returns how busy
/// the CPU was during the load ([`crate::cpu`]).
fn measure(
    live: &mut LiveTopology,
    label: &str,
    far_end: FarEndKind,
    test: &Test,
    dir: &Path,
    exe: &Path,
) -> Result<(Results, Option<crate::cpu::CpuUse>), LabError> {
    // An earlier run's files in the same report directory must not pass for this run's.
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io("cannot clear", dir))?;
    }
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    let servers = far_end.start(live, dir, exe).map_err(|e| match e {
        LabError::Test { detail, status, .. } => LabError::Test {
            strategy: label.into(),
            status,
            detail,
        },
        e => e,
    })?;
    let test = servers.aim(Test {
        out: Some(dir.to_path_buf()),
        json: true,
        ..test.clone()
    });
    let cmd = unbloat_system::runner::Cmd::new(exe.display().to_string())
        .args(Invocation::Test(test).argv()?);
    let cpu = crate::cpu::Sampler::start();
    let out = live.run_in(Node::Lan, &cmd)?;
    live.stop_all();
    drop(servers);
    // Exit status 3: the test ran but ended early; its results are saved and marked partial.
    if out.status != 0 && out.status != 3 {
        let detail = out
            .stderr
            .lines()
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(LabError::Test {
            strategy: label.into(),
            status: out.status,
            detail,
        });
    }
    let path = results_file_in(dir)?;
    let text = std::fs::read_to_string(&path).map_err(io("cannot read", &path))?;
    let results = Results::from_json(&text).map_err(|e| LabError::Results {
        strategy: label.into(),
        detail: e.to_string(),
    })?;
    // The load phase, with a second's margin for the test's start-up and its streams' set-up.
    let p = &results.phases;
    let busy = cpu.finish(p.idle_before_s + 1.0, p.idle_before_s + p.load_s);
    Ok((results, busy))
}

/// The one results file (`*.json`) `unbloat test --out DIR` wrote into `dir`.
fn results_file_in(dir: &Path) -> Result<PathBuf, LabError> {
    let entries = std::fs::read_dir(dir).map_err(io("cannot list", dir))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    found.sort();
    found.pop().ok_or_else(|| LabError::Results {
        strategy: dir.display().to_string(),
        detail: "no results file was written".into(),
    })
}

/// Unshaped, one direction at a time: does the emulated bottleneck deliver the link's rate?
fn calibrate(profile: &LinkProfile, out: &Path, exe: &Path) -> Result<Calibration, LabError> {
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(Topology::new(profile), &runner)?;
    let base = out.join("calibration");
    let mut got = [None, None];
    for (i, test) in ["download", "upload"].into_iter().enumerate() {
        // The emulation's capacity, measured the same way whatever far end the strategies use.
        let (r, _busy) = measure(
            &mut live,
            "calibration",
            FarEndKind::Unbloat,
            &Test {
                profile: Some(test.to_string()),
                duration: Some(CALIBRATION_LOAD),
                idle: Some(Time::from_secs(3)),
                ..Test::default()
            },
            &base.join(test),
            exe,
        )?;
        let s = unbloat_report::summary::Summary::from_results(&r);
        got[i] = if i == 0 {
            s.download.goodput_bps
        } else {
            s.upload.goodput_bps
        };
    }
    live.teardown()?;
    Ok(calibration_from(profile, got[0], got[1]))
}

/// The calibration verdict for measured unshaped goodputs.
pub fn calibration_from(
    profile: &LinkProfile,
    down_bps: Option<f64>,
    up_bps: Option<f64>,
) -> Calibration {
    let share = |bps: Option<f64>, line| {
        bps.map(|b| b / profile.theoretical_goodput(line).bits_per_sec() as f64)
    };
    let (down_share, up_share) = (share(down_bps, profile.down), share(up_bps, profile.up));
    let ok = [down_share, up_share]
        .iter()
        .all(|s| s.is_some_and(|s| s >= CALIBRATION_MIN_SHARE));
    Calibration {
        down_bps,
        up_bps,
        down_share,
        up_share,
        ok,
    }
}

#[cfg(test)]
#[path = "lab_tests.rs"]
mod tests;
