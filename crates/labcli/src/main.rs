//! `unbloat-lab`: unbloat's test bench, beside the product and never inside it (a router must not
//! carry it). It parses arguments and glues the library crates together, as `unbloat` does:
//! one `cmd_` module per command: the emulated access network (`run`, `bench lab`, `bench
//! measure`) in [`cmd_run`], the two-host lab (`hosts`, `bench fair`, `bench household`) in
//! [`cmd_hosts`], the other benchmarks (`bench ...`) in [`cmd_bench`], [`cmd_bench_daemon`],
//! [`cmd_bench_hostile`], [`cmd_bench_networks`], [`cmd_bench_soak`] and [`cmd_bench_tune`], and
//! running a command in a kernel that has every qdisc (`kernel`) in [`cmd_kernel`]. The flags of
//! the lab crate's argument structs are in [`flags`]; what the benchmarks write at their end in
//! [`report`]. (The lab crate's `lab`, `hosts` and `bench` are the work these commands glue; the
//! `cmd_` prefix keeps the two apart by name.)
//!
//! The product it measures is the `unbloat` binary beside this one ([`product`]): the lab runs it
//! as `unbloat serve`, `unbloat test` and `unbloat start` in its namespaces. A command that needs
//! a kernel with cake re-runs this binary there, with its own arguments forwarded unchanged
//! ([`unbloat_testbed::kernel::own_argv`]).

mod cmd_bench;
mod cmd_bench_daemon;
mod cmd_bench_hostile;
mod cmd_bench_networks;
mod cmd_bench_soak;
mod cmd_bench_tune;
mod cmd_hosts;
mod cmd_kernel;
mod cmd_run;
mod durations;
mod flags;
mod report;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit status:
  0  success
  1  the run failed
  2  invalid input (a flag, a value), or no kernel here has the qdiscs: nothing was run
  3  the lab ran but could not measure everything (partial results were saved)
  128+N  stopped by signal N (the User-Mode Linux guest was stopped and its files removed)

Examples:
  unbloat-lab run                      (the emulated before/after)
  unbloat-lab run --profile vdsl2 --strategies none,sqm-piece-of-cake,unbloat --out report
  unbloat-lab hosts --out report-hosts
  unbloat-lab bench start
  unbloat-lab kernel -- tc qdisc add dev lo root cake";

#[derive(Parser)]
#[command(
    name = "unbloat-lab",
    version,
    about = "unbloat's test bench: an emulated bloated access network, and the benchmarks",
    long_about = "unbloat-lab builds an emulated bloated access network in network namespaces \
(in User-Mode Linux when this kernel lacks cake, fq_codel or netem) and compares shaping \
strategies on it, and benchmarks unbloat itself. It runs the `unbloat` binary beside it in its \
namespaces. It is a developer's tool, run as root from a source checkout; it is not packaged.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an emulated bloated access network and compare strategies on it.
    Run(cmd_run::LabCmd),
    /// Two LAN hosts behind a masquerading router, one stream against eight each way: each
    /// host's share and ping for no shaping, sqm-scripts' default and unbloat (IPv4 and IPv6).
    Hosts(cmd_hosts::LabHostsArgs),
    /// Benchmarks of unbloat itself (start, status) and of its measurements.
    #[command(subcommand)]
    Bench(cmd_bench::BenchCommand),
    /// Run a command in a kernel that has every qdisc (the host's, or User-Mode Linux).
    Kernel(cmd_kernel::KernelArgs),
}

pub use unbloat_system::exit::{invalid, Failure};
use unbloat_testbed::kernel::KernelError;

/// The product under test: `unbloat` in this binary's directory (`cargo build` and `make`
/// put both in `target/release/`), or `UNBLOAT_EXE` when set (as the lab's tests take it).
pub fn product() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("UNBLOAT_EXE") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe()?;
    let path = me.with_file_name("unbloat");
    if !path.is_file() {
        return Err(anyhow::anyhow!(
            "{} is missing: unbloat-lab runs the unbloat binary beside it \
             (`cargo build --release -p unbloat -p unbloat-lab-cli`, or `make lab`), or set UNBLOAT_EXE",
            path.display()
        ));
    }
    Ok(path)
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cmd_run::lab(&a),
        Command::Hosts(a) => cmd_hosts::lab_hosts(&a),
        Command::Bench(b) => cmd_bench::bench(&b),
        Command::Kernel(a) => cmd_kernel::run(&a),
    };
    if let Err(f) = result {
        no_kernel_is_invalid_input(f).exit("unbloat-lab");
    }
}

/// Exit status 2 rather than 1 when the cause is that no kernel here has what the run needs:
/// what the machine lacks counts as invalid input, and nothing was run.
fn no_kernel_is_invalid_input(mut f: Failure) -> Failure {
    let no_kernel = f.error.chain().any(|c| {
        c.downcast_ref::<KernelError>()
            .is_some_and(KernelError::no_kernel)
    });
    if f.code == 1 && no_kernel {
        f.code = 2;
    }
    f
}
