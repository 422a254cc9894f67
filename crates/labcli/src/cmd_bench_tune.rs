//! `unbloat-lab bench tune`: `unbloat tune` on every lab profile, what it found beside the truth
//! (framing family, ATM overhead, rates, time), and with `--exhaustive` beside the best rate a
//! grid of shaped runs finds for the same bound (`--grid one-way`: each direction as tune's search
//! loads it; `--grid rrul`: both ways, the other direction at the rate tune chose, by the bound
//! of tune's both-ways check).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use unbloat_lab::bench_tune::{keep_row, kept_row, row_path, ProfileRuns};
use unbloat_lab::profile::{shipped_names, LinkProfile};
use unbloat_lab::tune_lab::{best_on_grid, Steady, TuneLab, TuneRow};
use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::invocation::Stop;
use unbloat_shaper::options::ShapeOptions;
use unbloat_system::runner::SystemRunner;
use unbloat_tune::run::{bound_at, BOTH_LOAD, OTHER_PERCENT, STEP_LOAD};
use unbloat_tune::search::{passes, settled_p99_ms};
use unbloat_units::Rate;

use crate::Failure;

#[derive(Debug, Clone, Args)]
pub struct TuneBenchArgs {
    /// Profiles to tune, comma-separated names or files (default: every shipped profile).
    #[arg(long, value_name = "LIST")]
    pub profiles: Option<String>,
    /// Also sweep a grid of rates (80 % to 104 % of the line, 2 % apart, a test per rate as long
    /// as tune's own: 8 s one way, 12 s rrul; `--grid` says which) for the best rate within the
    /// same bound: slow (about 7 minutes per profile).
    #[arg(long)]
    pub exhaustive: bool,
    /// The grid's load: `one-way` (each direction's own test with the other at 85 %, as tune's
    /// searches judge a step, by the bound of that direction), or `rrul` (both ways at once, the
    /// other direction at the rate tune chose, by the both-ways check's bound).
    #[arg(long, value_enum, default_value = "one-way")]
    pub grid: GridLoad,
    /// Passed to `unbloat tune --bound`, and the bound the grid judges by. Where the link's own
    /// floor puts the steady p99 near the bound at every rate (rrul on a slow ATM uplink, or User-
    /// Mode Linux's jitter at 40 Mbit/s), pass and fail are noise; a higher bound moves the
    /// boundary back to the line, where the search looks for it.
    #[arg(long, value_name = "TIME", default_value = "10ms")]
    pub bound: unbloat_units::Time,
    /// Passed to `unbloat tune --max-time` (auto: 3 minutes, longer on a slow line).
    #[arg(long, value_name = "TIME|auto", default_value = "auto", value_parser = unbloat_tune::run::MaxTime::parse)]
    pub max_time: unbloat_tune::run::MaxTime,
    /// Tune each profile this many times, each in a fresh lab: the table has every run, and a
    /// line per profile counts how often the framing (and an ATM line's overhead, within 4 bytes)
    /// was right, with the medians of the confidence, the rates and the time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// Keep each run's row as DIR/PROFILE/run-K.json.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: take the runs already kept there instead of making them again.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: already in a kernel with cake.
    #[arg(long, hide = true)]
    pub inside: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GridLoad {
    OneWay,
    Rrul,
}

pub fn bench_tune(args: &TuneBenchArgs) -> Result<(), Failure> {
    if !args.inside
        && crate::cmd_kernel::rerun_in_real_kernel(
            crate::cmd_hosts::NEEDS,
            &[],
            Duration::from_secs(120 * 60 * u64::from(args.runs)),
        )?
    {
        return Ok(());
    }
    let bound_ms = args.bound.millis_f64();
    // `auto` is tune's default: said by leaving the flag out.
    let max_time = args
        .max_time
        .fixed()
        .map(|d| unbloat_units::Time::from_micros(d.as_micros() as u64));
    let names: Vec<String> = match &args.profiles {
        Some(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        None => shipped_names().into_iter().map(String::from).collect(),
    };
    let exe = crate::product()?;
    let out = args.out.as_deref().map(std::path::absolute).transpose()?;
    let runner = SystemRunner::from_env();
    let (mut rows, mut per_profile) = (vec![], vec![]);
    for name in &names {
        let profile = LinkProfile::load(name).map_err(crate::invalid)?;
        let mut runs = vec![];
        for k in 1..=args.runs {
            let kept_at = out.as_deref().map(|o| row_path(o, &profile.name, k));
            let kept = kept_at
                .as_deref()
                .filter(|_| args.resume)
                .and_then(kept_row);
            let row = match kept {
                Some(row) => {
                    eprintln!("unbloat: bench tune: {}, run {k}: kept", profile.name);
                    row
                }
                None => {
                    eprintln!(
                        "unbloat: bench tune: {} ({}), run {k} of {}",
                        profile.name, profile.description, args.runs
                    );
                    let row = tune_once(args, &profile, &runner, &exe, max_time, bound_ms)?;
                    if let Some(path) = &kept_at {
                        keep_row(path, &row)?;
                    }
                    row
                }
            };
            eprintln!("{}", line(&row));
            runs.push(row);
        }
        per_profile.push(ProfileRuns::new(&runs));
        rows.extend(runs);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{}", table(&rows));
        if args.runs > 1 {
            for p in &per_profile {
                println!("{}", p.line());
            }
        }
    }
    Ok(())
}

/// One tune run on `profile` in a lab of its own, with the grid when asked.
fn tune_once(
    args: &TuneBenchArgs,
    profile: &LinkProfile,
    runner: &SystemRunner,
    exe: &std::path::Path,
    max_time: Option<unbloat_units::Time>,
    bound_ms: f64,
) -> Result<TuneRow, Failure> {
    let dir = std::env::temp_dir().join(format!(
        "unbloat-bench-tune-{}-{}",
        std::process::id(),
        profile.name
    ));
    let lab = TuneLab::build(profile, runner, exe, &dir).map_err(|e| anyhow!(e))?;
    let mut row = lab
        .tune(profile, max_time, Some(args.bound))
        .map_err(|e| anyhow!(e))?;
    if args.exhaustive {
        exhaustive(&lab, profile, &mut row, &dir, bound_ms, args.grid)?;
    }
    lab.live.teardown().map_err(|e| anyhow!(e))?;
    Ok(row)
}

/// The grid's best rate each way, with the link options tune found (from its `unbloat.toml`).
fn exhaustive(
    lab: &TuneLab,
    profile: &LinkProfile,
    row: &mut TuneRow,
    dir: &std::path::Path,
    bound: f64,
    load: GridLoad,
) -> Result<(), Failure> {
    let toml_path: PathBuf = dir.join("tune/unbloat.toml");
    let config = ConfigFile::load(&toml_path)?;
    let found = config
        .interface(&"wan0".parse()?)
        .map(|i| i.options.clone())
        .unwrap_or_default();
    let link = ShapeOptions {
        link: found.link,
        framing: found.framing,
        overhead: found.overhead,
        mpu: found.mpu,
        ..ShapeOptions::default()
    };
    let (down_line, up_line) = (profile.down, profile.up);
    // rrul: the bound tune's both-ways check holds the chosen pair to (the probe crosses both
    // loaded directions, each adding its packets' slack); one way: each direction's own.
    let both = bound_at(bound, down_line) + bound_at(bound, up_line) - bound;
    let (bound_down, bound_up) = match load {
        GridLoad::OneWay => (bound_at(bound, down_line), bound_at(bound, up_line)),
        GridLoad::Rrul => (both, both),
    };
    // Each rate judged as tune judges a step (p99 and trend) or, under rrul, a both-ways check
    // (a falling round trip on its second half), with progress: 13 rates or fewer each way,
    // minutes in all.
    let judge = |way: &str, r: Rate, bound: f64, got: Result<Steady, _>| {
        let st: Steady = got?;
        let (p99, growth) = match load {
            GridLoad::OneWay => (st.p99_ms, st.growth_ms_per_s),
            GridLoad::Rrul => (
                settled_p99_ms(st.p99_ms, st.late_p99_ms, st.growth_ms_per_s),
                st.growth_ms_per_s,
            ),
        };
        let pass = passes(bound, p99, growth);
        eprintln!(
            "  grid: {way} {r}: steady p99 +{p99:.1} ms, trend {} ms/s: {}",
            growth.map_or("-".into(), |g| format!("{g:+.2}")),
            if pass { "pass" } else { "fail" }
        );
        Ok(pass)
    };
    let other = |found: Option<Rate>, line: Rate| match load {
        GridLoad::OneWay => line.percent(OTHER_PERCENT),
        GridLoad::Rrul => found.unwrap_or(line.percent(OTHER_PERCENT)),
    };
    // Each load as long as tune's: a search step's one way, a both-ways check's rrul.
    let test = |way: &'static str| match load {
        GridLoad::OneWay => (way, STEP_LOAD),
        GridLoad::Rrul => ("rrul", BOTH_LOAD),
    };
    let up_at = other(row.up_found, up_line);
    row.down_best = best_on_grid(down_line, |r| {
        let (profile, secs) = test("download");
        let got = lab.steady_at(r, up_at, &link, profile, secs);
        judge("download", r, bound_down, got)
    })
    .map_err(|e| anyhow!(e))?;
    // One way, the upload is searched with the download at its own result, as tune does.
    let down_at = match load {
        GridLoad::OneWay => row.down_best.unwrap_or(down_line.percent(OTHER_PERCENT)),
        GridLoad::Rrul => other(row.down_found, down_line),
    };
    row.up_best = best_on_grid(up_line, |r| {
        let (profile, secs) = test("upload");
        let got = lab.steady_at(down_at, r, &link, profile, secs);
        judge("upload", r, bound_up, got)
    })
    .map_err(|e| anyhow!(e))?;
    lab.unbloat_json(Stop {
        iface: Some("wan0".parse()?),
        json: true,
    })
    .map_err(|e| anyhow!(e))?;
    Ok(())
}

fn pct(found: Option<Rate>, of: Option<Rate>) -> String {
    match (found, of) {
        (Some(f), Some(o)) if !o.is_zero() => {
            format!("{:+.1} %", 100.0 * (f.kbit_f64() / o.kbit_f64() - 1.0))
        }
        _ => "-".into(),
    }
}

fn line(r: &TuneRow) -> String {
    let rate = |x: Option<Rate>| x.map_or("-".to_string(), |x| x.to_string());
    format!(
        "{:<12} {:<5} {:<10} {:>4} {:>5} | {:>10} {:>10} {:>8} {:>8} {:>8} | {:>10} {:>10} {:>8} {:>8} {:>8} | {:>5.0} s",
        r.profile,
        r.family_truth,
        r.family_found,
        r.overhead_truth,
        r.overhead_found.map_or("-".into(), |o| o.to_string()),
        r.down_line.to_string(),
        rate(r.down_found),
        pct(r.down_found, Some(r.down_line)),
        pct(r.down_found, r.down_best),
        pct(r.down_searched, r.down_best),
        r.up_line.to_string(),
        rate(r.up_found),
        pct(r.up_found, Some(r.up_line)),
        pct(r.up_found, r.up_best),
        pct(r.up_searched, r.up_best),
        r.seconds
    )
}

fn table(rows: &[TuneRow]) -> String {
    let mut t = format!(
        "{:<12} {:<5} {:<10} {:>4} {:>5} | {:>10} {:>10} {:>8} {:>8} {:>8} | {:>10} {:>10} {:>8} {:>8} {:>8} | {:>7}\n",
        "profile", "truth", "found", "ovh", "found", "down line", "tuned", "vs line", "vs best", "search", "up line", "tuned", "vs line", "vs best", "search", "time"
    );
    for r in rows {
        t.push_str(&line(r));
        t.push('\n');
    }
    let right = rows.iter().filter(|r| r.family_right()).count();
    t.push_str(&format!(
        "framing family right on {right} of {} profiles\n(vs best: the rate tune chose against the \
         grid's best; search: the search's own result, before the download's drain margin and the \
         both-ways back-offs, against it)",
        rows.len()
    ));
    t
}
