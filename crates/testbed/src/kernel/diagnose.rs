//! What a User-Mode Linux boot log says went wrong, in words that name the cause and the fix
//! (pure: read by the trial boot of [`super::choice`] and by a run's crash report in
//! `uml`). Unit-tested on boot logs recorded in `fixtures/uml`.

/// What to run when no User-Mode Linux here boots.
pub const BUILD_HINT: &str =
    "build the lab's own kernel from unbloat's source tree with `make uml` \
     (scripts/uml/build: once, a few minutes; docs/kernel.md says why)";

/// Why a kernel cannot stand in, read from its trial boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootProblem {
    /// The host refused to restore the guest's FPU state: its XSAVE area is larger than this
    /// kernel hands to PTRACE_SETREGSET (AVX-512 or AMX on a UML older than 6.13).
    FpuRefused { errno: Option<i32> },
    /// It panicked or died before its init reported.
    Died { tail: String },
    /// It booted, but cake could not be put on loopback (a missing module tree, say).
    NoCake { detail: String },
    /// The trial did not end in time.
    TimedOut,
}

impl std::fmt::Display for BootProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootProblem::FpuRefused { errno } => {
                write!(
                    f,
                    "it panics at boot: this host refused to restore the guest's FPU state \
                     (ptrace set fp regs failed, errno {}){}, which is larger than that kernel \
                     hands over",
                    errno.map_or("?".to_string(), |e| e.to_string()),
                    host_xsave_note()
                )
            }
            BootProblem::Died { tail } => write!(f, "it died before its init reported:\n{tail}"),
            BootProblem::NoCake { detail } => {
                write!(f, "it boots, but cannot put cake on loopback: {detail}")
            }
            BootProblem::TimedOut => write!(f, "its trial boot did not finish in 60 s"),
        }
    }
}

/// What a trial boot shows. `rc`: the exit status the guest's command reported (`None` when the
/// guest died first); `stderr` is that command's (it adds and removes cake on loopback).
pub fn diagnose(boot_log: &str, rc: Option<i32>, stderr: &str) -> Option<BootProblem> {
    if let Some(status) = rc {
        return (status != 0).then(|| BootProblem::NoCake {
            detail: stderr.trim().to_string(),
        });
    }
    if let Some(line) = boot_log
        .lines()
        .find(|l| l.contains("ptrace set fp regs failed"))
    {
        let errno = line
            .rsplit_once("errno =")
            .and_then(|(_, n)| n.trim().parse().ok());
        return Some(BootProblem::FpuRefused { errno });
    }
    Some(BootProblem::Died {
        tail: super::tail_lines(boot_log, 12),
    })
}

/// ", and this host's XSAVE area is N bytes (avx512f, amx_tile)" from CPUID leaf 0xD.
fn host_xsave_note() -> String {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let wide: Vec<&str> = flags
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| {
            l.split_whitespace()
                .filter(|f| ["avx512f", "amx_tile"].contains(f))
                .collect()
        })
        .unwrap_or_default();
    let size = xsave_size().map_or(String::new(), |n| format!(" is {n} bytes"));
    if size.is_empty() && wide.is_empty() {
        return String::new();
    }
    let why = if wide.is_empty() {
        String::new()
    } else {
        format!(" ({})", wide.join(", "))
    };
    format!("; this host's XSAVE area{size}{why}")
}

#[cfg(target_arch = "x86_64")]
fn xsave_size() -> Option<u32> {
    // Leaf 0xD sub-leaf 0, ECX: the XSAVE area's size with every feature the CPU has (AMX's tiles
    // included, which the kernel enables on first use and counts in the size ptrace wants);
    // 0 where XSAVE is absent. CPUID exists on every x86-64 CPU.
    let leaf = std::arch::x86_64::__cpuid_count(0xD, 0);
    (leaf.ecx > 0).then_some(leaf.ecx)
}

#[cfg(not(target_arch = "x86_64"))]
fn xsave_size() -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/uml")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn the_fpu_panic_is_named_with_its_errno_and_the_host_size() {
        let problem = diagnose(&fixture("fpu-refused.log"), None, "");
        assert_eq!(problem, Some(BootProblem::FpuRefused { errno: Some(14) }));
        let text = problem.unwrap().to_string();
        assert!(
            text.contains("refused to restore the guest's FPU state"),
            "{text}"
        );
        assert!(text.contains("errno 14"), "{text}");
    }

    #[test]
    fn a_good_boot_that_took_cake_is_no_problem() {
        assert_eq!(diagnose(&fixture("good.log"), Some(0), ""), None);
    }

    #[test]
    fn a_boot_without_the_module_tree_has_no_cake() {
        let problem = diagnose(
            &fixture("good.log"),
            Some(2),
            &fixture("missing-modules.stderr"),
        );
        match problem {
            Some(BootProblem::NoCake { detail }) => {
                assert!(
                    detail.contains("Specified qdisc kind is unknown"),
                    "{detail}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn any_other_death_quotes_the_end_of_the_log() {
        let log = "Linux version 6.1\nKernel panic - not syncing: VFS: Unable to mount root fs\n";
        match diagnose(log, None, "") {
            Some(BootProblem::Died { tail }) => assert!(tail.contains("Unable to mount root")),
            other => panic!("{other:?}"),
        }
    }
}
