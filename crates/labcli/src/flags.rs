//! The lab's argument structs as flags: the clap definitions of `unbloat-lab run`, `bench lab`
//! and `bench autorate`, turned into the lab crate's plain structs at this edge (the library
//! carries no CLI types). Each field's doc comment is its `--help` text.

use clap::Args;
use std::path::PathBuf;
use unbloat_lab::bench::BenchLabArgs;
use unbloat_lab::bench_autorate::BenchAutorateArgs;
use unbloat_lab::lab::LabArgs;
use unbloat_units::Time;

/// The flags of [`LabArgs`].
#[derive(Debug, Clone, Args)]
pub struct LabFlags {
    /// Link profile: a shipped name (dsl-2002, adsl-slow, adsl-remote, adsl-rural, adsl-far, adsl, adsl2-pppoa, vdsl2, vdsl2-novlan, docsis, fiber) or a TOML file.
    #[arg(long, value_name = "P", default_value = unbloat_lab::profile::DEFAULT_PROFILE)]
    pub profile: String,
    /// Strategies to compare, in order: none, wondershaper, sqm-simple, sqm-piece-of-cake,
    /// unbloat, unbloat-tuned, sqm-scripts:RECIPE, script:PATH (--help says more).
    #[arg(long, value_name = "A,B,..", default_value = "none,unbloat", long_help = unbloat_lab::script::STRATEGIES_HELP)]
    pub strategies: String,
    /// sqm-scripts' source (the directory with src/start-sqm) for the sqm-scripts:RECIPE
    /// strategies; default: third_party/sqm-scripts of the source tree unbloat was built from.
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
    /// The `unbloat test` profile each strategy is measured with.
    #[arg(long, value_name = "T", default_value = "rrul")]
    pub test: String,
    /// TCP streams per direction, for the tests that take it (tcp_ndown, tcp_nup, download,
    /// upload, bidir): `--test tcp_ndown --streams 1` is one long download.
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
    /// How long the load of each test lasts (a bare number is seconds, as for `unbloat test`).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = unbloat_lab::lab::parse_lab_duration)]
    pub duration: Time,
    /// The far end the server namespace runs: unbloat (`unbloat serve`), http (Debian's nginx
    /// over TLS with HTTP/2, the responsiveness test's endpoints) or irtt-iperf3 (a stock irtt
    /// server for the probes, a stock iperf3 for the load).
    #[arg(long, value_name = "KIND", default_value = "unbloat", value_parser = unbloat_lab::farend::FarEndKind::parse)]
    pub far_end: unbloat_lab::farend::FarEndKind,
    /// cake-autorate's source (the directory with cake-autorate.sh) for the cake-autorate
    /// strategy; default: third_party/cake-autorate of the source tree unbloat was built from.
    #[arg(long, value_name = "DIR")]
    pub cake_autorate: Option<PathBuf>,
    /// The `unbloat-tuned` strategy's `unbloat tune --max-time` (its whole tune, before its test).
    #[arg(long, value_name = "D|auto", default_value = "auto", value_parser = unbloat_tune::run::MaxTime::parse)]
    pub tune_max_time: unbloat_tune::run::MaxTime,
    /// The report directory (HTML page, table, results and flent files).
    #[arg(long, value_name = "DIR", default_value = "unbloat-lab-report")]
    pub out: PathBuf,
    /// Print the comparison as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Internal: this process already runs in a kernel that has every qdisc (the UML re-exec).
    #[arg(long, hide = true)]
    pub in_kernel: bool,
}

impl From<LabFlags> for LabArgs {
    fn from(f: LabFlags) -> LabArgs {
        LabArgs {
            profile: f.profile,
            strategies: f.strategies,
            sqm_scripts: f.sqm_scripts,
            test: f.test,
            streams: f.streams,
            duration: f.duration,
            far_end: f.far_end,
            cake_autorate: f.cake_autorate,
            tune_max_time: f.tune_max_time,
            out: f.out,
            json: f.json,
            in_kernel: f.in_kernel,
        }
    }
}

/// The flags of [`BenchLabArgs`].
#[derive(Debug, Clone, Args)]
pub struct BenchLabFlags {
    /// Profiles to run, comma-separated: shipped names or TOML files (default: every shipped
    /// profile).
    #[arg(long, value_name = "A,B,..")]
    pub profiles: Option<String>,
    /// Strategies to compare, comma-separated, as `unbloat-lab run --strategies` takes them (its
    /// --help says more). Default: the five the lab writes, with the real sqm-scripts beside its
    /// re-creations (sqm-scripts:simple, sqm-scripts:piece_of_cake) when its source is found.
    /// The checks that involve a strategy left out are not made.
    #[arg(long, value_name = "A,B,..")]
    pub strategies: Option<String>,
    /// sqm-scripts' source (the directory with src/start-sqm); default: third_party/sqm-scripts
    /// of the source tree unbloat was built from.
    #[arg(long, value_name = "DIR")]
    pub sqm_scripts: Option<PathBuf>,
    /// Run each profile's lab N times; the checks use the medians over the runs, and a table
    /// shows each number's median and range.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub runs: usize,
    /// The `unbloat test` profile.
    #[arg(long, value_name = "T", default_value = "rrul")]
    pub test: String,
    /// Load per test (a bare number is seconds).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = unbloat_lab::lab::parse_lab_duration)]
    pub duration: Time,
    /// Report directory: one subdirectory per profile (and per run, with --runs above 1).
    #[arg(long, value_name = "DIR", default_value = "unbloat-bench-lab")]
    pub out: PathBuf,
    /// Keep the runs --out already holds (their lab.json, from the same strategies) and run only
    /// the missing ones: five runs of several profiles take hours, and can be run in parts.
    #[arg(long)]
    pub resume: bool,
    /// Print every run's comparison, the spreads and the failed checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// Run nothing: check and print a finished benchmark again from its report directory
    /// (every `PROFILE/lab.json` or `PROFILE/run-K/lab.json` in DIR).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["profiles", "strategies", "sqm_scripts", "runs", "test", "duration", "out", "resume"])]
    pub from: Option<PathBuf>,
}

