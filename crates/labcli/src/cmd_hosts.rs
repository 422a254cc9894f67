//! `unbloat-lab hosts` and `unbloat-lab bench fair`: two LAN hosts behind a masquerading router
//! (unbloat_lab::hosts), one stream against eight each way. The lab shows each setup once with
//! plots; the benchmark repeats the fairness runs and reports medians, and measures what cake's
//! NAT lookup costs. Both boot User-Mode Linux when this kernel lacks cake, and re-run there.

use crate::cmd_kernel::rerun_in_real_kernel;
use crate::durations::{self, secs};
use crate::Failure;
use anyhow::Context;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;
use unbloat_lab::hosts::{self, Family, NatCost, Outcome, Scenario, Setup, Tools};
use unbloat_system::sqm::workdir::WorkDir;
use unbloat_units::{Rate, Time};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Families {
    Ipv4,
    Ipv6,
    Both,
}

impl Families {
    fn list(self) -> Vec<Family> {
        match self {
            Families::Ipv4 => vec![Family::Ipv4],
            Families::Ipv6 => vec![Family::Ipv6],
            Families::Both => vec![Family::Ipv4, Family::Ipv6],
        }
    }
}

/// The two-host network's link, for `hosts` and `bench fair`.
#[derive(Debug, Clone, Copy, Args)]
pub struct LinkRates {
    /// The link's download rate (the modem's bottleneck; shapers run at 95 % of it).
    #[arg(long, value_name = "RATE", default_value = "20mbit")]
    pub down: Rate,
    /// The link's upload rate.
    #[arg(long, value_name = "RATE", default_value = "5mbit")]
    pub up: Rate,
}

#[derive(Debug, Args)]
pub struct LabHostsArgs {
    /// Report directory (index.html, hosts.json, one SVG per run).
    #[arg(long, default_value = "report-hosts")]
    pub out: PathBuf,
    /// Load per run (20s, 1m; a bare number is seconds): whole seconds, 6s to 5m.
    #[arg(long, value_name = "D", default_value = "20s", value_parser = durations::hosts_load)]
    pub duration: Time,
    #[command(flatten)]
    pub link: LinkRates,
    /// IPv4 (masqueraded), IPv6 (routed) or both.
    #[arg(long, value_enum, default_value_t = Families::Both)]
    pub family: Families,
    /// sqm-scripts' source (default: third_party/sqm-scripts of the source tree unbloat was
    /// built from).
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
    /// Internal: already in a kernel with cake.
    #[arg(long, hide = true)]
    pub inside: bool,
}

#[derive(Debug, Args)]
pub struct FairBenchArgs {
    /// Runs per setup and family; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Load per run (15s, 1m; a bare number is seconds): whole seconds, 6s to 5m.
    #[arg(long, value_name = "D", default_value = "15s", value_parser = durations::hosts_load)]
    pub duration: Time,
    #[command(flatten)]
    pub link: LinkRates,
    /// Only these setups (comma-separated): sqm-default, unbloat-flows, unbloat-default,
    /// unbloat-ack-filter, unbloat-rtt100. Default: all of them.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_setup)]
    pub setups: Vec<Setup>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// sqm-scripts' source (default: third_party/sqm-scripts of the source tree unbloat was
    /// built from).
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
    /// Internal: already in a kernel with cake.
    #[arg(long, hide = true)]
    pub inside: bool,
}

/// What hosts and bench fair and tune need of the kernel.
pub(crate) const NEEDS: &[&str] = &["cake", "htb", "netem", "ingress"];

/// sqm-scripts' source: `--sqm-scripts`, absolute, or (outside the kernel it reruns in, where
/// the flag carries what was found) the vendored copy ([`unbloat_testbed::sqm::locate`]); when that
/// cannot be used, says why: its row is left out.
fn sqm_source(given: &Option<PathBuf>, inside: bool) -> Result<Option<PathBuf>, Failure> {
    if let Some(d) = given {
        return Ok(Some(std::path::absolute(d)?));
    }
    if inside {
        return Ok(None);
    }
    Ok(unbloat_testbed::sqm::locate(None)
        .inspect_err(|why| {
            eprintln!("unbloat: sqm-scripts' row is left out ({why}); give --sqm-scripts DIR")
        })
        .ok())
}

/// What the copy inside a kernel is told beside the forwarded arguments: the sqm-scripts found
/// here when the user named none (`--sqm-scripts DIR`), so that it neither looks again nor warns
/// twice; with none found, the copy (`--inside`) leaves the row out without looking.
fn found_sqm(given: Option<&PathBuf>, found: &Option<PathBuf>) -> Vec<String> {
    match (given, found) {
        (None, Some(dir)) => vec!["--sqm-scripts".into(), dir.display().to_string()],
        _ => vec![],
    }
}

