//! `unbloat-lab bench hostile`: hostile clients against `unbloat serve`, the daemon's page and
//! its metrics, with a legitimate client beside them (issue 53 §3; the work is the lab crate's
//! [`unbloat_lab::bench_hostile`]). It runs on this machine's own kernel, in namespaces of its
//! own: nothing is shaped, so no kernel with cake is needed.

use anyhow::anyhow;
use clap::Args;
use std::time::Duration;

use crate::Failure;
use unbloat_lab::bench_hostile::attack::Kind;
use unbloat_lab::bench_hostile::net::Source;
use unbloat_lab::bench_hostile::{self, HostileArgs, Target};

#[derive(Debug, Args)]
pub struct HostileBench {
    /// Connections each attack keeps open (or tries to).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub connections: u32,
    /// How long each attack lasts (30s, 2m; a bare number is seconds): 2 s to an hour.
    #[arg(long, alias = "seconds", value_name = "D", default_value = "30s", value_parser = crate::durations::attack_time)]
    pub duration: unbloat_units::Time,
    /// The slow attack's pace: each connection sends one byte this often (100ms to 60s).
    #[arg(long, value_name = "D", default_value = "3s", value_parser = crate::durations::drip_gap)]
    pub gap: unbloat_units::Time,
    /// The flood's connects a second, at most (the attacker opens a connection again at once
    /// when the server closes it).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(10..=100_000))]
    pub flood_rate: u32,
    /// Servers attacked, comma-separated: serve, page, metrics (default: all).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Attacks, comma-separated: slow, flood (default: both).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub attacks: Vec<String>,
    /// Where the attacks come from, comma-separated: address (one IPv4 address), slash56 (every
    /// /64 of one IPv6 /56 in turn) (default: both).
    #[arg(long = "from", value_name = "LIST", value_delimiter = ',')]
    pub sources: Vec<String>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn hostile_bench(a: &HostileBench) -> Result<(), Failure> {
    let targets = pick(&a.targets, "--targets", &Target::ALL, |t| t.name())?;
    let attacks = pick(&a.attacks, "--attacks", &[Kind::Slow, Kind::Flood], |k| {
        k.name()
    })?;
    let sources = pick(
        &a.sources,
        "--from",
        &[Source::OneAddress, Source::OneSlash56],
        |s| match s {
            Source::OneAddress => "address",
            Source::OneSlash56 => "slash56",
        },
    )?;
    let args = HostileArgs {
        connections: a.connections as usize,
        seconds: a.duration.micros() as f64 / 1e6,
        gap: Duration::from_micros(a.gap.micros()),
        flood_rate: a.flood_rate,
        targets,
        attacks,
        sources,
    };
    let cases = args.targets.len() * args.attacks.len() * args.sources.len();
    eprintln!(
        "unbloat bench hostile: {cases} attacks of {} s each, {} connections",
        args.seconds, args.connections
    );
    let exe = crate::product()?;
    let mut done = 0;
    let bench = bench_hostile::run(&exe, &args, |c| {
        done += 1;
        eprintln!(
            "  {done}/{cases} {} {} from {}: legitimate client served {}/{}, server peak {} threads",
            c.target.name(),
            c.attack.name(),
            c.source.name(),
            c.legit.served,
            c.legit.asked,
            c.server.peak.threads
        );
    })
    .map_err(|e| anyhow!(e))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&bench)?);
    } else {
        print!("{}", bench_hostile::render(&bench));
    }
    Ok(())
}

/// The values of a list flag by name (all when none were given); an unknown name is refused
/// with the known ones.
fn pick<T: Copy>(
    given: &[String],
    flag: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<Vec<T>, Failure> {
    if given.is_empty() {
        return Ok(all.to_vec());
    }
    given
        .iter()
        .map(|g| {
            all.iter().copied().find(|&v| name(v) == g).ok_or_else(|| {
                let known: Vec<_> = all.iter().map(|&v| name(v)).collect();
                crate::invalid(anyhow!("{flag} {g}: known: {}", known.join(", ")))
            })
        })
        .collect()
}