impl From<BenchLabFlags> for BenchLabArgs {
    fn from(f: BenchLabFlags) -> BenchLabArgs {
        BenchLabArgs {
            profiles: f.profiles,
            strategies: f.strategies,
            sqm_scripts: f.sqm_scripts,
            runs: f.runs,
            test: f.test,
            duration: f.duration,
            out: f.out,
            resume: f.resume,
            json: f.json,
            from: f.from,
        }
    }
}

/// The flags of [`BenchAutorateArgs`].
#[derive(Debug, Clone, Args)]
pub struct BenchAutorateFlags {
    /// mahimahi traces (NAME.down and NAME.up pairs); default: third_party/traces in the source
    /// tree this unbloat was built from.
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// Only these traces, comma-separated (step, ramp, or a pair's NAME).
    #[arg(long, value_name = "A,B,..")]
    pub only: Option<String>,
    /// Tests, comma-separated: rrul, download (one long TCP download).
    #[arg(long, value_name = "A,B", default_value = "rrul,download")]
    pub tests: String,
    /// Runs of each lab; the tables give medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
    /// Load per test (a bare number is seconds; the issue asks for 120 s at least).
    #[arg(long, value_name = "D", default_value = "120s", value_parser = unbloat_lab::lab::parse_lab_duration)]
    pub duration: Time,
    /// cake-autorate's source (the directory with cake-autorate.sh).
    #[arg(long, value_name = "DIR")]
    pub cake_autorate: Option<PathBuf>,
    /// Report directory: TRACE/TEST/run-K per lab.
    #[arg(long, value_name = "DIR", default_value = "unbloat-bench-autorate")]
    pub out: PathBuf,
    /// Strategies, comma-separated, of none, unbloat-p10, unbloat-mean, cake-autorate,
    /// unbloat-autorate (default: all five).
    #[arg(long, value_name = "A,B,..")]
    pub strategies: Option<String>,
    /// Keep the runs --out already holds (each run's lab.json) and run only the missing ones:
    /// the whole benchmark takes hours, and can be run in parts.
    #[arg(long)]
    pub resume: bool,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

impl From<BenchAutorateFlags> for BenchAutorateArgs {
    fn from(f: BenchAutorateFlags) -> BenchAutorateArgs {
        BenchAutorateArgs {
            traces: f.traces,
            only: f.only,
            tests: f.tests,
            runs: f.runs,
            duration: f.duration,
            cake_autorate: f.cake_autorate,
            out: f.out,
            strategies: f.strategies,
            resume: f.resume,
            json: f.json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_flags_defaults_match_the_libraries_default() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            lab: LabFlags,
        }
        let parsed = LabArgs::from(Cli::try_parse_from(["run"]).expect("parse").lab);
        let d = LabArgs::default();
        assert_eq!(
            (
                parsed.profile,
                parsed.strategies,
                parsed.sqm_scripts,
                parsed.test,
                parsed.duration,
                parsed.out,
                parsed.json,
                parsed.in_kernel
            ),
            (
                d.profile,
                d.strategies,
                d.sqm_scripts,
                d.test,
                d.duration,
                d.out,
                d.json,
                d.in_kernel
            )
        );
        let parsed = Cli::try_parse_from([
            "run",
            "--duration",
            "10s",
            "--strategies",
            "none,sqm-simple",
        ])
        .expect("parse")
        .lab;
        assert_eq!(parsed.duration, Time::from_secs(10));
    }

    #[test]
    fn from_runs_nothing_so_it_refuses_the_options_of_a_run() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchLabFlags,
        }
        let ok = Cli::try_parse_from(["bench", "--from", "d", "--json"]).expect("parse");
        assert_eq!((ok.bench.from, ok.bench.runs), (Some("d".into()), 1));
        for extra in [
            ["--runs", "3"],
            ["--profiles", "adsl"],
            ["--duration", "10s"],
        ] {
            let argv = ["bench", "--from", "d"].into_iter().chain(extra);
            let err = Cli::try_parse_from(argv).err().expect("conflict");
            assert!(err.to_string().contains("cannot be used with"), "{err}");
        }
    }
}
