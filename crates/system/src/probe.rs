//! What this machine can do, found out before anything is touched.
//!
//! [`probe`] asks `tc -V` for the iproute2 version and then tries each thing for real in a
//! throw-away network namespace (`unbloat-probe-<pid>-<n>`, deleted again whatever happens): each
//! wanted qdisc on its `lo`, an IFB device, and an ingress qdisc with a `u32 match u32 0 0` filter
//! and a second one with `action mirred egress redirect` to the IFB, the exact shapes ingress
//! shaping uses. Trying is the only test that counts: a kernel may have a module that is not
//! loaded yet (the kernel loads it on demand when tc asks), or lack one that `lsmod` cannot tell
//! us about.
//!
//! [`Capabilities::missing`] turns the result into [`Missing`] items whose messages name the module
//! and what to do. Probing needs root (network namespaces).

mod backoff;
pub use backoff::{probe_backed_off, ProbeBackoff};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::runner::{Cmd, CmdOutput, RunError, Runner};

/// The names [`Capabilities::missing`] understands besides qdisc kinds.
pub const FEATURES: [&str; 4] = ["ifb", "mirred", "u32", "ctinfo"];

/// The first iproute2 whose tc knows cake's options (release tag `ss181023`).
pub const IPROUTE2_FOR_CAKE: (u32, u32, u32) = (4, 19, 0);

/// The scratch devices' names inside the throw-away namespace.
const PROBE_IFB: &str = "ifbprobe";

/// What the kernel and iproute2 here can do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// iproute2's version from `tc -V` (`iproute2-6.1.0` -> (6, 1, 0)); `None` when it printed
    /// something we do not understand.
    pub iproute2: Option<(u32, u32, u32)>,
    /// Each probed qdisc kind, and whether the kernel accepted it.
    pub qdiscs: BTreeMap<String, bool>,
    /// For a refused qdisc whose error was not "unknown kind": what tc said.
    pub qdisc_errors: BTreeMap<String, String>,
    pub ifb: bool,
    pub mirred: bool,
    pub u32: bool,
    /// The ctinfo action (classification's download), probed only when wanted.
    pub ctinfo: bool,
}

/// Something needed that is not here, with what to do about it (its `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    Qdisc {
        kind: String,
        tc_said: Option<String>,
    },
    /// Listed in `needed` but never probed: a caller's mistake, reported rather than assumed.
    NotProbed {
        name: String,
    },
    Ifb,
    Mirred,
    U32,
    Ctinfo,
    OldIproute2 {
        feature: String,
        needed: (u32, u32, u32),
        have: (u32, u32, u32),
    },
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Qdisc { kind, tc_said } => {
                let module = format!("sch_{kind}");
                write!(f, "the kernel has no {kind} qdisc ({module}): load it with `modprobe {module}`")?;
                match kind.as_str() {
                    "cake" => write!(f, ", or use --qdisc fq_codel")?,
                    "fq_codel" => write!(f, ", or use --qdisc cake")?,
                    _ => {}
                }
                match tc_said {
                    Some(said) => write!(f, " (tc said: {said})"),
                    None => Ok(()),
                }
            }
            Missing::NotProbed { name } => write!(f, "{name} was not probed"),
            Missing::Ifb => write!(
                f,
                "the kernel has no ifb device (ifb), which ingress shaping needs: load it with `modprobe ifb`"
            ),
            Missing::Mirred => write!(
                f,
                "the kernel has no mirred action (act_mirred), which ingress shaping needs: load it with `modprobe act_mirred`"
            ),
            Missing::Ctinfo => write!(
                f,
                "the kernel has no ctinfo action (act_ctinfo), which --classify needs to restore the download's class: load it with `modprobe act_ctinfo` (OpenWrt: kmod-sched-ctinfo), or leave --classify out"
            ),
            Missing::U32 => {
                write!(f, "the kernel has no u32 classifier (cls_u32): load it with `modprobe cls_u32`")
            }
            Missing::OldIproute2 { feature, needed, have } => write!(
                f,
                "iproute2 {} or newer is needed for {feature}; this is {}",
                version_text(*needed),
                version_text(*have)
            ),
        }
    }
}

