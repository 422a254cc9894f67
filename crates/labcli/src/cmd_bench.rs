//! `unbloat-lab bench ...`: benchmarks of unbloat itself, run in a kernel that has every qdisc.
//!
//! `bench start` times whole processes, as a user or a hotplug script runs them, on a veth in a
//! private network namespace: `unbloat start` of an egress + ingress setup (cake, and three-tier
//! HTB + fq_codel), the same start again (already in place), `unbloat set-rate`, `unbloat status`
//! and `unbloat stop`; and beside them, in the same run, the real sqm-scripts' `start-sqm` for the
//! same link (piece_of_cake.qos, simple.qos) when its source is found (`--sqm-scripts DIR`), and
//! the same tc commands run one process at a time. `set-rate` is also timed as the library call
//! autorate makes (no process), over many changes. Medians of `--runs`.
use crate::cmd_kernel::{private_netns, rerun_in_real_kernel, ALL_QDISCS};
use crate::Failure;
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use std::time::{Duration, Instant};
use unbloat_shaper::invocation::{Invocation, SetRate, Start, Status, Stop};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::Spec;
use unbloat_system::apply::{Request, Shaper};
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_system::state::StateDir;
use unbloat_testbed::commands::script_commands_one_by_one;
use unbloat_units::{IfName, Rate};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time `start` (egress + ingress) for cake and three-tier HTB + fq_codel, and `status`.
    Start(StartBench),
    /// The accuracy benchmarks of `unbloat test` against iperf3 and ping.
    Measure(crate::cmd_run::MeasureBenchCmd),
    /// Every link profile x every strategy in the lab.
    Lab(crate::cmd_run::LabBenchCmd),
    /// The stock far ends against their own clients on one shaped link: goodput against
    /// iperf3's client, UDP round trips against irtt's, the web server test's RPM and CPU.
    FarEnds(FarEndsBench),
    /// Per-host fairness behind NAT (one stream against eight, IPv4 and IPv6, medians) for
    /// unbloat's default, sqm-scripts' default and per-flow isolation; and cake's NAT lookup cost.
    Fair(crate::cmd_hosts::FairBenchArgs),
    /// `unbloat tune` on every lab profile: framing and rates found against the truth, and with
    /// --exhaustive against the best rate a grid of shaped runs finds for the same bound.
    Tune(crate::cmd_bench_tune::TuneBenchArgs),
    /// The daemon as a Prometheus target: memory over 10,000 scrapes and CPU at one scrape a
    /// second, beside node_exporter's qdisc collector when it is installed.
    Daemon(crate::cmd_bench_daemon::DaemonBench),
    /// Where `unbloat test` puts the queue (this machine, the first hop, beyond the gateway)
    /// against where the emulation's qdiscs hold it, in every locate scenario; and what probing
    /// the gateway costs the test.
    Locate(LocateBench),
    /// A household behind the router: a game, a video call and the web on one host beside bulk
    /// on the other, on a fast and a slow link, with and without classification and beside
    /// sqm-scripts' layer_cake with upload marks.
    Household(crate::cmd_hosts::HouseholdBenchArgs),
    /// `unbloat autorate` against the real cake-autorate and fixed rates on variable links (a
    /// step, a ramp, the LTE traces of third_party/traces): steady-state latency, goodput, CPU.
    Autorate(crate::flags::BenchAutorateFlags),
    /// A laptop moved between two networks ([network.NAME] tables) under load: the time from
    /// the route change to the new rates in the kernel, and the round trips before, during and
    /// after each switch.
    Networks(crate::cmd_bench_networks::NetworksBench),
    /// Hostile clients (1,000 slow connections, a connect flood; from one address and from one
    /// IPv6 /56) against `unbloat serve`, the daemon's page and metrics, while a client from
    /// another address is served or not: its waits, what was refused, the server's peak memory
    /// and threads.
    Hostile(crate::cmd_bench_hostile::HostileBench),
    /// The daemon through thousands of re-creations of the interface it shapes, config reloads
    /// and scrapes: its memory, files and threads from start to end, and each shaping gap.
    Soak(crate::cmd_bench_soak::SoakBench),
}