/// The programs and a fresh work directory; the directory goes with the returned guard, on
/// success, error or panic alike.
fn tools(sqm_scripts: Option<PathBuf>) -> Result<(Tools, WorkDir), Failure> {
    let exe = crate::product()?;
    // A fresh name per run: a reused one (the pid repeats in every User-Mode Linux boot) once
    // held a killed run's sqm-scripts state ("SQM already activated").
    let work = WorkDir::new("hosts")?;
    let tools = Tools {
        unbloat: exe,
        sqm_scripts,
        work: work.0.clone(),
    };
    Ok((tools, work))
}

/// A setup's name on the command line: its serde name (`unbloat-default`).
fn setup_key(s: Setup) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn parse_setup(text: &str) -> Result<Setup, String> {
    Setup::ALL
        .into_iter()
        .find(|s| *s != Setup::None && setup_key(*s) == text)
        .ok_or_else(|| {
            let known: Vec<String> = Setup::ALL[1..].iter().map(|s| setup_key(*s)).collect();
            format!("unknown setup; known: {}", known.join(", "))
        })
}

fn setups(tools: &Tools) -> Vec<Setup> {
    Setup::ALL
        .into_iter()
        .filter(|s| *s != Setup::SqmDefault || tools.sqm_scripts.is_some())
        .collect()
}

fn row(o: &Outcome) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    format!(
        "{:<5} {:<26} {:>5.2} {:>5.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>6} {:>7} {:>6}",
        o.scenario.family.name(),
        o.setup.name(),
        o.share_down,
        o.share_up,
        o.a.down_bps / 1e6,
        o.b.down_bps / 1e6,
        o.a.up_bps / 1e6,
        o.b.up_bps / 1e6,
        ms(o.ping_idle_ms),
        ms(o.ping_loaded_ms),
        ms(o.ping_loaded_p90_ms),
    )
}

const HEADER: &str = "family setup                     a/down  a/up  a down  b down    a up    b up   idle  loaded    p90\n                                  share share  Mbit/s  Mbit/s  Mbit/s  Mbit/s  ping ms ping ms     ms";

/// `unbloat-lab hosts`.
pub fn lab_hosts(args: &LabHostsArgs) -> Result<(), Failure> {
    let sqm = sqm_source(&args.sqm_scripts, args.inside)?;
    if !args.inside {
        unbloat_safefs::ensure_dir(&args.out)
            .with_context(|| format!("cannot create {}", args.out.display()))?;
        let extra = found_sqm(args.sqm_scripts.as_ref(), &sqm);
        if rerun_in_real_kernel(NEEDS, &extra, Duration::from_secs(30 * 60))? {
            return Ok(());
        }
    }
    let (tools, _work) = tools(sqm)?;
    // Root writes the report, often under /tmp: never through a link planted at a name.
    unbloat_safefs::ensure_dir(&args.out)?;
    let put = |name: &str, bytes: String| unbloat_safefs::write(&args.out.join(name), bytes, 0o644);
    let mut all = vec![];
    println!(
        "two LAN hosts, a: 1 stream each way, b: {} each way; link {}/{}, shaped at 95 %; fair share is 0.50\n{HEADER}",
        hosts::B_FLOWS,
        args.link.down,
        args.link.up
    );
    for family in args.family.list() {
        for setup in setups(&tools) {
            let scenario = scenario(family, args.duration, &args.link);
            let o = hosts::run(&scenario, setup, &tools)
                .with_context(|| format!("{} over {}", setup.name(), family.name()))?;
            println!("{}", row(&o));
            if let Some(f) = &o.fairness {
                println!("      {f}");
            }
            let name = svg_name(&o);
            put(&name, unbloat_lab::hosts_plot::plot(&o))?;
            all.push(o);
        }
    }
    put("hosts.json", serde_json::to_string_pretty(&all)?)?;
    put("index.html", html(&all, args.link.down, args.link.up))?;
    println!("report: {}", args.out.join("index.html").display());
    Ok(())
}

/// Both LAN hosts behind masquerade for `load` on `link`: the scenario of the lab and the bench.
fn scenario(family: Family, load: Time, link: &LinkRates) -> Scenario {
    Scenario {
        family,
        nat: true,
        load_s: secs(load),
        down: link.down,
        up: link.up,
    }
}

fn svg_name(o: &Outcome) -> String {
    let setup: String = o
        .setup
        .name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{}-{setup}.svg", o.scenario.family.name().to_lowercase())
}

