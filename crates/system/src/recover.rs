//! Finishing or undoing what a dead process left, and the undo of a failed change.
//!
//! Every command that changes shaping takes the transaction lock and then calls
//! [`Shaper::recover_locked`]: a journal found then was left by a process that died (SIGKILL, a
//! power cut, a lost SSH session). `unbloat recover` does the same on demand.
//!
//! The undo of one interface ([`Shaper::undo`]) works from data only: the journal's snapshot of
//! the device from before the change and the previous record. Whatever differs from the snapshot
//! now (the root qdisc, the ingress qdisc, the IFB or its root) was changed by the transaction,
//! since it held the lock: it is removed; then the pieces of the previous setup that are
//! missing are created again from its typed plan; and the device is compared with the snapshot.
//!
//! The throw-away namespaces of the kernel probe (`unbloat-probe-<pid>-<n>`) of a process that
//! no longer exists are deleted too.

use crate::apply::{ApplyError, Rollback, Shaper};
use crate::journal::{Entry, Journal, Phase};
use crate::lock::TxLock;
use crate::rtnl::Rtnl;
use crate::runner::Cmd;
use crate::snapshot::Snapshot;
use crate::state::ShapedState;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::transition;
use unbloat_units::IfName;

/// What a recovery found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// An interrupted change was undone: these interfaces are as they were before it.
    pub undone: Vec<IfName>,
    /// A committed change was finished (its records written).
    pub finished: Vec<IfName>,
    /// Probe namespaces of dead processes, deleted.
    pub namespaces: Vec<String>,
    /// The journal was discarded without being acted on (`--discard`).
    pub discarded: bool,
    /// A change on trial was not confirmed in time: these interfaces are as they were before it.
    pub reverted: Vec<IfName>,
}

impl Recovery {
    pub fn is_empty(&self) -> bool {
        *self == Recovery::default()
    }
}

