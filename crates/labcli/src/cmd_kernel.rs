//! `unbloat-lab kernel -- CMD...`: runs a command in a kernel that has every qdisc, the
//! host's when it has them, otherwise User-Mode Linux. A developer's tool: it is how the test
//! suite and the lab reach cake, fq_codel and netem on machines whose kernel lacks them.

use crate::Failure;
use anyhow::{anyhow, bail};
use clap::Args;
use std::time::Duration;
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_testbed::kernel::{in_guest, own_argv, GuestOptions, Kernel};

/// The qdiscs every part of unbloat may need.
pub const ALL_QDISCS: &[&str] = &["cake", "fq_codel", "htb", "netem", "sfq", "ingress"];

#[derive(Debug, Args)]
pub struct KernelArgs {
    /// Give up after this long (10m, 600s; a bare number is seconds), 1s to a day.
    #[arg(long, value_name = "D", default_value = "600s", value_parser = crate::durations::kernel_timeout)]
    pub timeout: unbloat_units::Time,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &KernelArgs) -> Result<(), Failure> {
    let kernel = Kernel::detect(ALL_QDISCS)?;
    eprintln!("unbloat-lab: running in {}", kernel.describe());
    let opts = GuestOptions {
        timeout: args.timeout.as_duration(),
        stream: true,
        ..GuestOptions::default()
    };
    let out = kernel.run(&args.command, &opts)?;
    if out.status != 0 {
        std::process::exit(out.status);
    }
    Ok(())
}

/// When this kernel lacks one of `needs`: runs this very command again in User-Mode Linux, its
/// own arguments forwarded unchanged, then `--inside` (the copy's marker), then `extra` (what the
/// caller found out here and the copy must not look for again; each caller says why), its output
/// streamed, and returns true (done there); false when the caller should go on here (this
/// kernel has them, or it is the guest already).
pub fn rerun_in_real_kernel(
    needs: &[&str],
    extra: &[String],
    timeout: Duration,
) -> Result<bool, Failure> {
    if in_guest() {
        return Ok(false);
    }
    let kernel = Kernel::detect(needs)?;
    if kernel == Kernel::Host {
        return Ok(false);
    }
    eprintln!(
        "unbloat-lab: this kernel lacks one of {}; running in {}",
        needs.join(", "),
        kernel.describe()
    );
    let mut marked = vec!["--inside".to_string()];
    marked.extend(extra.iter().cloned());
    let argv = own_argv(&marked)?;
    let opts = GuestOptions {
        timeout,
        stream: true,
        ..GuestOptions::default()
    };
    let out = kernel.run(&argv, &opts)?;
    if out.status != 0 {
        return Err(anyhow!("failed in {} (status {})", kernel.describe(), out.status).into());
    }
    Ok(true)
}

/// Moves this process into a network namespace of its own: everything it creates there
/// disappears with it, whatever happens. A mount namespace of its own too, with sysfs mounted
/// again, so `/sys/class/net` shows this namespace's devices (sqm-scripts looks there).
pub fn private_netns() -> anyhow::Result<()> {
    // SAFETY: unshare only changes this thread's namespace membership; no memory is involved.
    if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } != 0 {
        bail!(
            "cannot create a private network namespace: {} (benchmarks need root)",
            std::io::Error::last_os_error()
        );
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (root, sys, sysfs) = (c("/"), c("/sys"), c("sysfs"));
    // SAFETY: plain mount(2) calls with valid NUL-terminated strings; the mounts stay in this
    // process's own mount namespace (made private first, so nothing propagates out).
    let ok = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
            && libc::mount(
                sysfs.as_ptr(),
                sys.as_ptr(),
                sysfs.as_ptr(),
                0,
                std::ptr::null(),
            ) == 0
    };
    if !ok {
        bail!(
            "cannot mount sysfs for the private namespace: {}",
            std::io::Error::last_os_error()
        );
    }
    let runner = SystemRunner::from_env();
    runner.run(&Cmd::ip(["link", "set", "lo", "up"]))?;
    Ok(())
}
