//! `unbloat kernel -- CMD...` (hidden): runs a command in a kernel that has every qdisc, the
//! host's when it has them, otherwise User-Mode Linux. A developer's tool: it is how the test
//! suite and the lab reach cake, fq_codel and netem on machines whose kernel lacks them.

use crate::Failure;
use clap::Args;
use std::time::Duration;
use unbloat_system::kernel::{GuestOptions, Kernel};

/// The qdiscs every part of unbloat may need.
pub const ALL_QDISCS: &[&str] = &["cake", "fq_codel", "htb", "netem", "sfq", "ingress"];

#[derive(Debug, Args)]
pub struct KernelArgs {
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &KernelArgs) -> Result<(), Failure> {
    let kernel = Kernel::detect(ALL_QDISCS)?;
    eprintln!("unbloat: running in {}", kernel.describe());
    let opts = GuestOptions {
        timeout: Duration::from_secs(args.timeout),
        stream: true,
        ..GuestOptions::default()
    };
    let out = kernel.run(&args.command, &opts)?;
    if out.status != 0 {
        std::process::exit(out.status);
    }
    Ok(())
}
