//! `unbloat`: smart queue management for Linux. This binary only parses arguments and glues the
//! library crates together (docs/architecture.md has the map):
//! shaping (`plan`, `start`, `stop`, `status`, `config check`) in [`shape`], `config import-sqm`
//! in [`import`], measuring (`test`,
//! `serve`, `plot`) in [`measure`], and the man pages and shell completions generated from this
//! very definition in [`docs`]. The emulated network and the benchmarks are our test bench, not
//! the product: they are the `unbloat-lab` binary (crates/labcli), which a router never carries.

#[cfg(feature = "autorate")]
mod autorate;
#[cfg(feature = "daemon")]
mod daemon;
#[cfg(feature = "docs")]
mod docs;
mod flags;
#[cfg(feature = "import")]
mod import;
#[cfg(test)]
mod invocation_tests;
mod measure;
#[cfg(feature = "plot")]
mod plot;
#[cfg(feature = "serve")]
mod serve;
mod shape;
#[cfg(feature = "tune")]
mod tune;

#[cfg(feature = "docs")]
use clap::CommandFactory;
use clap::{Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit status:
  0  success (for start: shaped and verified, or already shaped exactly as asked)
  1  the operation failed; for start, stop and set-rate, every interface was left exactly as it
     was (or the message says ROLLBACK INCOMPLETE and what differs)
  2  invalid input (a flag, a value, a config file): nothing was touched
  3  a test ran but could not measure everything (partial results were saved)

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
  unbloat autorate wwan0 --min 2mbit --base 10mbit --max 50mbit";

#[derive(Parser)]
#[command(
    name = "unbloat",
    version,
    about = "Smart queue management for Linux: remove bufferbloat, and prove it",
    long_about = "unbloat shapes a link with the kernel's own cake, or HTB + fq_codel (egress on the WAN \
device, ingress through an IFB), with link-layer compensation, per-host fairness and DSCP tins; it \
measures latency under load and grades it.\n\nEvery change is validated before the kernel is touched, read back from \
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
    #[cfg(feature = "daemon")]
    Daemon(daemon::DaemonArgs),
    /// Ask the running daemon to read its config again and apply what changed, loss-free (an
    /// invalid file is refused and the running setup stays).
    #[cfg(feature = "daemon")]
    Reload(daemon::ReloadArgs),
    /// Work with config files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Measure latency under load against a far end (`unbloat serve`, a web server, irtt, iperf3), and grade it.
    Test(measure::TestCmd),
    /// Find the link's framing and shaper rates by measuring it (saturates the link for up to
    /// --max-time; the old shaping is put back unless --apply).
    #[cfg(feature = "tune")]
    Tune(tune::TuneArgs),
    /// Keep cake's rates just under what a variable link (LTE, 5G, Starlink, busy cable)
    /// carries now, by watching its delay to reflectors and its load, until stopped.
    #[cfg(feature = "autorate")]
    Autorate(autorate::AutorateArgs),
    /// Be the far end of `unbloat test`.
    #[cfg(feature = "serve")]
    Serve(serve::ServeCmd),
    /// Redraw the plots of a results file (or draw an autorate log).
    #[cfg(feature = "plot")]
    Plot(plot::PlotCmd),
    /// Print the shell completion script for bash, zsh or fish.
    #[cfg(feature = "docs")]
    #[command(
        long_about = "Print the shell completion script for bash, zsh or fish on stdout. \
The Debian package installs all three; elsewhere, for example:\n\n  \
unbloat completions bash > /usr/share/bash-completion/completions/unbloat\n  \
unbloat completions zsh > /usr/local/share/zsh/site-functions/_unbloat\n  \
unbloat completions fish > /usr/share/fish/vendor_completions.d/unbloat.fish"
    )]
    Completions(docs::CompletionsArgs),
    /// Write the man pages (unbloat.8 and one per subcommand) into a directory.
    #[cfg(feature = "docs")]
    #[command(hide = true)]
    Man(docs::ManArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file (default /etc/unbloat/unbloat.toml) without touching anything.
    Check(shape::CheckArgs),
    /// Turn sqm-scripts' configuration (OpenWrt's /etc/config/sqm, or /etc/sqm/IFACE.iface.conf)
    /// into unbloat's TOML, with a note for every option that does not carry over as is.
    #[cfg(feature = "import")]
    ImportSqm(import::ImportSqmArgs),
}

pub use unbloat_system::exit::{invalid, Failure};

/// A closed stdout or stderr (`unbloat status | head -c1`) ends the program quietly, as for any
/// Unix tool; a closed socket does not. Both raise SIGPIPE, so the signal stays ignored (Rust's
/// default): a far end that resets an upload is then an error the test reports, with its
/// partial results, instead of a silent death (issue 36 item 13). A write to a closed stdout
/// then panics ("failed printing to stdout: Broken pipe", or the completion writer's own
/// words); that panic, and only when stdout or stderr really has lost its reader, ends the
/// program by SIGPIPE after all, from whichever thread wrote: the shell and a service manager
/// see what they always saw. Programs we run get SIGPIPE's default back (std resets it).
fn quiet_on_closed_output() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.payload_as_str().unwrap_or("");
        let broken_pipe = text.contains("Broken pipe") || text.contains("BrokenPipe");
        if broken_pipe && (lost_reader(1) || lost_reader(2)) {
            // SAFETY: signal and raise have no preconditions; the default action ends the
            // whole process, whichever thread raises it.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
            std::process::exit(128 + libc::SIGPIPE);
        }
        default(info);
    }));
}

/// Whether `fd` is a pipe or socket whose other end has gone (poll says POLLERR or POLLHUP).
fn lost_reader(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

fn main() {
    quiet_on_closed_output();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(a) => shape::plan(&a),
        Command::Start(a) => shape::start(&a),
        Command::Stop(a) => shape::stop(&a),
        Command::Status(a) => shape::status(&a),
        Command::SetRate(a) => shape::set_rate(&a),
        Command::Recover(a) => shape::recover(&a),
        Command::Confirm(a) => shape::confirm(&a),
        #[cfg(feature = "daemon")]
        Command::Daemon(a) => daemon::daemon(&a),
        #[cfg(feature = "daemon")]
        Command::Reload(a) => daemon::reload(&a),
        Command::Config(ConfigCommand::Check(a)) => shape::config_check(&a),
        #[cfg(feature = "import")]
        Command::Config(ConfigCommand::ImportSqm(a)) => import::import_sqm(&a),
        Command::Test(a) => measure::test(&a),
        #[cfg(feature = "tune")]
        Command::Tune(a) => tune::tune(&a),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::serve(&a),
        #[cfg(feature = "autorate")]
        Command::Autorate(a) => autorate::autorate(&a),
        #[cfg(feature = "plot")]
        Command::Plot(a) => plot::plot(&a),
        #[cfg(feature = "docs")]
        Command::Completions(a) => docs::completions(&a, Cli::command()),
        #[cfg(feature = "docs")]
        Command::Man(a) => docs::man(&a, Cli::command()),
    };
    if let Err(f) = result {
        f.exit("unbloat");
    }
}