fn html(all: &[Outcome], down: Rate, up: Rate) -> String {
    let mut s = format!("<!doctype html><meta charset=utf-8><title>unbloat lab: two hosts</title><h1>Two LAN hosts behind one router</h1><p>Host a runs one TCP stream each way, host b eight, all to one server; the router masquerades IPv4 (IPv6 is routed). {down} down, {up} up, with a 1000-packet modem FIFO, shapers at 95 %. Fair is a share of 0.50.</p><table border=1 cellpadding=4><tr><th>family<th>setup<th>a's share down<th>a's share up<th>ping idle ms<th>ping loaded ms (p50 / p90)<th>unbloat said</tr>");
    for o in all {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        s += &format!(
            "<tr><td>{}<td>{}<td>{:.2}<td>{:.2}<td>{}<td>{} / {}<td>{}</tr>",
            o.scenario.family.name(),
            o.setup.name(),
            o.share_down,
            o.share_up,
            ms(o.ping_idle_ms),
            ms(o.ping_loaded_ms),
            ms(o.ping_loaded_p90_ms),
            o.fairness.as_deref().unwrap_or("")
        );
    }
    s += "</table>";
    for o in all {
        s += &format!("<p><img src=\"{}\">", svg_name(o));
    }
    s
}

/// `unbloat-lab bench fair`.
pub fn bench_fair(args: &FairBenchArgs) -> Result<(), Failure> {
    let sqm = sqm_source(&args.sqm_scripts, args.inside)?;
    let extra = found_sqm(args.sqm_scripts.as_ref(), &sqm);
    if !args.inside && rerun_in_real_kernel(NEEDS, &extra, Duration::from_secs(90 * 60))? {
        return Ok(());
    }
    let (tools, _work) = tools(sqm)?;
    let mut rows = vec![];
    for family in [Family::Ipv4, Family::Ipv6] {
        let wanted = |s: &Setup| args.setups.is_empty() || args.setups.contains(s);
        for setup in setups(&tools)
            .into_iter()
            .filter(|s| *s != Setup::None && wanted(s))
        {
            let scenario = scenario(family, args.duration, &args.link);
            let mut runs = vec![];
            for _ in 0..args.runs {
                let o = hosts::run(&scenario, setup, &tools)
                    .with_context(|| format!("{} over {}", setup.name(), family.name()))?;
                if !args.json {
                    eprintln!("  {}", row(&o));
                }
                runs.push(o);
            }
            rows.push(Median::of(&runs));
        }
    }
    let mut costs: Vec<NatCost> = vec![];
    for _ in 0..args.runs {
        costs.push(hosts::nat_cost(secs(args.duration).min(10))?);
    }
    let med = |f: fn(&NatCost) -> f64| {
        hosts::quantile(&costs.iter().map(f).collect::<Vec<_>>(), 0.5).unwrap_or(f64::NAN)
    };
    let cost = NatCost {
        nat_bps: med(|c| c.nat_bps),
        nonat_bps: med(|c| c.nonat_bps),
        nat_pps: med(|c| c.nat_pps),
        nonat_pps: med(|c| c.nonat_pps),
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({"runs": args.runs, "fairness": rows, "nat_cost": cost, "nat_cost_ns_per_packet": cost.ns_per_packet()})
        );
        return Ok(());
    }
    println!(
        "\nmedians of {} runs, {} of load each; link {}/{} shaped at 95 %; host a: 1 stream each way, host b: {}; fair share is 0.50",
        args.runs,
        args.duration,
        args.link.down,
        args.link.up,
        hosts::B_FLOWS
    );
    println!("family setup                      a's share down (range)  a's share up (range)  a's ping loaded p50/p90 ms (idle)");
    for r in &rows {
        println!(
            "{:<6} {:<26} {:.2} ({:.2}-{:.2})         {:.2} ({:.2}-{:.2})        {:.0} / {:.0} ({:.0})",
            r.family.name(),
            r.setup.name(),
            r.share_down.0,
            r.share_down.1,
            r.share_down.2,
            r.share_up.0,
            r.share_up.1,
            r.share_up.2,
            r.ping_loaded,
            r.ping_p90,
            r.ping_idle
        );
    }
    println!(
        "\ncake's NAT lookup (cake bandwidth 10gbit dual-srchost, 8 streams through the masquerade; the highest rate it holds):\n  nonat {:.0} Mbit/s ({:.0} packets/s), nat {:.0} Mbit/s ({:.0} packets/s): {:+.0} ns per packet",
        cost.nonat_bps / 1e6,
        cost.nonat_pps,
        cost.nat_bps / 1e6,
        cost.nat_pps,
        cost.ns_per_packet()
    );
    Ok(())
}

/// Median and range over runs of one setup and family.
#[derive(Debug, serde::Serialize)]
struct Median {
    family: Family,
    setup: Setup,
    /// (median, min, max)
    share_down: (f64, f64, f64),
    share_up: (f64, f64, f64),
    ping_idle: f64,
    ping_loaded: f64,
    ping_p90: f64,
}