fn version_text((major, minor, patch): (u32, u32, u32)) -> String {
    if patch == 0 {
        format!("{major}.{minor}")
    } else {
        format!("{major}.{minor}.{patch}")
    }
}

impl Capabilities {
    /// Whether the kernel accepted qdisc `kind` (false when it was not probed).
    pub fn has_qdisc(&self, kind: &str) -> bool {
        self.qdiscs.get(kind).copied().unwrap_or(false)
    }

    /// What of `needed` (qdisc kinds, and `ifb`, `mirred`, `u32`) is missing, in that order.
    pub fn missing(&self, needed: &[&str]) -> Vec<Missing> {
        let mut out = Vec::new();
        for &name in needed {
            let item = match name {
                "ifb" => (!self.ifb).then_some(Missing::Ifb),
                "mirred" => (!self.mirred).then_some(Missing::Mirred),
                "u32" => (!self.u32).then_some(Missing::U32),
                "ctinfo" => (!self.ctinfo).then_some(Missing::Ctinfo),
                kind => match self.qdiscs.get(kind) {
                    Some(true) => None,
                    Some(false) => Some(Missing::Qdisc {
                        kind: kind.to_string(),
                        tc_said: self.qdisc_errors.get(kind).cloned(),
                    }),
                    None => Some(Missing::NotProbed {
                        name: kind.to_string(),
                    }),
                },
            };
            out.extend(item);
        }
        if needed.contains(&"cake") {
            if let Some(have) = self.iproute2.filter(|&v| v < IPROUTE2_FOR_CAKE) {
                out.push(Missing::OldIproute2 {
                    feature: "cake".into(),
                    needed: IPROUTE2_FOR_CAKE,
                    have,
                });
            }
        }
        out
    }
}

/// Why probing could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("`tc -V` failed (status {status}): {stderr}")]
    TcVersion { status: i32, stderr: String },
    #[error("cannot create the throw-away network namespace {name} for probing: {}{}", .stderr.trim(), if *.root { "" } else { " (probing needs root)" })]
    Namespace {
        name: String,
        stderr: String,
        root: bool,
    },
    #[error("probing left {what} in the namespace {name} and could not remove it: {}", .stderr.trim())]
    Cleanup {
        name: String,
        what: String,
        stderr: String,
    },
}

/// The qdisc kinds among `names` (everything but [`FEATURES`]).
pub fn qdisc_kinds<'a>(names: &[&'a str]) -> Vec<&'a str> {
    names
        .iter()
        .copied()
        .filter(|n| !FEATURES.contains(n))
        .collect()
}

/// Probes the iproute2 version, the `wanted` qdisc kinds, ifb, u32 and mirred (see the module doc).
pub fn probe(runner: &dyn Runner, wanted: &[&str]) -> Result<Capabilities, ProbeError> {
    let version = runner.run(&Cmd::tc(["-V"]))?;
    if !version.success() {
        return Err(ProbeError::TcVersion {
            status: version.status,
            stderr: version.stderr,
        });
    }
    let mut caps = Capabilities {
        iproute2: parse_iproute2_version(&version.stdout),
        ..Capabilities::default()
    };
    let ns = ScratchNetns::create(runner)?;
    let result = probe_in(runner, ns.name(), wanted, &mut caps);
    ns.delete();
    result.map(|()| caps)
}

