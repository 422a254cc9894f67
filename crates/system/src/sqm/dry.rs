//! The commands the real sqm-scripts would run for a queue, printed instead of run: for
//! `unbloat config import-sqm --check`, which shows them beside unbloat's plan.
//!
//! sqm-scripts has no dry run, so this makes one around the unchanged scripts: [`super::install`]
//! copies its scripts (start-sqm pointed at a sqm.conf of ours, a fresh state directory), and
//! then
//! - `tc`, `ip`, `iptables`, `ip6tables` and `modprobe` are shadowed by scripts of ours, first on
//!   `PATH` and named explicitly in `TC_BINARY`, `IP_BINARY`, `IPTABLES_BINARY`,
//!   `IP6TABLES_BINARY` and `INSMOD` (defaults.sh takes them when set), which append their
//!   arguments to a log and succeed;
//! - the copies read `/sys/class/net/` and `/sys/module/` from a directory of ours instead
//!   (start-sqm refuses an interface that does not exist there, and sizes HTB's burst from its
//!   `mtu`, 1500 here), so the interface need not exist on this machine.
//!
//! Nothing reaches the kernel: every command the scripts run on the network goes through those
//! variables (checked by a test that greps the scripts). What is shown is every logged command
//! except sqm's own probes (the throw-away `SQM_IFB_*` device of `verify_qdisc`, `tc ... show`
//! reads); `start-sqm`'s exit status and its stderr say whether it got through.

use std::path::Path;
use std::process::{Command, Stdio};

/// The MTU the shadow `/sys/class/net/IFACE/mtu` reports.
pub const MTU: u32 = 1500;

/// What start-sqm did, printed instead of run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRun {
    /// `tc qdisc add dev eth1 root cake bandwidth 10000kbit ...`, in order.
    pub commands: Vec<String>,
    pub exit_status: Option<i32>,
    /// start-sqm's own messages (it logs to stderr with SQM_SYSLOG=0).
    pub stderr: String,
}

const SHIMS: &[&str] = &["tc", "ip", "iptables", "ip6tables", "modprobe"];

/// Run sqm-scripts' start-sqm from `src` (the directory with `src/start-sqm`, or an installed
/// `start-sqm`: [`super::scripts`]) for `iface` with the
/// variables `vars` (what run.sh exports, or the shell file's), in `work`, a directory this call
/// may fill (the caller removes it).
pub fn dry_run(
    src: &Path,
    work: &Path,
    iface: &str,
    vars: &[(String, String)],
) -> std::io::Result<DryRun> {
    let lib = work.join("sqm-lib");
    super::install(src, &lib)?;
    let sys = work.join("sys");
    std::fs::create_dir_all(sys.join("class/net").join(iface))?;
    std::fs::create_dir_all(sys.join("module"))?;
    std::fs::write(
        sys.join("class/net").join(iface).join("mtu"),
        format!("{MTU}\n"),
    )?;
    for entry in std::fs::read_dir(&lib)? {
        let path = entry?.path();
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let shadowed = text
            .replace("/sys/class/net/", &format!("{}/class/net/", sys.display()))
            .replace("/sys/module/", &format!("{}/module/", sys.display()));
        if shadowed != text {
            std::fs::write(&path, shadowed)?;
        }
    }
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin)?;
    let log = work.join("commands.log");
    for name in SHIMS {
        let path = bin.join(name);
        // One line per call: the program and its words, as sqm-scripts split them.
        let record = if *name == "modprobe" {
            String::new()
        } else {
            format!(
                "printf '%s' {name} >> '{log}'\nfor a in \"$@\"; do printf ' %s' \"$a\" >> '{log}'; done\nprintf '\\n' >> '{log}'\n",
                log = log.display()
            )
        };
        std::fs::write(&path, format!("#!/bin/sh\n{record}exit 0\n"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    // A shim that cannot run (a temporary directory mounted noexec) would let a PATH lookup
    // fall through to the real program: refuse before start-sqm runs at all.
    let probe = Command::new(bin.join("modprobe"))
        .stdin(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return Err(std::io::Error::other(format!(
            "cannot run the shadowing scripts in {} (a noexec temporary directory?); set TMPDIR elsewhere",
            bin.display()
        )));
    }
    let shim = |n: &str| bin.join(n).display().to_string();
    let mut cmd = Command::new("sh");
    cmd.arg(lib.join("start-sqm"))
        .current_dir(&lib)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        )
        .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("IFACE", iface)
        .env("TC_BINARY", shim("tc"))
        .env("IP_BINARY", shim("ip"))
        .env("IPTABLES_BINARY", shim("iptables"))
        .env("IP6TABLES_BINARY", shim("ip6tables"))
        .env("INSMOD", shim("modprobe"))
        .stdin(Stdio::null());
    let out = cmd.output()?;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    Ok(DryRun {
        commands: logged
            .lines()
            .filter(|l| !l.contains("SQM_IFB_") && !l.split(' ').any(|w| w == "show"))
            .map(str::to_string)
            .collect(),
        exit_status: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqm::workdir::WorkDir;
    use std::path::PathBuf;

    /// The vendored copy, third_party/sqm-scripts of this repository.
    fn source() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../third_party/sqm-scripts")
    }

    /// Every command sqm-scripts runs on the network goes through the variables the dry run
    /// sets: no script runs tc, ip or iptables by name or by a path of its own.
    #[test]
    fn sqm_dry_run_shadows_every_network_command() {
        let names = ["tc", "ip", "iptables", "ip6tables", "ethtool"];
        for entry in std::fs::read_dir(source().join("src")).expect("src") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("text");
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with('#') {
                    continue;
                }
                // The command word, after any `VAR=value` prefixes (`SILENT=1 $TC ...`).
                let first = code
                    .split_whitespace()
                    .find(|w| !w.contains('=') || w.starts_with('='))
                    .unwrap_or_default();
                let by_name = names.contains(&first)
                    || names.iter().any(|n| {
                        code.contains(&format!("$({n} ")) || code.contains(&format!("`{n} "))
                    });
                let by_path = code.contains("/sbin/tc") || code.contains("/sbin/ip");
                // eth_setup (ethtool) is never called on start.
                let eth_setup = first == "ethtool" && text.contains("eth_setup()");
                assert!(
                    !(by_name || by_path) || eth_setup,
                    "{}:{}: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
    }

    #[test]
    fn sqm_dry_run_prints_piece_of_cake_commands() {
        let work = WorkDir::new("sqm-dry-test").expect("work dir");
        let vars: Vec<(String, String)> = [
            ("SCRIPT", "piece_of_cake.qos"),
            ("UPLINK", "10000"),
            ("DOWNLINK", "85000"),
            ("LINKLAYER", "atm"),
            ("OVERHEAD", "44"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let d = dry_run(&source(), &work.0, "wan9", &vars).expect("runs");
        assert_eq!(d.exit_status, Some(0), "{}", d.stderr);
        let all = d.commands.join("\n");
        assert!(
            all.contains("tc qdisc add dev wan9 root cake bandwidth 10000kbit atm overhead 44 mpu 0 diffserv3 nat besteffort"),
            "{all}"
        );
        assert!(all.contains("tc qdisc add dev ifb4wan9 root cake bandwidth 85000kbit atm overhead 44 mpu 0 diffserv3 nat besteffort wash"), "{all}");
        assert!(all.contains("ip link add name ifb4wan9 type ifb"), "{all}");
        assert!(!all.contains("SQM_IFB_"), "{all}");
    }
}