impl Shaper<'_> {
    /// `unbloat recover`: takes the lock and recovers; `discard` forgets a journal that cannot
    /// be undone (after the user fixed the interfaces by hand).
    pub fn recover(&self, discard: bool) -> Result<Recovery, ApplyError> {
        self.begin_recovering(discard).map(|(_, _, done)| done)
    }

    /// `unbloat status` as root: recovers only when a journal is there, waiting for the lock at
    /// most `wait`. With no journal there is nothing to finish or undo, and a command that only
    /// reads must not take the lock: a change beside it (an autorate controller's) would wait.
    pub fn recover_if_needed(&self, wait: std::time::Duration) -> Result<Recovery, ApplyError> {
        // Read without the lock: a journal is replaced whole (rename), never seen half written.
        if self.state.read_journal()?.is_none() {
            return Ok(Recovery::default());
        }
        self.state.ensure()?;
        let _lock = TxLock::acquire_within(self.state.path(), wait)?;
        let rtnl = Rtnl::open()?;
        self.recover_locked(&rtnl, false)
    }

    /// The lock, after any interrupted transaction was finished or undone.
    pub(crate) fn begin(&self) -> Result<(TxLock, Rtnl), ApplyError> {
        self.begin_recovering(false)
            .map(|(lock, rtnl, _)| (lock, rtnl))
    }

    /// [`Shaper::begin`], with what the recovery did (`unbloat recover` reports it).
    pub(crate) fn begin_recovering(
        &self,
        discard: bool,
    ) -> Result<(TxLock, Rtnl, Recovery), ApplyError> {
        self.state.ensure()?;
        let lock = TxLock::acquire(self.state.path())?;
        let rtnl = Rtnl::open()?;
        let done = self.recover_locked(&rtnl, discard)?;
        Ok((lock, rtnl, done))
    }

    /// The recovery every changing command runs first, holding the lock.
    pub(crate) fn recover_locked(
        &self,
        rtnl: &Rtnl,
        discard: bool,
    ) -> Result<Recovery, ApplyError> {
        let mut done = Recovery {
            namespaces: self.dead_probe_namespaces(),
            ..Recovery::default()
        };
        let journal = match self.state.read_journal() {
            Ok(j) => j,
            Err(e) if discard => {
                self.state.remove_journal()?;
                done.discarded = true;
                eprintln!("unbloat: discarded an unreadable journal: {e}");
                return Ok(done);
            }
            Err(e) => return Err(e.into()),
        };
        let Some(journal) = journal else {
            return Ok(done);
        };
        if discard {
            self.state.remove_journal()?;
            done.discarded = true;
            return Ok(done);
        }
        let ifaces = || journal.entries.iter().map(|e| e.iface.clone()).collect();
        match journal.phase {
            Phase::Committed => {
                self.finish(&journal)?;
                done.finished = ifaces();
            }
            Phase::Pending => {
                let left = journal.left_now();
                if !left.is_zero() {
                    return Err(ApplyError::AwaitingConfirmation {
                        ifaces: journal
                            .entries
                            .iter()
                            .map(|e| e.iface.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        left: crate::deadline::whole_secs(left),
                    });
                }
                self.revert(rtnl, &journal)?;
                done.reverted = ifaces();
            }
            Phase::Applying => match self.undo(rtnl, &journal) {
                Rollback::Restored => {
                    self.state.remove_journal()?;
                    done.undone = ifaces();
                }
                Rollback::Incomplete(why) => {
                    return Err(ApplyError::RecoveryIncomplete {
                        pid: journal.pid,
                        why,
                    })
                }
            },
        }
        Ok(done)
    }

    /// Undoes a change on trial: the kernel back to the snapshots, the old records back, the
    /// journal gone.
    pub(crate) fn revert(&self, rtnl: &Rtnl, journal: &Journal) -> Result<(), ApplyError> {
        match self.undo(rtnl, journal) {
            Rollback::Restored => {
                self.restore_records(journal)?;
                self.state.remove_journal()?;
                Ok(())
            }
            Rollback::Incomplete(why) => Err(ApplyError::RecoveryIncomplete {
                pid: journal.pid,
                why,
            }),
        }
    }

    /// `unbloat confirm`: keeps the change on trial. Returns the interfaces it kept (none when
    /// nothing waits for confirmation).
    pub fn confirm(&self) -> Result<Vec<IfName>, ApplyError> {
        self.state.ensure()?;
        let _lock = crate::lock::TxLock::acquire(self.state.path())?;
        match self.state.read_journal()? {
            Some(j) if j.phase == Phase::Pending => {
                if j.left_now().is_zero() {
                    // Too late: the watchdog or the next command undoes it; say so now.
                    let rtnl = Rtnl::open()?;
                    self.revert(&rtnl, &j)?;
                    return Err(ApplyError::ConfirmedTooLate);
                }
                self.state.remove_journal()?;
                Ok(j.entries.into_iter().map(|e| e.iface).collect())
            }
            _ => Ok(vec![]),
        }
    }

    /// The watchdog of a change on trial (`unbloat confirm --revert-at`): at the deadline, undoes
    /// the change with this journal id unless it was confirmed. Returns whether it undid it.
    pub fn revert_if_unconfirmed(&self, id: &str) -> Result<bool, ApplyError> {
        loop {
            let Some(j) = self.state.read_journal()? else {
                return Ok(false);
            };
            if j.id != id || j.phase != Phase::Pending {
                return Ok(false);
            }
            if !j.left_now().is_zero() {
                std::thread::sleep(std::time::Duration::from_millis(200));
                continue;
            }
            let lock = match crate::lock::TxLock::acquire(self.state.path()) {
                Ok(l) => l,
                Err(crate::lock::LockError::Busy { .. }) => {
                    // `unbloat confirm` (or another command) holds it: look again.
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let rtnl = Rtnl::open()?;
            let again = self.state.read_journal()?;
            let undone = match again {
                Some(j) if j.id == id && j.phase == Phase::Pending => {
                    self.revert(&rtnl, &j)?;
                    true
                }
                _ => false,
            };
            drop(lock);
            return Ok(undone);
        }
    }

    /// Puts every interface of the journal back as its snapshot shows it.
    pub(crate) fn undo(&self, rtnl: &Rtnl, journal: &Journal) -> Rollback {
        let problems: Vec<String> = journal
            .entries
            .iter()
            .flat_map(|e| self.undo_entry(rtnl, e))
            .collect();
        if problems.is_empty() {
            Rollback::Restored
        } else {
            Rollback::Incomplete(problems.join("; "))
        }
    }

    fn undo_entry(&self, rtnl: &Rtnl, e: &Entry) -> Vec<String> {
        let mut problems = vec![];
        let ifb: Option<IfName> = [e.previous.as_ref(), e.next.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|s| s.plan.ingress.as_ref().map(|i| i.ifb.clone()));
        let ifb_name = ifb.as_ref().map(IfName::as_str);
        let link = match rtnl.link(e.iface.as_str()) {
            Ok(Some(l)) => l,
            Ok(None) => {
                // The device is gone, and its qdiscs with it: only an IFB unbloat made may remain.
                if e.before.ifb.is_none() {
                    self.delete_ifb(rtnl, ifb_name, &mut problems);
                }
                return problems;
            }
            Err(err) => return vec![err.to_string()],
        };
        let now = match Snapshot::take(rtnl, &link, ifb_name) {
            Ok(s) => s,
            Err(err) => return vec![err.to_string()],
        };
        // A default root the kernel attached by itself (the device came up meanwhile) is not a
        // change to undo: only a root of someone's choosing is compared.
        let egress_dirty = now.custom_root() != e.before.custom_root();
        let ingress_dirty = now.ingress() != e.before.ingress() || now.ifb != e.before.ifb;
        let mut dels = vec![];
        if egress_dirty && now.custom_root().is_some() {
            dels.push(format!("qdisc del dev {} root", e.iface));
        }
        if ingress_dirty {
            if now.ingress().is_some() {
                dels.push(format!("qdisc del dev {} ingress", e.iface));
            }
            if let (Some(name), Some(_), Some(_)) = (
                ifb_name,
                &e.before.ifb,
                now.ifb_root().filter(|q| !q.is_default()),
            ) {
                dels.push(format!("qdisc del dev {name} root"));
            }
        }
        if !dels.is_empty() {
            // -force: go on past a piece that is already gone; the comparison below decides.
            let cmd = Cmd::tc(["-force", "-batch", "-"]).stdin(dels.join("\n") + "\n");
            if let Err(err) = self.runner.run(&cmd) {
                problems.push(err.to_string());
            }
        }
        if ingress_dirty && e.before.ifb.is_none() {
            self.delete_ifb(rtnl, ifb_name, &mut problems);
        }
        // The previous setup's pieces that are missing now, from its plan: only those the device
        // held before the change (a device re-created under its record held none of them).
        if let Some(prev) = &e.previous {
            let held = Plan {
                wan: prev.plan.wan.clone(),
                egress: prev
                    .plan
                    .egress
                    .clone()
                    .filter(|_| e.before.custom_root().is_some()),
                ingress: prev
                    .plan
                    .ingress
                    .clone()
                    .filter(|_| e.before.ingress().is_some()),
                classify: None,
            };
            let have = Plan {
                wan: held.wan.clone(),
                egress: held.egress.clone().filter(|_| !egress_dirty),
                ingress: held.ingress.clone().filter(|_| !ingress_dirty),
                classify: None,
            };
            let mut t = transition::between(Some(&have), Some(&held));
            // The previous IFB may still be there (only its root was removed).
            if let Some(name) = ifb_name {
                if matches!(rtnl.link(name), Ok(Some(_))) {
                    t.links_before
                        .retain(|s| !matches!(s, unbloat_shaper::plan::Step::AddIfb { .. }));
                }
            }
            if let Err(f) = self.execute(rtnl, &t) {
                problems.push(format!("re-creating the previous setup: {}", f.describe()));
            }
        }
        // The classification's table is unbloat's alone: the previous setup's, or none.
        fn had(s: Option<&ShapedState>) -> Option<&unbloat_shaper::classify::Classifier> {
            s.and_then(|s| s.plan.classify.as_ref())
        }
        if let Some(text) = match (had(e.previous.as_ref()), had(e.next.as_ref())) {
            (Some(c), _) => Some(c.nft_text()),
            (None, Some(c)) => Some(unbloat_shaper::classify::delete_text(&c.wan)),
            (None, None) => None,
        } {
            if let Err(f) = self.run_nft(&text) {
                problems.push(format!("the classification's table: {}", f.describe()));
            }
        }
        match Snapshot::take(rtnl, &link, ifb_name) {
            Ok(after) if after.same_setup(&e.before) => {}
            Ok(after) => problems.push(format!(
                "{}: {}",
                e.iface,
                e.before.describe_difference(&after)
            )),
            Err(err) => problems.push(format!("cannot read {} back: {err}", e.iface)),
        }
        problems
    }

    fn delete_ifb(&self, rtnl: &Rtnl, name: Option<&str>, problems: &mut Vec<String>) {
        let Some(name) = name else { return };
        match rtnl.link(name) {
            Ok(Some(l)) if l.is_ifb() => {
                if let Err(err) = rtnl.delete_link(l.index) {
                    problems.push(err.to_string());
                }
            }
            Ok(_) => {}
            Err(err) => problems.push(err.to_string()),
        }
    }

    /// Deletes `unbloat-probe-<pid>-<n>` namespaces whose process is gone; their names.
    fn dead_probe_namespaces(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir("/run/netns") else {
            return vec![];
        };
        let mut out = vec![];
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("unbloat-probe-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: kill with signal 0 only checks whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            if !alive
                && self
                    .runner
                    .run(&Cmd::ip(["netns", "del", &name]))
                    .is_ok_and(|o| o.success())
            {
                out.push(name);
            }
        }
        out
    }
}