fn probe_in(
    runner: &dyn Runner,
    ns: &str,
    wanted: &[&str],
    caps: &mut Capabilities,
) -> Result<(), ProbeError> {
    let tc = |args: &[&str]| runner.run(&Cmd::tc(["-n", ns]).args(args.iter().copied()));
    let mut kinds = qdisc_kinds(wanted);
    // The filter probes below need the ingress qdisc.
    if !kinds.contains(&"ingress") {
        kinds.push("ingress");
    }
    for kind in kinds {
        let (add, del): (Vec<&str>, Vec<&str>) = match kind {
            "ingress" | "clsact" => (vec![kind], vec![kind]),
            // tbf refuses to exist without its three parameters.
            "tbf" => (
                vec![
                    "root", "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms",
                ],
                vec!["root"],
            ),
            _ => (vec!["root", kind], vec!["root"]),
        };
        let out = tc(&[&["qdisc", "add", "dev", "lo"][..], &add].concat())?;
        caps.qdiscs.insert(kind.to_string(), out.success());
        if out.success() {
            if kind != "ingress" {
                check_cleanup(
                    ns,
                    &format!("a {kind} qdisc"),
                    tc(&[&["qdisc", "del", "dev", "lo"][..], &del].concat())?,
                )?;
            }
        } else if !is_unknown_kind(&out.stderr) {
            caps.qdisc_errors
                .insert(kind.to_string(), out.stderr.trim().to_string());
        }
    }
    caps.ifb = runner
        .run(&Cmd::ip([
            "-n", ns, "link", "add", PROBE_IFB, "type", "ifb",
        ]))?
        .success();
    if caps.has_qdisc("ingress") {
        let filter = [
            "filter", "add", "dev", "lo", "parent", "ffff:", "protocol", "all",
        ];
        caps.u32 = tc(&[
            &filter[..],
            &["prio", "10", "u32", "match", "u32", "0", "0"],
        ]
        .concat())?
        .success();
        let target = if caps.ifb { PROBE_IFB } else { "lo" };
        let mirred = [
            "prio", "20", "u32", "match", "u32", "0", "0", "action", "mirred", "egress",
            "redirect", "dev", target,
        ];
        caps.mirred = caps.u32 && tc(&[&filter[..], &mirred].concat())?.success();
        if wanted.contains(&"ctinfo") {
            let ctinfo = [
                "prio",
                "30",
                "u32",
                "match",
                "u32",
                "0",
                "0",
                "action",
                "ctinfo",
                "dscp",
                "0xfc000000",
                "0x01000000",
            ];
            caps.ctinfo = caps.u32 && tc(&[&filter[..], &ctinfo].concat())?.success();
        }
    }
    Ok(())
}

fn is_unknown_kind(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    s.contains("kind is unknown") || s.contains("unknown qdisc")
}

fn check_cleanup(ns: &str, what: &str, out: CmdOutput) -> Result<(), ProbeError> {
    if out.success() {
        Ok(())
    } else {
        Err(ProbeError::Cleanup {
            name: ns.to_string(),
            what: what.to_string(),
            stderr: out.stderr,
        })
    }
}

/// `tc utility, iproute2-6.1.0, libbpf 1.1.2` -> (6, 1, 0). Before 5.8 releases were named by date
/// (`iproute2-ss181023`); those map to the release of that date or the newest one before it.
pub fn parse_iproute2_version(text: &str) -> Option<(u32, u32, u32)> {
    let rest = &text[text.find("iproute2-")? + "iproute2-".len()..];
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    if let Some(date) = word.strip_prefix("ss") {
        let date: u32 = date.parse().ok()?;
        // Release tags by snapshot date (YYMMDD), from iproute2's history.
        const SNAPSHOTS: [(u32, (u32, u32, u32)); 4] = [
            (161212, (4, 9, 0)),
            (180129, (4, 15, 0)),
            (181023, (4, 19, 0)),
            (190107, (4, 20, 0)),
        ];
        return Some(
            SNAPSHOTS
                .iter()
                .rev()
                .find(|(d, _)| *d <= date)
                .map_or((4, 0, 0), |(_, v)| *v),
        );
    }
    let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// A network namespace made for probing; [`ScratchNetns::delete`] (or drop) removes it and, with
/// it, every device and qdisc made inside.
pub struct ScratchNetns<'r> {
    runner: &'r dyn Runner,
    name: String,
    deleted: bool,
}

