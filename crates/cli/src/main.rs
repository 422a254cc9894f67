//! `unbloat`: smart queue management for Linux. This binary only parses arguments and glues the
//! library crates together (see the workspace README for the map):
//! shaping (`plan`, `start`, `stop`, `status`, `config check`) in [`shape`], `config import-sqm`
//! in [`import`], measuring (`test`,
//! `serve`, `plot`) in [`measure`], the emulated network (`lab`) in [`lab`], benchmarks in
//! [`bench`], running work in a kernel that has every qdisc in [`kernel`], and the man pages and
//! shell completions generated from this very definition in [`docs`].

mod autorate;
mod bench;
mod bench_daemon;
mod bench_tune;
mod daemon;
mod docs;
mod flags;
mod hosts;
mod import;
mod kernel;
mod lab;
mod measure;
mod shape;
mod tune;

use clap::{CommandFactory, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit status:
  0  success (for start: shaped and verified, or already shaped exactly as asked)
  1  the operation failed; for start, stop and set-rate, every interface was left exactly as it
     was (or the message says ROLLBACK INCOMPLETE and what differs)
  2  invalid input (a flag, a value, a config file): nothing was touched
  3  a test or lab ran but could not measure everything (partial results were saved)

Examples:
  unbloat plan eth0 --down 78mbit --up 19950kbit --link vdsl2
  unbloat start eth0 --down 78mbit --up 19950kbit --link vdsl2 --nat --isolation dual-host
  unbloat status eth0
  unbloat set-rate eth0 --down 70mbit --up 18mbit
  unbloat stop eth0
  unbloat config import-sqm /etc/config/sqm --out /etc/unbloat/unbloat.toml
  unbloat serve                      (on the far end)
  unbloat test far.example.net --profile rrul --out results/
  unbloat tune eth0 --server far.example.net --apply
  unbloat autorate wwan0 --min 2mbit --base 10mbit --max 50mbit
  unbloat lab                        (the emulated before/after)";

#[derive(Parser)]
#[command(
    name = "unbloat",
    version,
    about = "Smart queue management for Linux: remove bufferbloat, and prove it",
    long_about = "unbloat shapes a link with the kernel's own cake, or HTB + fq_codel (egress on the WAN \
device, ingress through an IFB), with link-layer compensation, per-host fairness and DSCP tins; it \
measures latency under load and grades it; and it builds an emulated bloated access network to show \
the problem and the cure.\n\nEvery change is validated before the kernel is touched, read back from \
the kernel and verified, and rolled back entirely if anything fails.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the exact `ip` and `tc` commands a start would run (touches nothing).
    Plan(shape::PlanArgs),
    /// Shape an interface (or every interface of the config file), atomically.
    Start(shape::StartArgs),
    /// Remove exactly what `start` created on an interface.
    Stop(shape::StopArgs),
    /// Show what the kernel is doing on a shaped interface.
    Status(shape::StatusArgs),
    /// Change only the shaper rates of a shaped interface, in place (no gap for flows).
    SetRate(shape::SetRateArgs),
    /// Finish or undo a change that an unbloat process left when it died.
    Recover(shape::RecoverArgs),
    /// Keep a change made with `--confirm` (otherwise it is undone at its deadline).
    Confirm(shape::ConfirmArgs),
    /// Keep the config file applied: at start, when an interface appears, comes back up or is
    /// re-created (PPPoE, USB modems, WireGuard), and on SIGHUP or `unbloat reload`; and run
    /// autorate on each interface with an `[autorate.NAME]` table.
    Daemon(daemon::DaemonArgs),
    /// Ask the running daemon to read its config again and apply what changed, loss-free (an
    /// invalid file is refused and the running setup stays).
    Reload(daemon::ReloadArgs),
    /// Work with config files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Measure latency under load against a far end (`unbloat serve`, a web server, irtt, iperf3), and grade it.
    Test(measure::TestCmd),
    /// Find the link's framing and shaper rates by measuring it (saturates the link for up to
    /// --max-time; the old shaping is put back unless --apply).
    Tune(tune::TuneArgs),
    /// Keep cake's rates just under what a variable link (LTE, 5G, Starlink, busy cable)
    /// carries now, by watching its delay to reflectors and its load, until stopped.
    Autorate(autorate::AutorateArgs),
    /// Be the far end of `unbloat test`.
    Serve(unbloat_measure::ServeArgs),
    /// Redraw the plots of a results file (or draw an autorate log).
    Plot(unbloat_report::files::PlotArgs),
    /// Build an emulated bloated access network and compare strategies on it.
    Lab(lab::LabCmd),
    /// Two LAN hosts behind a masquerading router, one stream against eight each way: each
    /// host's share and ping for no shaping, sqm-scripts' default and unbloat (IPv4 and IPv6).
    LabHosts(hosts::LabHostsArgs),
    /// Benchmarks of unbloat itself (start, status) and of its measurements.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Print the shell completion script for bash, zsh or fish.
    #[command(
        long_about = "Print the shell completion script for bash, zsh or fish on stdout. \
The Debian package installs all three; elsewhere, for example:\n\n  \
unbloat completions bash > /usr/share/bash-completion/completions/unbloat\n  \
unbloat completions zsh > /usr/local/share/zsh/site-functions/_unbloat\n  \
unbloat completions fish > /usr/share/fish/vendor_completions.d/unbloat.fish"
    )]
    Completions(docs::CompletionsArgs),
    /// Write the man pages (unbloat.8 and one per subcommand) into a directory.
    #[command(hide = true)]
    Man(docs::ManArgs),
    /// Run a command in a kernel that has every qdisc (the host's, or User-Mode Linux).
    #[command(hide = true)]
    Kernel(kernel::KernelArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file (default /etc/unbloat/unbloat.toml) without touching anything.
    Check(shape::CheckArgs),
    /// Turn sqm-scripts' configuration (OpenWrt's /etc/config/sqm, or /etc/sqm/IFACE.iface.conf)
    /// into unbloat's TOML, with a note for every option that does not carry over as is.
    ImportSqm(import::ImportSqmArgs),
}

