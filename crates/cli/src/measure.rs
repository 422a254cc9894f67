//! `unbloat test`: run the measurement, then show and save it (summary, JSON, files, plots).
//! The flags and their help are here; `unbloat_measure` gets them as its plain [`TestArgs`].

use crate::Failure;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use unbloat_measure::{parse_duration, run_test, TerminalProgress, TestArgs};
use unbloat_report::files::{check_writable, default_basename, write_results_dir};
use unbloat_report::model::Results;
use unbloat_report::summary::{render_text, Summary};

#[derive(Debug, Args)]
pub struct TestCmd {
    #[command(flatten)]
    pub test: TestFlags,
    /// Write the results file (versioned JSON with metadata), the flent file (`.flent.gz`,
    /// for rrul, rrul_be, tcp_nup, tcp_ndown and ping) and the SVG plots into DIR. The
    /// router's small build writes the results file only; `unbloat plot` draws the rest.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `unbloat test`'s flags for the measurement itself: what [`TestArgs`] holds.
#[derive(Debug, Clone, Args)]
pub struct TestFlags {
    /// The far end. `HOST[:PORT]` or `unbloat://HOST[:PORT]` is an `unbloat serve` (port 4420;
    /// IPv6 with a port in brackets: `[2001:db8::1]:4420`); `https://HOST[/CONFIG]` (or http://)
    /// a web server with the responsiveness test's endpoints, read from its `.well-known/nq`
    /// config (or the CONFIG path); `irtt://HOST[:PORT]` a stock irtt server (latency probes
    /// only, port 2112); `iperf3://HOST[:PORT]` a stock iperf3 server (load only, port 5201;
    /// latency by ICMP echo).
    #[arg(value_name = "SERVER", conflicts_with = "server_flag")]
    pub server: Option<String>,
    /// The far end, as the SERVER argument.
    #[arg(long = "server", value_name = "URL")]
    pub server_flag: Option<String>,
    /// Where the load goes, when not to SERVER: `iperf3://HOST`, `https://HOST`,
    /// `unbloat://HOST` (with `--probe irtt://HOST`, SERVER may be left out).
    #[arg(long, value_name = "URL")]
    pub load: Option<String>,
    /// Where the latency probes go, when not to SERVER: `irtt://HOST`, `unbloat://HOST`,
    /// `https://HOST`.
    #[arg(long, value_name = "URL")]
    pub probe: Option<String>,
    /// Web server: the small object's URL (latency probes); with --large-url and --upload-url
    /// instead of the server's `.well-known/nq` config. All on the server's host.
    #[arg(long, value_name = "URL", requires_all = ["large_url", "upload_url"])]
    pub small_url: Option<String>,
    /// Web server: the large object's URL (download load).
    #[arg(long, value_name = "URL", requires_all = ["small_url", "upload_url"])]
    pub large_url: Option<String>,
    /// Web server: the URL that takes uploads (POST).
    #[arg(long, value_name = "URL", requires_all = ["small_url", "large_url"])]
    pub upload_url: Option<String>,
    /// Web server: also trust the certificate authorities in this PEM file (a lab's or a LAN's
    /// own; the system's roots are always trusted).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Web server: the most load connections per direction (1 to 32, default 16); the test adds
    /// connections until goodput stops rising, as the responsiveness draft does.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// What to run: rrul (4 up + 4 down TCP streams marked BE, BK, CS5, EF; UDP probes BE, EF,
    /// BK; ping), rrul_be (the same, all best effort), upload, download, bidir, ping (latency
    /// only), tcp_nup, tcp_ndown.
    #[arg(long, value_name = "PROFILE", default_value = "rrul")]
    pub profile: String,
    /// How long the load runs (e.g. 30s, 1m; 1s to 60m). The idle phases come on top.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Number of TCP streams per direction, for upload, download, bidir, tcp_nup and tcp_ndown.
    #[arg(long, value_name = "N")]
    pub streams: Option<usize>,
    /// Length of the idle baseline before the load and of the idle tail after it (3s to 10m).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    pub idle: Duration,
    /// Latency probes per second for each probe class (1 to 100).
    #[arg(long, value_name = "HZ", default_value_t = 5.0)]
    pub probe_rate: f64,
    /// Leave out what locates the queue: the gateway's probes (ICMP echo beside the far end's)
    /// and this machine's egress backlog. Without them the report cannot say which hop holds
    /// the delay.
    #[arg(long)]
    pub no_locate: bool,
    /// How long to wait for the server to answer a connection (100ms to 60s).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

impl TestFlags {
    pub fn args(&self) -> TestArgs {
        TestArgs {
            server: self.server.clone(),
            server_flag: self.server_flag.clone(),
            load: self.load.clone(),
            probe: self.probe.clone(),
            small_url: self.small_url.clone(),
            large_url: self.large_url.clone(),
            upload_url: self.upload_url.clone(),
            ca_file: self.ca_file.clone(),
            max_connections: self.max_connections,
            profile: self.profile.clone(),
            duration: self.duration,
            streams: self.streams,
            idle: self.idle,
            probe_rate: self.probe_rate,
            connect_timeout: self.connect_timeout,
            locate: !self.no_locate,
        }
    }
}

pub fn test(args: &TestCmd) -> Result<(), Failure> {
    let test = args.test.args();
    let _plan = test.plan().map_err(crate::invalid)?;
    // Before anything runs: a directory the results cannot go to would lose the whole run.
    if let Some(dir) = &args.out {
        check_writable(dir).map_err(|e| {
            crate::invalid(anyhow::Error::new(e).context(format!(
                "--out {}: the results could not be written there",
                dir.display()
            )))
        })?;
    }
    let mut progress = TerminalProgress::default();
    match run_test(&test, &mut progress) {
        Ok(results) => report(args, &results),
        Err(failure) => {
            if let Some(partial) = &failure.partial {
                eprintln!("unbloat: the test ended early; what was measured is marked partial");
                report(args, partial)?;
                return Err(Failure {
                    code: 3,
                    error: failure.into(),
                });
            }
            // Busy, refused, foreign or gone: the far end's doing, not this machine's.
            let code = if failure.error.is_far_end() { 3 } else { 1 };
            Err(Failure {
                code,
                error: failure.into(),
            })
        }
    }
}

fn report(args: &TestCmd, results: &Results) -> Result<(), Failure> {
    let summary = Summary::from_results(results);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", render_text(&summary));
    }
    if let Some(dir) = &args.out {
        let written = write_results_dir(results, dir, &default_basename(results))?;
        for path in written.all() {
            eprintln!("wrote {}", path.display());
        }
        #[cfg(not(feature = "plot"))]
        eprintln!(
            "unbloat: this build (the router's) draws no plots and writes no flent file; \
             `unbloat plot {}` on another machine draws them",
            written.results_json.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Instant;
    use unbloat_measure::{MeasureError, TestPlan};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cmd: TestCmd,
    }

    /// Bug: an `--out` directory that could not be written was found only after the whole run
    /// (and the results were lost with it). Now it is checked first: exit status 2, the flag
    /// named, and no test run (against a live server that would have served one).
    #[test]
    fn an_unwritable_out_directory_is_refused_before_the_run() {
        let (server, addr) = unbloat_measure::Server::bind(unbloat_measure::ServeOptions {
            listen: Some("127.0.0.1:0".parse().expect("addr")),
            log: false,
            ..Default::default()
        })
        .expect("bind");
        let _server = server.spawn(addr).expect("serve");
        let scratch =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"))
                .join(format!("cli-out-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("scratch");
        let file = scratch.join("a-file");
        std::fs::write(&file, "not a directory").expect("file");
        // As root a mode cannot make a directory unwritable: a path through a file can.
        for out in [file.join("results"), file.clone()] {
            let cmd = Cli::parse_from([
                "test",
                &addr.to_string(),
                "--profile=ping",
                "--duration=1s",
                "--idle=3s",
                "--out",
                &out.display().to_string(),
            ])
            .cmd;
            let started = Instant::now();
            let failure = test(&cmd).expect_err("refused");
            assert_eq!(failure.code, 2, "{:#}", failure.error);
            let text = format!("{:#}", failure.error);
            assert!(text.contains("--out"), "{text}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "a test ran first ({:?})",
                started.elapsed()
            );
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }

    /// The flags as `unbloat test` parses them, then checked as [`TestArgs::plan`] does.
    fn args(extra: &[&str]) -> Result<TestPlan, MeasureError> {
        let argv = std::iter::once("unbloat-test").chain(extra.iter().copied());
        Cli::try_parse_from(argv)
            .map_err(|e| MeasureError::InvalidArgument(e.to_string()))?
            .cmd
            .test
            .args()
            .plan()
    }

    #[test]
    fn arguments_are_checked_with_the_flag_named() {
        let plan = args(&[
            "host",
            "--duration",
            "10s",
            "--profile",
            "tcp_nup",
            "--streams",
            "2",
        ])
        .expect("valid");
        assert_eq!(plan.load, Duration::from_secs(10));
        assert_eq!(plan.profile.streams.len(), 2);
        assert_eq!(plan.probe_interval, Duration::from_millis(200));
        let err = |a: &[&str]| args(a).expect_err("invalid").to_string();
        assert!(err(&["host", "--idle", "2s"]).contains("--idle"));
        assert!(err(&["host", "--probe-rate", "101"]).contains("--probe-rate"));
        assert!(err(&["host", "--probe-rate", "0"]).contains("--probe-rate"));
        assert!(err(&["host", "--duration", "0s"]).contains("--duration"));
        assert!(err(&["host", "--profile", "nope"]).contains("known profiles"));
        assert!(err(&["host:x"]).contains("port"));
    }

    /// Bug: `--connect-timeout 0s` was accepted (every connection then failed at once), and a
    /// tiny `--probe-rate` (1e-300) panicked turning its interval into a Duration. Every time
    /// and rate flag is now finite and within a range, or refused with the flag named.
    #[test]
    fn connect_timeout_zero_and_out_of_range_times_and_rates_are_refused() {
        let refused = [
            ("--connect-timeout", "0s"),
            ("--connect-timeout", "10ms"),
            ("--connect-timeout", "61s"),
            ("--probe-rate", "1e-300"),
            ("--probe-rate", "0.5"),
            ("--probe-rate", "inf"),
            ("--probe-rate", "NaN"),
            ("--probe-rate", "-5"),
            ("--duration", "1440m"),
            ("--duration", "500ms"),
            ("--idle", "11m"),
        ];
        for (flag, value) in refused {
            let arg = format!("{flag}={value}");
            let err = args(&["host", arg.as_str()]).expect_err(&arg).to_string();
            assert!(err.contains(flag), "{arg}: {err}");
        }
        for (flag, value) in [("--duration", "inf"), ("--idle", "nan"), ("--idle", "1e99")] {
            let arg = format!("{flag}={value}");
            let err = args(&["host", arg.as_str()]).expect_err(&arg).to_string();
            assert!(err.contains(flag), "{arg}: {err}");
        }
        let plan = args(&[
            "host",
            "--connect-timeout=100ms",
            "--probe-rate=1",
            "--duration=60m",
            "--idle=10m",
        ])
        .expect("the ends of every range");
        assert_eq!(plan.connect_timeout, Duration::from_millis(100));
        assert_eq!(plan.probe_interval, Duration::from_secs(1));
    }
}