impl<'r> ScratchNetns<'r> {
    /// Creates `unbloat-probe-<pid>-<n>`.
    pub fn create(runner: &'r dyn Runner) -> Result<ScratchNetns<'r>, ProbeError> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "unbloat-probe-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let out = runner.run(&Cmd::ip(["netns", "add", &name]))?;
        if !out.success() {
            return Err(ProbeError::Namespace {
                name,
                stderr: out.stderr,
                root: crate::runner::is_root(),
            });
        }
        Ok(ScratchNetns {
            runner,
            name,
            deleted: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Deletes the namespace. Best effort: there is nothing better to do if `ip` cannot, and the
    /// probe's answer does not depend on it.
    pub fn delete(mut self) {
        self.delete_now();
    }

    fn delete_now(&mut self) {
        if !self.deleted {
            self.deleted = true;
            let _ = self.runner.run(&Cmd::ip(["netns", "del", &self.name]));
        }
    }
}

impl Drop for ScratchNetns<'_> {
    fn drop(&mut self) {
        self.delete_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{RecordingRunner, SystemRunner};

    const UNKNOWN: &str = "Error: Specified qdisc kind is unknown.\n";

    fn has(c: &Cmd, word: &str) -> bool {
        c.args.iter().any(|a| a == word)
    }

    /// A kernel like this machine's: htb and ingress, no cake, no fq_codel.
    fn kernel_without_cake() -> RecordingRunner {
        RecordingRunner::new()
            .stdout_when(
                |c| c.args == ["-V"],
                "tc utility, iproute2-6.1.0, libbpf 1.1.2\n",
            )
            .fail_when(
                |c| has(c, "add") && (has(c, "cake") || has(c, "fq_codel")),
                2,
                UNKNOWN,
            )
    }

    #[test]
    fn a_kernel_without_cake_is_seen_as_such_and_the_namespace_is_removed() {
        let r = kernel_without_cake();
        let caps = probe(&r, &["cake", "fq_codel", "htb"]).unwrap();
        assert_eq!(caps.iproute2, Some((6, 1, 0)));
        let kinds: Vec<(&str, bool)> = caps.qdiscs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            kinds,
            [
                ("cake", false),
                ("fq_codel", false),
                ("htb", true),
                ("ingress", true)
            ]
        );
        assert!(
            caps.qdisc_errors.is_empty(),
            "unknown kinds are not errors: {:?}",
            caps.qdisc_errors
        );
        assert!(caps.ifb && caps.u32 && caps.mirred);
        let lines = r.lines();
        let ns = lines[1].strip_prefix("ip netns add ").unwrap().to_string();
        assert!(
            ns.starts_with(&format!("unbloat-probe-{}-", std::process::id())),
            "{ns}"
        );
        assert_eq!(lines.last().unwrap(), &format!("ip netns del {ns}"));
        assert!(lines.contains(&format!("tc -n {ns} qdisc add dev lo root htb")));
        assert!(lines.contains(&format!("tc -n {ns} qdisc del dev lo root")));
        assert!(lines.contains(&format!("ip -n {ns} link add ifbprobe type ifb")));
        assert!(lines.contains(&format!(
            "tc -n {ns} filter add dev lo parent ffff: protocol all prio 20 u32 match u32 0 0 action mirred egress redirect dev ifbprobe"
        )));
        // Every command but the first two and the last ran inside the namespace.
        assert!(
            lines[2..lines.len() - 1]
                .iter()
                .all(|l| l.contains(&format!(" -n {ns} "))),
            "{lines:#?}"
        );
        assert_eq!(
            caps.missing(&["cake", "htb", "ifb", "mirred", "u32"]).iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["the kernel has no cake qdisc (sch_cake): load it with `modprobe sch_cake`, or use --qdisc fq_codel"]
        );
    }

    #[test]
    fn missing_features_are_named_with_their_modules() {
        let r = kernel_without_cake()
            .fail_when(
                |c| has(c, "ifb") && c.program == "ip",
                2,
                "Error: Unknown device type.\n",
            )
            .fail_when(|c| has(c, "mirred"), 2, "action \"mirred\" is unknown\n")
            .fail_when(
                |c| has(c, "tbf"),
                1,
                "RTNETLINK answers: Operation not permitted\n",
            );
        let caps = probe(&r, &["tbf", "htb"]).unwrap();
        assert!(!caps.ifb && caps.u32 && !caps.mirred);
        assert!(
            r.lines()
                .iter()
                .any(|l| l.ends_with("mirred egress redirect dev lo")),
            "no ifb: redirect to lo"
        );
        let missing: Vec<String> = caps
            .missing(&["tbf", "htb", "ifb", "mirred", "netem"])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            missing,
            [
                "the kernel has no tbf qdisc (sch_tbf): load it with `modprobe sch_tbf` (tc said: RTNETLINK answers: Operation not permitted)",
                "the kernel has no ifb device (ifb), which ingress shaping needs: load it with `modprobe ifb`",
                "the kernel has no mirred action (act_mirred), which ingress shaping needs: load it with `modprobe act_mirred`",
                "netem was not probed",
            ]
        );
    }

    #[test]
    fn an_old_iproute2_is_named_for_cake() {
        let caps = Capabilities {
            iproute2: parse_iproute2_version("tc utility, iproute2-ss161212"),
            qdiscs: [("cake".to_string(), true)].into(),
            ..Capabilities::default()
        };
        let missing: Vec<String> = caps
            .missing(&["cake"])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            missing,
            ["iproute2 4.19 or newer is needed for cake; this is 4.9"]
        );
        assert!(caps
            .missing(&["htb"])
            .iter()
            .all(|m| !matches!(m, Missing::OldIproute2 { .. })));
    }