impl Median {
    fn of(runs: &[Outcome]) -> Median {
        let stat = |f: &dyn Fn(&Outcome) -> f64| {
            let v: Vec<f64> = runs.iter().map(f).collect();
            (
                hosts::quantile(&v, 0.5).unwrap_or(f64::NAN),
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let nan = f64::NAN;
        Median {
            family: runs[0].scenario.family,
            setup: runs[0].setup,
            share_down: stat(&|o| o.share_down),
            share_up: stat(&|o| o.share_up),
            ping_idle: stat(&|o| o.ping_idle_ms.unwrap_or(nan)).0,
            ping_loaded: stat(&|o| o.ping_loaded_ms.unwrap_or(nan)).0,
            ping_p90: stat(&|o| o.ping_loaded_p90_ms.unwrap_or(nan)).0,
        }
    }
}

#[derive(Debug, Args)]
pub struct HouseholdBenchArgs {
    /// Runs per link and setup, interleaved; the table gives medians and the rank test.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Bulk load per run (20s, 1m; a bare number is seconds), after 3 s idle; the first 3 s of
    /// load are the start-up. Whole seconds, 8s to 5m.
    #[arg(long, value_name = "D", default_value = "20s", value_parser = durations::household_load)]
    pub duration: Time,
    /// Links, comma-separated: 20/5, 8/1 (default: both).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub links: Vec<String>,
    /// Setups, comma-separated: none, besteffort, classify, diffserv4 (the tins without rules),
    /// sqm-layer-cake (default: these five; the last needs sqm-scripts' source); by name only:
    /// gaming and video-calls (one preset each), classify-down and classify-up (both presets, the
    /// rules' tins one way only, the other way's cake one tin), auto (`--classify auto`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub setups: Vec<String>,
    /// Where household.json and table.txt go.
    #[arg(long, value_name = "DIR", default_value = "unbloat-bench-household")]
    pub out: PathBuf,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Run nothing: print the table of an earlier run's household.json.
    #[arg(long, value_name = "FILE")]
    pub table_of: Option<PathBuf>,
    /// sqm-scripts' source (default: third_party/sqm-scripts of the source tree unbloat was
    /// built from).
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
    /// Internal: already in a kernel with cake.
    #[arg(long, hide = true)]
    pub inside: bool,
}

/// `unbloat-lab bench household`: a game, a call and the web beside bulk, per link and setup.
pub fn bench_household(args: &HouseholdBenchArgs) -> Result<(), Failure> {
    use unbloat_lab::bench_household;
    use unbloat_lab::household::{Setup as House, LINKS};
    if let Some(file) = &args.table_of {
        let text = unbloat_safefs::read(file)?;
        let bench: bench_household::Bench = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a household.json", file.display()))?;
        print!("{}", bench_household::render(&bench));
        return Ok(());
    }
    let links: Vec<_> = if args.links.is_empty() {
        LINKS.to_vec()
    } else {
        let mut v = vec![];
        for name in &args.links {
            v.push(*LINKS.iter().find(|l| l.name == name).ok_or_else(|| {
                anyhow::anyhow!("--links {name}: no such link; known: 20/5, 8/1")
            })?);
        }
        v
    };
    let mut setups = vec![];
    for name in &args.setups {
        setups.push(House::by_name(name).ok_or_else(|| {
            let known: Vec<&str> = House::ALL.iter().map(|s| s.name()).collect();
            anyhow::anyhow!(
                "--setups {name}: no such setup; known: {}",
                known.join(", ")
            )
        })?);
    }
    if setups.is_empty() {
        setups = House::DEFAULT.to_vec();
    }
    let out = std::path::absolute(&args.out)?;
    let sqm = sqm_source(&args.sqm_scripts, args.inside)?;
    let extra = found_sqm(args.sqm_scripts.as_ref(), &sqm);
    if !args.inside && rerun_in_real_kernel(NEEDS, &extra, Duration::from_secs(3 * 3600))? {
        return Ok(());
    }
    if sqm.is_none() {
        setups.retain(|s| *s != House::SqmLayerCake);
    }
    let (tools, _work) = tools(sqm)?;
    let n = args.runs as usize * links.len() * setups.len();
    eprintln!(
        "unbloat-lab bench household: {n} runs of {} load, about {} min",
        args.duration,
        n * (secs(args.duration) as usize + 12) / 60 + 1
    );
    let bench = bench_household::run(
        &links,
        &setups,
        args.runs as usize,
        secs(args.duration),
        &tools,
        |o| {
            if !args.json {
                eprintln!("  {}", bench_household::line(o));
            }
        },
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let json = serde_json::to_string_pretty(&bench)?;
    unbloat_safefs::ensure_dir(&out)?;
    let table = bench_household::render(&bench);
    crate::report::write_report(&out, "household.json", json, table, args.json)
}
