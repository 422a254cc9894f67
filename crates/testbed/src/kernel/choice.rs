//! Which User-Mode Linux kernel to use, and whether it boots on this host.
//!
//! Two kinds are looked for, in this order, at fixed paths only (never `$PATH`, never a path from
//! the environment or the development tree: the kernel runs our commands as root):
//! 1. the kernel `make uml` builds (scripts/uml/build): every qdisc, NAT and conntrack built in
//!    but cake, a module beside it, at [`BUILT_KERNEL`];
//! 2. Debian's `user-mode-linux` package: `/usr/bin/linux.uml`, net/sched as modules.
//!
//! Each must be root's and writable by nobody else, down every directory of its path. The first
//! that passes a trial boot (an init that puts cake on loopback and takes it off: about two
//! seconds) is chosen, once per process. Debian's 6.1 and 6.12 panic before init on hosts whose
//! XSAVE area is larger than they hand to ptrace (AMX): [`diagnose`] reads that from the boot log,
//! and the error names the cause and the command that fixes it, never minutes later.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::diagnose::{diagnose, BootProblem, BUILD_HINT};

use super::signals::SignalGuard;
use super::uml::Uml;
use super::{GuestOptions, KernelError};
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_system::trust::trusted;

/// Where `make uml` (scripts/uml/build) installs the lab's own kernel, and its module tree
/// (`<version>/`, sch_cake alone: a test takes it away to see a kernel without cake).
pub const BUILT_KERNEL: &str = "/var/cache/unbloat/uml/linux";
const BUILT_MODULES: &str = "/var/cache/unbloat/uml/modules";
/// Debian's `user-mode-linux` package: the kernel and its modules.
const DEBIAN_KERNEL: &str = "/usr/bin/linux.uml";
const DEBIAN_MODULES: &str = "/usr/lib/uml/modules";
/// The chosen kernel: the first of [`BUILT_KERNEL`] and Debian's that is installed, trusted and
/// boots, or what each lacked and what to do. Tried once per process; a stop signal during a
/// trial is the outer error, and is not remembered.
pub fn choose() -> Result<Result<Uml, String>, KernelError> {
    static CHOSEN: OnceLock<Result<Uml, String>> = OnceLock::new();
    if let Some(chosen) = CHOSEN.get() {
        return Ok(chosen.clone());
    }
    let mut why = Vec::new();
    let mut chosen = None;
    for (name, found) in [
        ("the lab's own kernel", built()),
        ("Debian's user-mode-linux", debian()),
    ] {
        let uml = match found {
            Ok(uml) => uml,
            Err(e) => {
                why.push(format!("{name}: {e}"));
                continue;
            }
        };
        match trial(&uml)? {
            None => {
                chosen = Some(uml);
                break;
            }
            Some(problem) => why.push(format!(
                "{name} {} ({}): {problem}",
                uml.version,
                uml.binary.display()
            )),
        }
    }
    let result = chosen.ok_or_else(|| format!("{}; {BUILD_HINT}", why.join("; ")));
    Ok(CHOSEN.get_or_init(|| result).clone())
}

/// Boots `uml` once with a command that adds and removes cake on loopback. The run directory is
/// `unbloat-uml-trial-*`, apart from the runs' own.
fn trial(uml: &Uml) -> Result<Option<BootProblem>, KernelError> {
    let argv: Vec<String> = [
        "sh",
        "-c",
        "tc qdisc add dev lo root cake && tc qdisc del dev lo root",
    ]
    .map(String::from)
    .into();
    let opts = GuestOptions {
        mem_mb: 256,
        timeout: Duration::from_secs(60),
        ..GuestOptions::default()
    };
    // Ctrl-C during the trial ends the guest and removes its run directory, as during a run.
    let _signals = SignalGuard::install()?;
    let booted = match uml.boot(&argv, &opts, "uml-trial") {
        Ok(booted) => booted,
        Err(e @ KernelError::Interrupted { .. }) => return Err(e),
        Err(e) => {
            return Ok(Some(BootProblem::Died {
                tail: e.to_string(),
            }))
        }
    };
    if booted.timed_out {
        return Ok(Some(BootProblem::TimedOut));
    }
    Ok(diagnose(&booted.boot_log, booted.rc, &booted.stderr))
}

/// The kernel `make uml` built, with its module tree (cake alone), if both are there and trusted.
fn built() -> Result<Uml, String> {
    installed(
        BUILT_KERNEL,
        BUILT_MODULES,
        "not built",
        "build it again with `make uml`",
    )
}

/// Debian's package, if it is installed whole and trusted.
fn debian() -> Result<Uml, String> {
    installed(
        DEBIAN_KERNEL,
        DEBIAN_MODULES,
        "not installed (`apt-get install user-mode-linux`)",
        "reinstall it with `apt-get install --reinstall user-mode-linux`",
    )
}

/// The kernel at `binary` with its modules in `modules/<its version>`, if both are there and
/// trusted; else `absent` (no kernel there), or what is wrong and `fix`.
fn installed(binary: &str, modules: &str, absent: &str, fix: &str) -> Result<Uml, String> {
    let binary = PathBuf::from(binary);
    if !binary.exists() {
        return Err(absent.into());
    }
    trusted(&binary)?;
    let version = version_of(&binary)?;
    let modules = Path::new(modules).join(&version);
    if !modules.join("kernel/net/sched").is_dir() {
        return Err(format!(
            "its modules are missing ({} has no kernel/net/sched); {fix}",
            modules.display()
        ));
    }
    trusted(&modules)?;
    Ok(Uml {
        binary,
        version,
        modules: Some(modules),
    })
}

/// `linux --version`: the kernel's release, e.g. `6.1.192`.
fn version_of(binary: &Path) -> Result<String, String> {
    let out = SystemRunner::plain()
        .run(&Cmd::new(binary.display().to_string()).arg("--version"))
        .map_err(|e| e.to_string())?;
    let version = out.stdout.trim().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || ".-+_".contains(c);
    if !out.success() || version.is_empty() || !version.chars().all(plain) {
        return Err(format!(
            "`{} --version` failed (status {}): {}",
            binary.display(),
            out.status,
            out.stderr.trim()
        ));
    }
    Ok(version)
}

impl Uml {
    /// The kernel to use: installed, trusted, and shown to boot here ([`choose`]); the error says
    /// what each candidate lacked and what to do.
    pub fn find() -> Result<Uml, String> {
        choose().unwrap_or_else(|e| Err(e.to_string()))
    }

    /// `User-Mode Linux 6.1.192 (the lab's own build)`, for messages.
    pub fn describe(&self) -> String {
        let origin = if self.binary == Path::new(BUILT_KERNEL) {
            "the lab's own build"
        } else {
            "Debian's user-mode-linux"
        };
        format!("User-Mode Linux {} ({origin})", self.version)
    }
}
