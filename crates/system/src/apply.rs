//! Start and stop, atomically: a start either fully applies and verifies, or leaves the interface
//! exactly as it was; a stop removes exactly what a start created.
//!
//! This module knows nothing about qdiscs. The caller hands it an [`ApplyRequest`]: the commands
//! that build the setup and those that remove it (rendered by the pure planner), what the kernel
//! must have for them, and a verifier that compares the live `tc -j` output with the plan. The
//! sequence of a start:
//!
//! 1. lock the interface; check that it exists;
//! 2. if the same script is already applied and still verifies: nothing to do (idempotent);
//! 3. probe the kernel for every qdisc and feature; snapshot the device's qdiscs and whether the
//!    IFB exists; refuse a root or ingress qdisc, or an IFB, that unbloat did not create (it
//!    would be destroyed by a replace);
//! 4. remove the previous unbloat setup, run the new commands; read the kernel's state back and
//!    verify it;
//! 5. on any failure: remove what was created, re-apply the previous setup if there was one, and
//!    check that the device's snapshot is what it was before, then report the failing command and
//!    tc's own message; on success, record what was created under the run directory.

use crate::lock::{IfaceLock, LockError};
use crate::probe::{probe, Missing, ProbeError};
use crate::runner::{Cmd, CmdOutput, RunError, Runner};
use crate::snapshot::{link_exists, link_names, summary, Snapshot};
use crate::state::{
    now_unix, Created, ShapedState, StateDir, StateError, StoredCmd, STATE_VERSION,
};
use unbloat_shaper::script::Script;
use unbloat_shaper::tcjson::{IfbTexts, LiveTexts};
use unbloat_units::IfName;

/// Compares the live state with the plan and returns what differs, one line per mismatch.
pub type Verifier<'a> = &'a dyn Fn(&LiveTexts) -> Vec<String>;

/// Everything a start needs, prepared by the caller from a plan.
pub struct ApplyRequest<'a> {
    pub iface: String,
    /// The IFB the plan creates, if it shapes ingress.
    pub ifb: Option<String>,
    /// Qdisc kinds and features (`ifb`, `mirred`, `u32`) the commands need.
    pub needs: Vec<&'a str>,
    pub apply: Vec<Cmd>,
    pub teardown: Vec<Cmd>,
    /// The script as `unbloat plan` prints it (compared for idempotence, kept in the record).
    pub script: String,
    pub options: serde_json::Value,
    pub verify: Verifier<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// The setup was applied and verified; `replaced` says whether an earlier unbloat setup was
    /// removed first.
    Applied { replaced: bool },
    /// The same setup was already in place and still verified: nothing was changed.
    Unchanged,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("there is no network interface {iface} here (interfaces: {}); check the name with `ip link`", .known.join(", "))]
    NoSuchInterface { iface: String, known: Vec<String> },
    #[error("this kernel cannot do what was asked:\n  - {}", .0.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("\n  - "))]
    Missing(Vec<Missing>),
    #[error("{iface} already has {what}, which unbloat did not create; remove it first (`tc qdisc del dev {iface} {place}`) if unbloat should replace it")]
    Foreign {
        iface: String,
        what: String,
        place: &'static str,
    },
    #[error("the device {ifb} already exists and unbloat did not create it; remove it (`ip link del {ifb}`) or shape another interface")]
    ForeignIfb { ifb: String },
    #[error("`{command}` failed: {}\n{rollback}", .message.trim())]
    CommandFailed {
        command: String,
        message: String,
        rollback: Rollback,
    },
    #[error("the kernel does not hold what was asked:\n  - {}\n{rollback}", .mismatches.join("\n  - "))]
    Verify {
        mismatches: Vec<String>,
        rollback: Rollback,
    },
    #[error("{iface} is not shaped by unbloat (there is no record of it in {dir}); `unbloat status {iface}` shows what is there")]
    NotShaped { iface: String, dir: String },
    #[error("stopping {iface} did not remove everything:\n  - {}", .0.join("\n  - "), iface = .1)]
    StopIncomplete(Vec<String>, String),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