#[derive(Debug, Args)]
pub struct FarEndsBench {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StartBench {
    /// Runs per measurement (the median is reported).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Rate changes made under the UDP stream (set-rate's no-loss check).
    #[arg(long, default_value_t = 1000)]
    pub changes: usize,
    /// sqm-scripts' source (the directory with src/start-sqm), to time the real `start-sqm`
    /// beside unbloat; default: third_party/sqm-scripts of the source tree unbloat was built from.
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<std::path::PathBuf>,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

pub fn bench(cmd: &BenchCommand) -> Result<(), Failure> {
    match cmd {
        BenchCommand::Start(a) => start_bench(a),
        BenchCommand::Measure(a) => crate::cmd_run::measure_bench(a),
        BenchCommand::Lab(a) => crate::cmd_run::lab_bench(a),
        BenchCommand::FarEnds(a) => far_ends_bench(a),
        BenchCommand::Fair(a) => crate::cmd_hosts::bench_fair(a),
        BenchCommand::Tune(a) => crate::cmd_bench_tune::bench_tune(a),
        BenchCommand::Daemon(a) => crate::cmd_bench_daemon::daemon_bench(a),
        BenchCommand::Autorate(a) => autorate_bench(a),
        BenchCommand::Networks(a) => crate::cmd_bench_networks::networks_bench(a),
        BenchCommand::Locate(a) => locate_bench(a),
        BenchCommand::Household(a) => crate::cmd_hosts::bench_household(a),
        BenchCommand::Hostile(a) => crate::cmd_bench_hostile::hostile_bench(a),
        BenchCommand::Soak(a) => crate::cmd_bench_soak::soak_bench(a),
    }
}

#[derive(Debug, Args)]
pub struct LocateBench {
    /// Runs of each scenario: the table counts the right verdicts and gives medians.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub runs: usize,
    /// Scenarios, comma-separated (default: all): modem-bloat, lan-bloat, both-hops,
    /// lan-down-modem-up, silent-gateway, slow-gateway.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub scenarios: Vec<String>,
    /// Load per test (a bare number is seconds): whole seconds, 2s to 60m.
    #[arg(long, value_name = "D", default_value = "10s", value_parser = crate::durations::locate_load)]
    pub duration: unbloat_units::Time,
    /// Where each test's results and the benchmark's locate.json and table.txt go.
    #[arg(long, value_name = "DIR", default_value = "unbloat-bench-locate")]
    pub out: std::path::PathBuf,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

/// `unbloat-lab bench locate`: in User-Mode Linux when this kernel lacks netem.
fn locate_bench(args: &LocateBench) -> Result<(), Failure> {
    use unbloat_lab::bench_locate::{self, Scenario, SCENARIOS};
    let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
    let mut chosen = vec![];
    for name in &args.scenarios {
        chosen.push(Scenario::by_name(name).ok_or_else(|| {
            anyhow!(
                "--scenarios {name}: no such scenario; known: {}",
                known.join(", ")
            )
        })?);
    }
    let out = std::path::absolute(&args.out)?;
    if !args.inside {
        let hours = Duration::from_secs(3 * 3600);
        if rerun_in_real_kernel(&["netem", "htb", "ingress"], &[], hours)? {
            return Ok(());
        }
    }
    let exe = crate::product()?;
    let secs = u64::from(crate::durations::secs(args.duration));
    let bench = bench_locate::run(&exe, &out, &chosen, args.runs, secs).map_err(|e| anyhow!(e))?;
    let json = serde_json::to_string_pretty(&bench)?;
    crate::report::write_report(
        &out,
        "locate.json",
        json,
        bench_locate::render(&bench),
        args.json,
    )
}

/// `unbloat-lab bench autorate`: one lab per trace, test and run (each in User-Mode Linux when the
/// kernel lacks the qdiscs); the table, and the goals it did not meet.
fn autorate_bench(flags: &crate::flags::BenchAutorateFlags) -> Result<(), Failure> {
    let args = &unbloat_lab::bench_autorate::BenchAutorateArgs::from(flags.clone());
    let exe = crate::product()?;
    let rows = unbloat_lab::bench_autorate::run(args, &exe).map_err(|e| anyhow::anyhow!(e))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", unbloat_lab::bench_autorate::render(&rows));
    }
    Ok(())
}

/// `unbloat-lab bench far-ends`: needs root (namespaces) and the host's HTB, no other qdisc.
fn far_ends_bench(args: &FarEndsBench) -> Result<(), Failure> {
    eprintln!("unbloat bench far-ends: about 2 minutes (goodput, irtt, RPM, CPU)");
    let exe = crate::product()?;
    let report = unbloat_lab::bench_far::run(&exe).map_err(|e| anyhow::anyhow!(e))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", unbloat_lab::bench_far::render(&report));
    }
    Ok(())
}

fn start_bench(args: &StartBench) -> Result<(), Failure> {
    // The copy inside a kernel is told the sqm-scripts found here when the user named none, so
    // that it neither looks again nor warns twice.
    let mut extra = vec![];
    if let (None, Some(dir)) = (&args.sqm_scripts, find_sqm_scripts(args)) {
        extra.extend([
            "--sqm-scripts".into(),
            std::path::absolute(dir)?.display().to_string(),
        ]);
    }
    if !args.inside && rerun_in_real_kernel(ALL_QDISCS, &extra, Duration::from_secs(600))? {
        return Ok(());
    }
    private_netns()?;
    let runner = SystemRunner::from_env();
    let run = |argv: &[&str]| -> anyhow::Result<()> {
        let out = runner.run(&Cmd::ip(argv.iter().copied()))?;
        if !out.success() {
            bail!("ip {}: {}", argv.join(" "), out.stderr.trim());
        }
        Ok(())
    };
    run(&[
        "link", "add", "benchwan", "type", "veth", "peer", "name", "benchisp",
    ])?;
    run(&["link", "set", "benchwan", "up"])?;
    run(&["link", "set", "benchisp", "up"])?;
    // The run directory where production has it: a tmpfs (/run), not the disk /tmp may be (in
    // User-Mode Linux /tmp is the host's disk through hostfs, and each fsync goes there).
    let run_base = if std::path::Path::new("/run").is_dir() {
        std::path::PathBuf::from("/run")
    } else {
        std::env::temp_dir()
    };
    // Fresh and private: sqm-scripts is copied here and run as root, and unbloat keeps its
    // records here (a run directory must be 0700).
    let dir = unbloat_safefs::private_dir(&run_base, "unbloat-bench")?;
    let sqm = find_sqm_scripts(args)
        .map(|d| SqmScripts::install(&d, &dir))
        .transpose()?;
    let exe = crate::product()?;
    // One `unbloat` process, timed whole, in this namespace and with its own run directory.
    let unbloat = |run: Invocation| -> anyhow::Result<Duration> {
        let argv = run.argv()?;
        let t = Instant::now();
        let out = std::process::Command::new(&exe)
            .args(&argv)
            .env("UNBLOAT_RUN_DIR", &dir)
            .stdin(std::process::Stdio::null())
            .output()?;
        let took = t.elapsed();
        if !out.status.success() {
            bail!(
                "unbloat {}: {}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(took)
    };
    let shaper = Shaper::new(&runner, StateDir::new(&dir));

    let mut rows = vec![];
    let wan: IfName = "benchwan".parse()?;
    for (name, extra, sqm_recipe) in [
        (
            "cake",
            ShapeOptions::default(),
            ("piece_of_cake.qos", "cake"),
        ),
        ("fq_codel 3 tiers", fq_codel3(), ("simple.qos", "fq_codel")),
    ] {
        let opts = ShapeOptions {
            down: Some("78mbit".parse()?),
            up: Some("19950kbit".parse()?),
            link: Some("vdsl2".parse().map_err(|e: String| anyhow!(e))?),
            ..extra
        };
        let plan = Plan::build(&Spec::new(wan.clone(), &opts)?);
        let start = Invocation::from(Start {
            iface: Some(wan.clone()),
            options: opts.clone(),
            ..Start::default()
        });
        let mut row = Row::new(name);
        for run in 0..args.runs {
            row.start.push(unbloat(start.clone())?);
            row.again.push(unbloat(start.clone())?);
            let (down, up) = if run % 2 == 0 {
                (Rate::from_mbit(70), Rate::from_mbit(18))
            } else {
                (Rate::from_mbit(78), Rate::from_kbit(19_950))
            };
            row.set_rate.push(unbloat(
                SetRate {
                    iface: wan.clone(),
                    down: Some(down),
                    up: Some(up),
                    i_mean_it: false,
                    json: false,
                }
                .into(),
            )?);
            let iface = Some(wan.clone());
            row.status.push(unbloat(
                Status {
                    iface: iface.clone(),
                    json: false,
                }
                .into(),
            )?);
            row.stop.push(unbloat(Stop { iface, json: false }.into())?);
            // The sqm-scripts way by hand: each command its own process, nothing checked.
            let t = Instant::now();
            for cmd in script_commands_one_by_one(&plan.script()) {
                runner.run(&cmd)?;
            }
            row.sequential.push(t.elapsed());
            for cmd in script_commands_one_by_one(&plan.teardown()) {
                runner.run(&cmd)?;
            }
            if let Some(sqm) = &sqm {
                row.sqm
                    .push(sqm.start("benchwan", sqm_recipe.0, sqm_recipe.1)?);
                sqm.stop("benchwan", sqm_recipe.0, sqm_recipe.1)?;
            }
        }
        // set-rate as autorate calls it: the library, no process.
        shaper.start(&[Request {
            plan: plan.clone(),
            options: opts.clone(),
            fairness: None,
        }])?;
        let changes = 200;
        let t = Instant::now();
        for i in 0..changes {
            let kbit = 60_000 + (i % 2) * 1000 + i;
            let o = ShapeOptions {
                down: Some(unbloat_units::Rate::from_kbit(kbit)),
                ..opts.clone()
            };
            let p = Plan::build(&Spec::new("benchwan".parse()?, &o)?);
            shaper.set_rate(&Request {
                plan: p,
                options: o,
                fairness: None,
            })?;
        }
        row.set_rate_library = Some(t.elapsed() / changes as u32);
        shaper.stop(&["benchwan".parse()?])?;
        rows.push(row);
    }
    let loss = udp_through_rate_changes(&shaper, &runner, args.changes)?;
    let _ = std::fs::remove_dir_all(&dir);
    print_rows(&rows, args, sqm.is_some())?;
    if args.json {
        println!("{}", serde_json::to_string(&loss)?);
    } else {
        for (what, r) in [
            ("without changes", &loss.baseline),
            ("with set-rate", &loss.changing),
        ] {
            println!(
                "UDP {} Mbit/s through cake's upload (10-12 Mbit/s), {what}: {} of {} packets lost end to end, {} dropped by cake{}",
                loss.stream_mbit,
                r.lost,
                r.packets,
                r.qdisc_drops,
                if r.changes > 0 { format!(", {} changes, mean {:.2} ms each", r.changes, r.mean_change_ms) } else { String::new() }
            );
        }
    }
    // A change in place drops nothing in the qdisc; end-to-end loss in the same amount as the
    // run without changes is the machine's (one UML CPU for sender, receiver and changes).
    if loss.changing.qdisc_drops > 0 {
        return Err(anyhow!(
            "cake dropped {} packets of a stream below its rate while set-rate changed it",
            loss.changing.qdisc_drops
        )
        .into());
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct UdpLoss {
    stream_mbit: u32,
    baseline: StreamRun,
    changing: StreamRun,
}

#[derive(serde::Serialize)]
struct StreamRun {
    changes: usize,
    packets: u64,
    lost: u64,
    /// Packets cake itself dropped during the run (its `drops` counter).
    qdisc_drops: u64,
    mean_change_ms: f64,
}

/// A constant UDP stream (iperf3, below the shaper's rate) from this namespace through cake on
/// `benchwan` to a peer namespace, once without rate changes and once while `Shaper::set_rate`
/// changes the upload rate `changes` times: a change in place must drop nothing (a re-created
/// qdisc drops its queue).
fn udp_through_rate_changes(
    shaper: &Shaper,
    runner: &SystemRunner,
    changes: usize,
) -> anyhow::Result<UdpLoss> {
    let peer = format!("unbloat-bench-peer-{}", std::process::id());
    let sh = |argv: &[&str]| -> anyhow::Result<String> {
        let out = runner.run(&Cmd::new(argv[0]).args(argv[1..].iter().copied()))?;
        if !out.success() {
            bail!("{}: {}", argv.join(" "), out.stderr.trim());
        }
        Ok(out.stdout)
    };
    sh(&["ip", "netns", "add", &peer])?;
    let result = (|| -> anyhow::Result<UdpLoss> {
        let in_peer = |argv: &[&str]| -> anyhow::Result<String> {
            let mut all = vec!["ip", "netns", "exec", peer.as_str()];
            all.extend_from_slice(argv);
            sh(&all)
        };
        sh(&["ip", "link", "set", "benchisp", "netns", &peer])?;
        in_peer(&["ip", "addr", "add", "10.201.0.2/30", "dev", "benchisp"])?;
        in_peer(&["ip", "link", "set", "benchisp", "up"])?;
        in_peer(&["ip", "link", "set", "lo", "up"])?;
        sh(&["ip", "addr", "add", "10.201.0.1/30", "dev", "benchwan"])?;
        let base = ShapeOptions {
            up: Some("12mbit".parse()?),
            ..ShapeOptions::default()
        };
        let plan_at = |kbit: u64| -> anyhow::Result<Request> {
            let o = ShapeOptions {
                up: Some(unbloat_units::Rate::from_kbit(kbit)),
                ..base.clone()
            };
            Ok(Request {
                plan: Plan::build(&Spec::new("benchwan".parse()?, &o)?),
                options: o,
                fairness: None,
            })
        };
        let drops = || -> anyhow::Result<u64> {
            let v: serde_json::Value = serde_json::from_str(&sh(&[
                "tc", "-s", "-j", "qdisc", "show", "dev", "benchwan", "root",
            ])?)?;
            Ok(v[0]["drops"].as_u64().unwrap_or(0))
        };
        let stream_mbit = 8;
        let run = |n: usize| -> anyhow::Result<StreamRun> {
            shaper.start(&[plan_at(12_000)?])?;
            let before = drops()?;
            let mut server = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &peer,
                    "iperf3",
                    "-s",
                    "-1",
                    "-B",
                    "10.201.0.2",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            std::thread::sleep(Duration::from_millis(500));
            let secs = (changes as u64 * 12 / 1000).max(3) + 2;
            let client = std::process::Command::new("iperf3")
                .args([
                    "-c",
                    "10.201.0.2",
                    "-u",
                    "-b",
                    &format!("{stream_mbit}M"),
                    "-l",
                    "1200",
                    "-J",
                    "-t",
                    &secs.to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            std::thread::sleep(Duration::from_millis(1000));
            let mut spent = Duration::ZERO;
            for i in 0..n {
                let req = plan_at(if i % 2 == 0 { 10_000 } else { 12_000 })?;
                let t = Instant::now();
                shaper.set_rate(&req)?;
                spent += t.elapsed();
                std::thread::sleep(Duration::from_millis(10));
            }
            let out = client.wait_with_output()?;
            let _ = server.kill();
            let _ = server.wait();
            let qdisc_drops = drops()? - before;
            shaper.stop(&["benchwan".parse()?])?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| anyhow!("iperf3 -J printed no JSON: {e}"))?;
            let sum = &v["end"]["sum"];
            let (Some(packets), Some(lost)) =
                (sum["packets"].as_u64(), sum["lost_packets"].as_u64())
            else {
                bail!("iperf3's report has no packet counts: {}", v["error"]);
            };
            Ok(StreamRun {
                changes: n,
                packets,
                lost,
                qdisc_drops,
                mean_change_ms: ms(spent) / n.max(1) as f64,
            })
        };
        Ok(UdpLoss {
            stream_mbit,
            baseline: run(0)?,
            changing: run(changes)?,
        })
    })();
    let _ = sh(&["ip", "netns", "del", &peer]);
    result
}

/// Where sqm-scripts' source is: the flag, or (outside the kernel it reruns in, where the flag
/// carries what was found) the vendored copy ([`unbloat_testbed::sqm::locate`]); when that cannot be
/// used, says why: sqm-scripts is left out.
fn find_sqm_scripts(args: &StartBench) -> Option<std::path::PathBuf> {
    if args.sqm_scripts.is_some() || args.inside {
        return args.sqm_scripts.clone();
    }
    unbloat_testbed::sqm::locate(None)
        .inspect_err(|why| {
            eprintln!("unbloat: sqm-scripts is left out ({why}); give --sqm-scripts DIR")
        })
        .ok()
}

/// The real sqm-scripts, run as its ORIGIN.txt says: its src/ copied, start-sqm and stop-sqm
/// pointed at a sqm.conf of ours, a fresh state directory for every start.
struct SqmScripts {
    lib: std::path::PathBuf,
}

impl SqmScripts {
    fn install(source: &std::path::Path, under: &std::path::Path) -> anyhow::Result<SqmScripts> {
        let lib = under.join("sqm-lib");
        unbloat_system::sqm::install(source, &lib)?;
        Ok(SqmScripts { lib })
    }

    fn run(&self, script: &str, env: &[(&str, &str)]) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let out = std::process::Command::new("sh")
            .arg(self.lib.join(script))
            .envs(env.iter().copied())
            .current_dir(&self.lib)
            .stdin(std::process::Stdio::null())
            .output()?;
        let took = t.elapsed();
        if !out.status.success() {
            bail!(
                "sqm-scripts {script}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(took)
    }

    /// The variables sqm-scripts reads for one interface (its iface.conf), same rates as unbloat's.
    fn env<'a>(iface: &'a str, recipe: &'a str, qdisc: &'a str) -> [(&'static str, &'a str); 7] {
        [
            ("IFACE", iface),
            ("SCRIPT", recipe),
            ("QDISC", qdisc),
            ("UPLINK", "19950"),
            ("DOWNLINK", "78000"),
            ("LINKLAYER", "ethernet"),
            ("OVERHEAD", "34"),
        ]
    }

    fn start(&self, iface: &str, recipe: &str, qdisc: &str) -> anyhow::Result<Duration> {
        // A stale state directory makes start-sqm do nothing and exit 0 (ORIGIN.txt).
        let _ = std::fs::remove_dir_all(self.lib.join("state"));
        std::fs::create_dir_all(self.lib.join("state"))?;
        self.run("start-sqm", &SqmScripts::env(iface, recipe, qdisc))
    }

    fn stop(&self, iface: &str, recipe: &str, qdisc: &str) -> anyhow::Result<()> {
        self.run("stop-sqm", &SqmScripts::env(iface, recipe, qdisc))
            .map(|_| ())
    }
}

fn fq_codel3() -> ShapeOptions {
    ShapeOptions {
        qdisc: Some(unbloat_shaper::options::Qdisc::FqCodel),
        tiers: Some(3),
        ..ShapeOptions::default()
    }
}

struct Row {
    setup: &'static str,
    start: Vec<Duration>,
    /// A start that finds its setup already in place.
    again: Vec<Duration>,
    set_rate: Vec<Duration>,
    status: Vec<Duration>,
    stop: Vec<Duration>,
    sequential: Vec<Duration>,
    sqm: Vec<Duration>,
    /// Mean of many library calls.
    set_rate_library: Option<Duration>,
}

impl Row {
    fn new(setup: &'static str) -> Row {
        Row {
            setup,
            start: vec![],
            again: vec![],
            set_rate: vec![],
            status: vec![],
            stop: vec![],
            sequential: vec![],
            sqm: vec![],
            set_rate_library: None,
        }
    }
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_rows(rows: &[Row], args: &StartBench, with_sqm: bool) -> anyhow::Result<()> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let ratio = |r: &Row| with_sqm.then(|| ms(median(&r.sqm)) / ms(median(&r.start)));
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "setup": r.setup,
                    "start_ms": ms(median(&r.start)),
                    "again_ms": ms(median(&r.again)),
                    "set_rate_ms": ms(median(&r.set_rate)),
                    "set_rate_library_ms": r.set_rate_library.map(ms),
                    "status_ms": ms(median(&r.status)),
                    "stop_ms": ms(median(&r.stop)),
                    "sqm_style_sequential_ms": ms(median(&r.sequential)),
                    "sqm_scripts_start_ms": with_sqm.then(|| ms(median(&r.sqm))),
                    "sqm_scripts_over_unbloat": ratio(r),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"kernel": kernel, "runs": args.runs, "rows": v})
            )?
        );
        return Ok(());
    }
    println!("unbloat bench start: egress 19950kbit + ingress 78mbit, vdsl2, on a veth; kernel {kernel}; whole processes, median of {}", args.runs);
    println!(
        "{:<17} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>11} {:>12} {:>7}",
        "setup",
        "start",
        "again",
        "set-rate",
        "(library)",
        "status",
        "stop",
        "one by one",
        "sqm-scripts",
        "sqm/us"
    );
    for r in rows {
        println!(
            "{:<17} {:>6.1} ms {:>6.1} ms {:>6.1} ms {:>7.2} ms {:>6.1} ms {:>6.1} ms {:>8.1} ms {:>9} {:>7}",
            r.setup,
            ms(median(&r.start)),
            ms(median(&r.again)),
            ms(median(&r.set_rate)),
            r.set_rate_library.map_or(f64::NAN, ms),
            ms(median(&r.status)),
            ms(median(&r.stop)),
            ms(median(&r.sequential)),
            if with_sqm { format!("{:.1} ms", ms(median(&r.sqm))) } else { "-".into() },
            ratio(r).map_or("-".into(), |x| format!("{x:.1}x")),
        );
    }
    println!("start = `unbloat start` as a process: snapshot, journal, apply (one tc -batch), read back, verify, record;");
    println!("again = the same start once more (read back and verify only); set-rate alternates 70/18 and 78/19.95 Mbit/s;");
    println!(
        "(library) = Shaper::set_rate in-process, the call autorate makes, mean of 200 changes;"
    );
    println!("one by one = the same tc/ip commands, one process each, nothing checked;");
    println!("sqm-scripts = the real start-sqm (piece_of_cake.qos / simple.qos, same rates), fresh state each time.");
    if !with_sqm {
        println!("sqm-scripts' source was not found: --sqm-scripts DIR to compare with it.");
    }
    Ok(())
}