/// An error with the exit status it deserves.
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure {
            code: 1,
            error: e.into(),
        }
    }
}

/// Marks an error as invalid input (exit 2).
pub fn invalid(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 2,
        error: e.into(),
    }
}

fn main() {
    // A closed pipe (`unbloat status | head`) ends the program quietly, as for any Unix tool.
    // SAFETY: restoring the default signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(a) => shape::plan(&a),
        Command::Start(a) => shape::start(&a),
        Command::Stop(a) => shape::stop(&a),
        Command::Status(a) => shape::status(&a),
        Command::SetRate(a) => shape::set_rate(&a),
        Command::Recover(a) => shape::recover(&a),
        Command::Confirm(a) => shape::confirm(&a),
        Command::Daemon(a) => daemon::daemon(&a),
        Command::Reload(a) => daemon::reload(&a),
        Command::Config(ConfigCommand::Check(a)) => shape::config_check(&a),
        Command::Config(ConfigCommand::ImportSqm(a)) => import::import_sqm(&a),
        Command::Test(a) => measure::test(&a),
        Command::Tune(a) => tune::tune(&a),
        Command::Serve(a) => unbloat_measure::run_serve(&a).map_err(Failure::from),
        Command::Autorate(a) => autorate::autorate(&a),
        Command::Plot(a) => autorate::plot_log(&a)
            .unwrap_or_else(|| unbloat_report::files::run_plot(&a).map_err(Failure::from)),
        Command::Lab(a) => lab::lab(&a),
        Command::LabHosts(a) => hosts::lab_hosts(&a),
        Command::Bench(b) => bench::bench(&b),
        Command::Completions(a) => docs::completions(&a, Cli::command()),
        Command::Man(a) => docs::man(&a, Cli::command()),
        Command::Kernel(a) => kernel::run(&a),
    };
    if let Err(f) = result {
        eprintln!("unbloat: error: {}", f.error);
        // Errors that display their source's message themselves would repeat it: print a
        // cause only when it says something new.
        let mut last = f.error.to_string();
        for cause in f.error.chain().skip(1) {
            let text = cause.to_string();
            if !last.contains(&text) {
                eprintln!("  caused by: {text}");
            }
            last = text;
        }
        std::process::exit(f.code);
    }
}