/// How a failed start was undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollback {
    /// Everything is as it was before the start (checked against the snapshot).
    Restored,
    /// Something could not be put back; the text says what differs.
    Incomplete(String),
}

impl std::fmt::Display for Rollback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rollback::Restored => {
                write!(f, "nothing was changed: the interface is exactly as it was")
            }
            Rollback::Incomplete(why) => write!(
                f,
                "ROLLBACK INCOMPLETE, the interface is not as it was: {why}"
            ),
        }
    }
}

/// Starts, stops and reads shaping through one [`Runner`], with records in one [`StateDir`].
pub struct Shaper<'r> {
    pub runner: &'r dyn Runner,
    pub state: StateDir,
}

impl<'r> Shaper<'r> {
    pub fn new(runner: &'r dyn Runner, state: StateDir) -> Shaper<'r> {
        Shaper { runner, state }
    }

    /// Checks that `iface` exists, naming the ones that do when it does not.
    pub fn check_interface(&self, iface: &str) -> Result<(), ApplyError> {
        if link_exists(self.runner, iface)? {
            return Ok(());
        }
        Err(ApplyError::NoSuchInterface {
            iface: iface.to_string(),
            known: link_names(self.runner)?,
        })
    }

    pub fn start(&self, req: &ApplyRequest) -> Result<StartOutcome, ApplyError> {
        let _lock = IfaceLock::acquire(self.state.path(), &req.iface)?;
        self.check_interface(&req.iface)?;
        let previous = self.state.load(&req.iface)?;
        // A setup that is in place and verifies proves the kernel has what it needs: the
        // idempotent start (a hotplug script's, say) skips the probe's throw-away namespace.
        if let Some(prev) = &previous {
            if prev.script == req.script
                && (req.verify)(&self.read_live(&req.iface, req.ifb.as_deref())?).is_empty()
            {
                return Ok(StartOutcome::Unchanged);
            }
        }
        let caps = probe(self.runner, &req.needs)?;
        let missing = caps.missing(&req.needs);
        if !missing.is_empty() {
            return Err(ApplyError::Missing(missing));
        }
        let before = Snapshot::take(self.runner, &req.iface, req.ifb.as_deref())?;
        if previous.is_none() {
            self.refuse_foreign(req, &before)?;
        }
        let prev_cmds = |f: fn(&ShapedState) -> &Vec<StoredCmd>| -> Vec<Cmd> {
            previous
                .as_ref()
                .map(|p| f(p).iter().map(Cmd::from).collect())
                .unwrap_or_default()
        };
        let (prev_apply, prev_teardown) = (prev_cmds(|p| &p.apply), prev_cmds(|p| &p.teardown));
        let undo = |extra_teardown: &[Cmd]| {
            self.undo(
                extra_teardown,
                &prev_apply,
                &req.iface,
                req.ifb.as_deref(),
                &before,
            )
        };

        // Remove the previous setup: its teardown only deletes what it created.
        for cmd in &prev_teardown {
            self.runner.run(cmd)?;
        }
        for cmd in &req.apply {
            let out = self.runner.run(cmd)?;
            if !out.success() {
                let rollback = undo(&req.teardown);
                return Err(ApplyError::CommandFailed {
                    command: failing_command(cmd, &out),
                    message: tc_message(&out.stderr),
                    rollback,
                });
            }
        }
        let mismatches = (req.verify)(&self.read_live(&req.iface, req.ifb.as_deref())?);
        if !mismatches.is_empty() {
            let rollback = undo(&req.teardown);
            return Err(ApplyError::Verify {
                mismatches,
                rollback,
            });
        }
        let created = Created {
            root_qdisc: req
                .teardown
                .iter()
                .any(|c| c.args.iter().any(|a| a == "root")),
            ingress_qdisc: req
                .teardown
                .iter()
                .any(|c| c.args.iter().any(|a| a == "ingress")),
            ifb_device: req.ifb.clone(),
        };
        self.state.save(&ShapedState {
            version: STATE_VERSION,
            iface: req.iface.clone(),
            created,
            options: req.options.clone(),
            script: req.script.clone(),
            apply: req.apply.iter().map(StoredCmd::from).collect(),
            teardown: req.teardown.iter().map(StoredCmd::from).collect(),
            applied_at_unix: now_unix(),
        })?;
        Ok(StartOutcome::Applied {
            replaced: previous.is_some(),
        })
    }

    fn refuse_foreign(&self, req: &ApplyRequest, before: &Snapshot) -> Result<(), ApplyError> {
        if let Some(root) = before.custom_root() {
            return Err(ApplyError::Foreign {
                iface: req.iface.clone(),
                what: format!("a root qdisc ({})", summary(root)),
                place: "root",
            });
        }
        if req.ifb.is_some() {
            if let Some(ing) = before.ingress() {
                return Err(ApplyError::Foreign {
                    iface: req.iface.clone(),
                    what: format!("an ingress qdisc ({})", summary(ing)),
                    place: "ingress",
                });
            }
        }
        if before.ifb_exists {
            return Err(ApplyError::ForeignIfb {
                ifb: req.ifb.clone().unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// Removes what a failed start created, re-applies the previous setup, and checks the result
    /// against the snapshot taken before anything was touched.
    fn undo(
        &self,
        teardown: &[Cmd],
        prev_apply: &[Cmd],
        iface: &str,
        ifb: Option<&str>,
        before: &Snapshot,
    ) -> Rollback {
        let mut problems = vec![];
        // Errors here are expected ("nothing to delete" for steps that never ran); the snapshot
        // comparison below is what tells whether the rollback worked.
        for cmd in teardown {
            let _ = self.runner.run(cmd);
        }
        for cmd in prev_apply {
            match self.runner.run(cmd) {
                Ok(out) if out.success() => {}
                Ok(out) => problems.push(format!(
                    "re-applying the previous setup: `{}`: {}",
                    cmd.display(),
                    out.stderr.trim()
                )),
                Err(e) => problems.push(e.to_string()),
            }
        }
        match Snapshot::take(self.runner, iface, ifb) {
            Ok(after) if after == *before && problems.is_empty() => Rollback::Restored,
            Ok(after) => {
                if after != *before {
                    problems.push(before.describe_difference(&after));
                }
                Rollback::Incomplete(problems.join("; "))
            }
            Err(e) => Rollback::Incomplete(format!("cannot read the interface back: {e}")),
        }
    }

    /// Removes exactly what `start` created on `iface`, and its record.
    pub fn stop(&self, iface: &str) -> Result<ShapedState, ApplyError> {
        let _lock = IfaceLock::acquire(self.state.path(), iface)?;
        let Some(prev) = self.state.load(iface)? else {
            return Err(ApplyError::NotShaped {
                iface: iface.to_string(),
                dir: self.state.path().display().to_string(),
            });
        };
        let mut problems = vec![];
        for stored in &prev.teardown {
            let cmd = Cmd::from(stored);
            let out = self.runner.run(&cmd)?;
            // Already gone (the device was removed, someone deleted the qdisc) is what stop wants.
            if !out.success() && !already_gone(&out.stderr) {
                problems.push(format!("`{}`: {}", cmd.display(), out.stderr.trim()));
            }
        }
        if !problems.is_empty() {
            return Err(ApplyError::StopIncomplete(problems, iface.to_string()));
        }
        self.state.remove(iface)?;
        Ok(prev)
    }

    /// Reads what the kernel holds for `iface` and its IFB (`tc -j -s -d`), in the shape
    /// [`LiveTexts`] documents.
    pub fn read_live(&self, iface: &str, ifb: Option<&str>) -> Result<LiveTexts, RunError> {
        let tc = |args: &[&str]| -> Result<String, RunError> {
            let out = self.runner.run(&Cmd::tc(args.iter().copied()))?;
            // A device without classes or filters makes tc fail or print nothing: both "none".
            Ok(if out.success() {
                out.stdout
            } else {
                String::new()
            })
        };
        let show = |what: &str, dev: &str| tc(&["-j", "-s", "-d", what, "show", "dev", dev]);
        let ifb = match ifb.map(|d| (d, d.parse::<IfName>())) {
            Some((d, Ok(name))) if link_exists(self.runner, d)? => Some(IfbTexts {
                name,
                qdisc: show("qdisc", d)?,
                class: show("class", d)?,
                filter: show("filter", d)?,
            }),
            _ => None,
        };
        Ok(LiveTexts {
            qdisc: show("qdisc", iface)?,
            class: show("class", iface)?,
            filter: show("filter", iface)?,
            filter_ingress: tc(&["-j", "-s", "-d", "filter", "show", "dev", iface, "ingress"])?,
            ifb,
        })
    }
}

/// A plan's script as the commands that run it: the `ip` steps, then one `tc -batch -` with the
/// batch text on its standard input (fast, and one process), then the `ip` steps after it.
pub fn script_commands(script: &Script) -> Vec<Cmd> {
    let ip = |argv: &Vec<String>| Cmd::ip(argv.iter().map(String::as_str));
    let mut cmds: Vec<Cmd> = script.ip_before.iter().map(ip).collect();
    if !script.tc_batch.is_empty() {
        cmds.push(Cmd::tc(["-batch", "-"]).stdin(script.batch_text()));
    }
    cmds.extend(script.ip_after.iter().map(ip));
    cmds
}

/// The same, each `tc` command its own process: a teardown must go on past a step that has
/// nothing to remove (a `tc -batch` stops at its first failure, leaving the rest in place).
pub fn script_commands_one_by_one(script: &Script) -> Vec<Cmd> {
    let ip = |argv: &Vec<String>| Cmd::ip(argv.iter().map(String::as_str));
    let mut cmds: Vec<Cmd> = script.ip_before.iter().map(ip).collect();
    cmds.extend(
        script
            .tc_batch
            .iter()
            .map(|argv| Cmd::tc(argv.iter().map(String::as_str))),
    );
    cmds.extend(script.ip_after.iter().map(ip));
    cmds
}

/// tc's own words, without its "Command failed -:N" line (the command is named instead).
fn tc_message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().starts_with("Command failed -:"))
        .collect();
    lines.join("\n")
}

/// Names the failing command; for a `tc -batch`, the line tc reports ("Command failed -:N").
fn failing_command(cmd: &Cmd, out: &CmdOutput) -> String {
    if let (Some(stdin), true) = (&cmd.stdin, cmd.args.iter().any(|a| a == "-batch")) {
        let line_no = out
            .stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Command failed -:"))
            .and_then(|n| n.trim().parse::<usize>().ok());
        if let Some(line) = line_no.and_then(|n| stdin.lines().nth(n.saturating_sub(1))) {
            return format!("tc {line}");
        }
    }
    cmd.display()
}

fn already_gone(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    [
        "cannot find device",
        "cannot find specified qdisc",
        "no such file",
        "handle of zero",
        "invalid handle",
        "does not exist",
    ]
    .iter()
    .any(|m| s.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_line_of_a_batch_is_named() {
        let cmd =
            Cmd::tc(["-batch", "-"]).stdin("qdisc add dev x root cake\nqdisc add dev x ingress\n");
        let out = CmdOutput::failed(1, "Error: Exclusivity flag on.\nCommand failed -:2\n");
        assert_eq!(failing_command(&cmd, &out), "tc qdisc add dev x ingress");
        assert_eq!(tc_message(&out.stderr), "Error: Exclusivity flag on.");
    }

    #[test]
    fn already_removed_things_do_not_fail_a_stop() {
        assert!(already_gone("Cannot find device \"ifb4eth0\""));
        assert!(already_gone(
            "Error: Cannot delete qdisc with handle of zero."
        ));
        assert!(!already_gone("RTNETLINK answers: Operation not permitted"));
    }
}