    #[test]
    fn iproute2_versions_parse_in_both_styles() {
        assert_eq!(
            parse_iproute2_version("tc utility, iproute2-6.1.0, libbpf 1.1.2"),
            Some((6, 1, 0))
        );
        assert_eq!(
            parse_iproute2_version("tc utility, iproute2-5.10.0"),
            Some((5, 10, 0))
        );
        assert_eq!(parse_iproute2_version("tc utility, iproute2-v6.7"), None);
        assert_eq!(
            parse_iproute2_version("tc utility, iproute2-ss181023"),
            Some((4, 19, 0))
        );
        assert_eq!(
            parse_iproute2_version("tc utility, iproute2-ss181022"),
            Some((4, 15, 0))
        );
        assert_eq!(
            parse_iproute2_version("tc utility, iproute2-ss150210"),
            Some((4, 0, 0))
        );
        assert_eq!(parse_iproute2_version("busybox tc"), None);
    }

    #[test]
    fn probe_errors_say_what_failed_and_leave_nothing_behind() {
        let r = RecordingRunner::new().fail_when(
            |c| c.args.first().is_some_and(|a| a == "netns") && has(c, "add"),
            1,
            "mkdir /run/netns failed: Permission denied\n",
        );
        let err = probe(&r, &["cake"]).unwrap_err().to_string();
        assert!(
            err.contains("cannot create the throw-away network namespace unbloat-probe-"),
            "{err}"
        );
        assert!(err.contains("Permission denied"), "{err}");
        let err = probe(&RecordingRunner::new().missing_program("tc"), &["cake"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`tc`") && err.contains("iproute2"), "{err}");
        // A qdisc that was added but cannot be removed again is an error, and the namespace goes.
        let r = kernel_without_cake().fail_when(
            |c| has(c, "del") && c.program == "tc",
            2,
            "Error: busy\n",
        );
        assert!(matches!(
            probe(&r, &["htb"]),
            Err(ProbeError::Cleanup { .. })
        ));
        assert!(r
            .lines()
            .last()
            .unwrap()
            .starts_with("ip netns del unbloat-probe-"));
    }

    /// This machine's kernel: the probe must agree with a plain `tc qdisc add` in a namespace of
    /// our own, whichever way it goes (this host lacks cake and fq_codel; a user's may not).
    #[test]
    fn on_the_host_the_probe_agrees_with_tc_itself() {
        assert!(
            crate::runner::is_root(),
            "this test makes network namespaces: run it as root (make test)"
        );
        let runner = SystemRunner::plain();
        let kinds = ["cake", "fq_codel", "htb", "netem", "sfq"];
        let caps = probe(&runner, &kinds).unwrap();
        let ns = ScratchNetns::create(&runner).unwrap();
        for kind in kinds {
            let out = runner
                .run(&Cmd::tc([
                    "-n",
                    ns.name(),
                    "qdisc",
                    "replace",
                    "dev",
                    "lo",
                    "root",
                    kind,
                ]))
                .unwrap();
            assert_eq!(
                caps.has_qdisc(kind),
                out.success(),
                "{kind}: tc said {:?}",
                out.stderr
            );
        }
        let name = ns.name().to_string();
        ns.delete();
        let left = runner.run(&Cmd::ip(["netns", "list"])).unwrap().stdout;
        assert!(
            !left.contains("unbloat-probe-"),
            "probe namespaces left behind: {left} (last: {name})"
        );
    }
}
