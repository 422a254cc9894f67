//! Start, stop and set-rate as transactions: every interface of one command changes, verifies
//! and is recorded, or every interface is left exactly as it was, even across a crash.
//!
//! The sequence of a start (one or many interfaces):
//!
//! 1. Take the transaction lock; finish or undo a transaction a dead process left
//!    ([`crate::recover`]).
//! 2. For each interface: it exists; what unbloat has there (its record) is still there as
//!    unbloat left it, or gone, but not replaced by someone else's; the same plan that still
//!    verifies is "unchanged"; a snapshot of the device and its IFB ([`Snapshot`], over
//!    rtnetlink); without a record, a root or ingress qdisc or an IFB that unbloat did not create
//!    is refused.
//! 3. Write the journal ([`crate::journal`]): if it cannot be written, nothing is changed.
//! 4. For each interface, the commands of [`transition::between`] the old plan and the new: IFB
//!    links over rtnetlink, one `tc -batch -`. Then read everything back (one `tc -batch` per
//!    interface) and verify it against the plans.
//! 5. On any failure, undo every interface to its snapshot and say whether that worked; if a
//!    command failed, probe the kernel to name a missing module. On success, mark the journal
//!    committed, write the records, remove the journal.
//!
//! No process is started per step, and the probe's throw-away namespace is only made to
//! explain a failure: in User-Mode Linux each process costs 50-100 ms.

use crate::journal::{Entry, Journal, Phase};
use crate::live::{self, Found};
use crate::lock::{LockError, TxLock};
use crate::probe::{probe, Missing, ProbeError};
use crate::rtnl::{Link, Rtnl, RtnlError};
use crate::runner::{Cmd, CmdOutput, RunError, Runner};
use crate::snapshot::Snapshot;
use crate::state::{ShapedState, StateDir, StateError};
use unbloat_shaper::plan::{Plan, RootQdisc, Shaping, Step};
use unbloat_shaper::script::{argv, Script};
use unbloat_shaper::tcjson::{LiveState, LiveTexts};
use unbloat_shaper::transition::{self, Transition};
use unbloat_shaper::verify::verify;
use unbloat_units::IfName;

/// One interface to shape: the plan, and the options it came from (kept in the record).
#[derive(Debug, Clone)]
pub struct Request {
    pub plan: Plan,
    pub options: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Applied and verified. `replaced`: unbloat had a setup there before; `in_place`: pieces
    /// changed with tc's `change` (no gap for flows).
    Applied { replaced: bool, in_place: usize },
    /// The same setup was already in place and still verified: nothing was changed.
    Unchanged,
}

/// What a stop did on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub iface: IfName,
    /// unbloat's pieces that someone else replaced since start: left alone, and why.
    pub left_alone: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("there is no network interface {iface} here (interfaces: {}); check the name with `ip link`", .known.join(", "))]
    NoSuchInterface { iface: String, known: Vec<String> },
    #[error("this kernel cannot do what was asked:\n  - {}\n{rollback}", .missing.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("\n  - "))]
    Missing {
        missing: Vec<Missing>,
        rollback: Rollback,
    },
    #[error("{iface} already has {what}, which unbloat did not create; remove it first (`tc qdisc del dev {iface} {place}`) if unbloat should replace it")]
    Foreign {
        iface: String,
        what: String,
        place: &'static str,
    },
    #[error("the device {ifb} already exists and unbloat did not create it; remove it (`ip link del {ifb}`) or shape another interface")]
    ForeignIfb { ifb: String },
    #[error("unbloat's {piece} shaping on {iface} has been replaced by something else since it started ({what}); unbloat leaves it alone: remove it by hand (`tc qdisc del dev {iface} {place}`), then start again")]
    Replaced {
        iface: String,
        piece: &'static str,
        place: &'static str,
        what: String,
    },
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
    #[error("set-rate changes rates only, in place, and this change is more than that on {iface}: {why}; use `unbloat start` for it")]
    NotARateChange { iface: String, why: String },
    #[error("{0}; nothing was changed")]
    Journal(StateError),
    #[error("an interrupted change (journal of process {pid}) could not be undone: {why}\nfix the interfaces by hand, then `unbloat recover --discard` forgets it")]
    RecoveryIncomplete { pid: u32, why: String },
    #[error("a change of {ifaces} waits for confirmation for {left} s more: `unbloat confirm` keeps it; without it, it is undone then; until then nothing else is changed")]
    AwaitingConfirmation { ifaces: String, left: u64 },
    #[error("too late: the time to confirm had run out, so the change was undone; every interface is as it was before it")]
    ConfirmedTooLate,
    #[error("cannot read what the kernel holds on {iface}: {why}")]
    Read { iface: String, why: String },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Netlink(#[from] RtnlError),
}

/// How a failed change was undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollback {
    /// Everything is as it was before (checked against the snapshots).
    Restored,
    /// Something could not be put back; the text says what differs.
    Incomplete(String),
}

impl std::fmt::Display for Rollback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rollback::Restored => {
                write!(f, "nothing was changed: every interface is exactly as it was")
            }
            Rollback::Incomplete(why) => write!(
                f,
                "ROLLBACK INCOMPLETE, an interface is not as it was: {why}"
            ),
        }
    }
}

/// Why an apply failed, before the rollback is known.
pub(crate) enum Failed {
    Command { command: String, message: String },
    Verify(Vec<String>),
}

impl Failed {
    pub(crate) fn describe(&self) -> String {
        match self {
            Failed::Command { command, message } => format!("`{command}` failed: {}", message.trim()),
            Failed::Verify(m) => m.join("; "),
        }
    }
}

/// A test hook: `UNBLOAT_CRASH_AT=<point>` kills this process with SIGKILL at that point of a
/// transaction, so the tests can prove that every later command finds the old or the new setup
/// whole. The points, in order: `journal`, `links`, `tc`, `committed`, `recorded`.
pub fn crash_point(at: &str) {
    if std::env::var("UNBLOAT_CRASH_AT").is_ok_and(|v| v == at) {
        // SAFETY: raising a signal has no memory-safety preconditions.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}

/// One interface's part of a transaction, prepared.
struct Work {
    req: Request,
    previous: Option<ShapedState>,
    /// What of the previous plan is still there (pieces found gone are left out).
    effective: Option<Plan>,
    /// unbloat's own IFB, left behind without its redirect: deleted before the change.
    orphan_ifb: Option<u32>,
    before: Snapshot,
}

/// Starts, stops and reads shaping through one [`Runner`] (for `tc`) and rtnetlink, with
/// records and the journal in one [`StateDir`].
pub struct Shaper<'r> {
    pub runner: &'r dyn Runner,
    pub state: StateDir,
    /// `--confirm`: a change stays only if `unbloat confirm` comes within this time.
    pub confirm: Option<std::time::Duration>,
}

impl<'r> Shaper<'r> {
    pub fn new(runner: &'r dyn Runner, state: StateDir) -> Shaper<'r> {
        Shaper {
            runner,
            state,
            confirm: None,
        }
    }

    /// The lock, after any interrupted transaction was finished or undone.
    pub(crate) fn begin(&self) -> Result<(TxLock, Rtnl), ApplyError> {
        self.state.ensure()?;
        let lock = TxLock::acquire(self.state.path())?;
        let rtnl = Rtnl::open()?;
        self.recover_locked(&rtnl, false)?;
        Ok((lock, rtnl))
    }

    /// The interface's link, or an error naming the ones that exist.
    pub fn link(&self, rtnl: &Rtnl, iface: &str) -> Result<Link, ApplyError> {
        match rtnl.link(iface)? {
            Some(l) => Ok(l),
            None => Err(ApplyError::NoSuchInterface {
                iface: iface.to_string(),
                known: rtnl.links()?.into_iter().map(|l| l.name).collect(),
            }),
        }
    }

    /// Checks that `iface` exists, naming the ones that do when it does not.
    pub fn check_interface(&self, iface: &str) -> Result<(), ApplyError> {
        self.link(&Rtnl::open()?, iface).map(|_| ())
    }

    pub fn start(&self, reqs: &[Request]) -> Result<Vec<Outcome>, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let mut outcomes = vec![Outcome::Unchanged; reqs.len()];
        let mut work = vec![];
        let mut which = vec![];
        for (i, req) in reqs.iter().enumerate() {
            if let Some(w) = self.prepare(&rtnl, req)? {
                work.push(w);
                which.push(i);
            }
        }
        if work.is_empty() {
            return Ok(outcomes);
        }
        let entries = work
            .iter()
            .map(|w| Entry {
                iface: w.req.plan.wan.clone(),
                before: w.before.clone(),
                previous: w.previous.clone(),
                next: Some(ShapedState::new(w.req.plan.clone(), w.req.options.clone())),
            })
            .collect();
        let in_place = self.run(
            &rtnl,
            Journal::new(entries),
            |w| self.apply_one(&rtnl, w),
            |work| self.verify_all(&rtnl, work),
            &work,
        )?;
        for ((i, w), n) in which.into_iter().zip(&work).zip(in_place) {
            outcomes[i] = Outcome::Applied {
                replaced: w.previous.is_some(),
                in_place: n,
            };
        }
        Ok(outcomes)
    }

    /// The journal, the change, the verification and the commit, or the undo of all of it.
    fn run(
        &self,
        rtnl: &Rtnl,
        mut journal: Journal,
        apply: impl Fn(&Work) -> Result<usize, Failed>,
        check: impl Fn(&[Work]) -> Result<(), Failed>,
        work: &[Work],
    ) -> Result<Vec<usize>, ApplyError> {
        self.state
            .write_journal(&journal)
            .map_err(ApplyError::Journal)?;
        crash_point("journal");
        let mut in_place = vec![];
        let mut result = Ok(());
        for w in work {
            match apply(w) {
                Ok(n) => in_place.push(n),
                Err(f) => {
                    result = Err(f);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = check(work);
        }
        if let Err(failed) = result {
            let rollback = self.undo(rtnl, &journal);
            if rollback == Rollback::Restored {
                self.state.remove_journal()?;
            }
            return Err(self.explain(failed, rollback, work));
        }
        journal.phase = Phase::Committed;
        if let Some(within) = self.confirm {
            journal.phase = Phase::Pending;
            journal.confirm_by_unix = Some(crate::state::now_unix() + within.as_secs().max(1));
        }
        if let Err(e) = self.state.write_journal(&journal) {
            journal.phase = Phase::Applying;
            let rollback = self.undo(rtnl, &journal);
            if rollback == Rollback::Restored {
                self.state.remove_journal()?;
                return Err(ApplyError::Journal(e));
            }
            return Err(ApplyError::RecoveryIncomplete {
                pid: journal.pid,
                why: format!("{e}; {rollback}"),
            });
        }
        crash_point("committed");
        if journal.phase == Phase::Pending {
            // Recorded as the new setup while on trial; the journal keeps the old one.
            self.save_records(&journal)?;
        } else {
            self.finish(&journal)?;
        }
        Ok(in_place)
    }

    /// Step 2 for one interface: None when it is already shaped exactly so.
    fn prepare(&self, rtnl: &Rtnl, req: &Request) -> Result<Option<Work>, ApplyError> {
        let wan = &req.plan.wan;
        let link = self.link(rtnl, wan.as_str())?;
        let previous = self.state.load(wan.as_str())?;
        let mut effective = None;
        let mut orphan_ifb = None;
        if let Some(prev) = &previous {
            let live = self.live(rtnl, &prev.plan)?;
            let (egress, ingress) = live::pieces(&prev.plan, &live);
            let ours = |f: &Option<Found>| f.as_ref().is_none_or(|f| *f == Found::Ours);
            if prev.plan == req.plan && ours(&egress) && ours(&ingress) {
                return Ok(None);
            }
            for (found, piece, place) in [(&egress, "upload", "root"), (&ingress, "download", "ingress")] {
                if let Some(Found::Foreign(what)) = found {
                    return Err(ApplyError::Replaced {
                        iface: wan.to_string(),
                        piece,
                        place,
                        what: what.clone(),
                    });
                }
            }
            let mut plan = prev.plan.clone();
            if egress == Some(Found::Gone) {
                plan.egress = None;
            }
            if ingress == Some(Found::Gone) {
                if let Some(i) = &plan.ingress {
                    orphan_ifb = rtnl
                        .link(i.ifb.as_str())?
                        .filter(|l| l.kind.as_deref() == Some("ifb"))
                        .map(|l| l.index);
                }
                plan.ingress = None;
            }
            effective = Some(plan);
        }
        let ifb = ifb_of(previous.as_ref().map(|p| &p.plan)).or(ifb_of(Some(&req.plan)));
        let before = Snapshot::take(rtnl, &link, ifb.as_ref().map(IfName::as_str))?;
        if previous.is_none() {
            refuse_foreign(&req.plan, &before)?;
        }
        Ok(Some(Work {
            req: req.clone(),
            previous,
            effective,
            orphan_ifb,
            before,
        }))
    }

    /// Step 4 for one interface; the number of pieces changed in place.
    fn apply_one(&self, rtnl: &Rtnl, w: &Work) -> Result<usize, Failed> {
        if let Some(index) = w.orphan_ifb {
            rtnl.delete_link(index).map_err(netlink)?;
        }
        let t = transition::between(w.effective.as_ref(), Some(&w.req.plan));
        self.execute(rtnl, &t)?;
        Ok(t.changed_in_place)
    }

    /// Runs a transition: links before, one `tc -batch`, links after.
    pub(crate) fn execute(&self, rtnl: &Rtnl, t: &Transition) -> Result<(), Failed> {
        for step in &t.links_before {
            link_step(rtnl, step)?;
        }
        crash_point("links");
        if !t.tc.is_empty() {
            let cmd = Cmd::tc(["-batch", "-"]).stdin(t.batch_text());
            let out = self.runner.run(&cmd).map_err(|e| Failed::Command {
                command: cmd.display(),
                message: e.to_string(),
            })?;
            if !out.success() {
                return Err(Failed::Command {
                    command: failing_command(&cmd, &out),
                    message: tc_message(&out.stderr),
                });
            }
        }
        crash_point("tc");
        for step in &t.links_after {
            link_step(rtnl, step)?;
        }
        Ok(())
    }

    fn verify_all(&self, rtnl: &Rtnl, work: &[Work]) -> Result<(), Failed> {
        let mut mismatches = vec![];
        for w in work {
            match self.live(rtnl, &w.req.plan) {
                Ok(live) => mismatches.extend(verify(&w.req.plan, &live).iter().map(|m| {
                    format!("{}: {m}", w.req.plan.wan)
                })),
                Err(e) => mismatches.push(e.to_string()),
            }
        }
        if mismatches.is_empty() {
            Ok(())
        } else {
            Err(Failed::Verify(mismatches))
        }
    }

    /// The error of a failed apply, with its rollback; a failed command is explained by a probe
    /// of the kernel when something the plans need is missing.
    fn explain(&self, failed: Failed, rollback: Rollback, work: &[Work]) -> ApplyError {
        match failed {
            Failed::Command { command, message } => {
                let mut needs: Vec<&str> = work.iter().flat_map(|w| needs(&w.req.plan)).collect();
                needs.sort();
                needs.dedup();
                if let Ok(caps) = probe(self.runner, &needs) {
                    let missing = caps.missing(&needs);
                    if !missing.is_empty() {
                        return ApplyError::Missing { missing, rollback };
                    }
                }
                ApplyError::CommandFailed {
                    command,
                    message,
                    rollback,
                }
            }
            Failed::Verify(mismatches) => ApplyError::Verify {
                mismatches,
                rollback,
            },
        }
    }

    /// Writes the records of a committed journal and removes it.
    pub(crate) fn finish(&self, journal: &Journal) -> Result<(), StateError> {
        self.save_records(journal)?;
        crash_point("recorded");
        self.state.remove_journal()
    }

    /// The records of the journal's new setup.
    pub(crate) fn save_records(&self, journal: &Journal) -> Result<(), StateError> {
        for e in &journal.entries {
            match &e.next {
                Some(next) => self.state.save(next)?,
                None => self.state.remove(e.iface.as_str())?,
            }
        }
        Ok(())
    }

    /// The records of the journal's old setup (a change undone after it was recorded).
    pub(crate) fn restore_records(&self, journal: &Journal) -> Result<(), StateError> {
        for e in &journal.entries {
            match &e.previous {
                Some(prev) => self.state.save(prev)?,
                None => self.state.remove(e.iface.as_str())?,
            }
        }
        Ok(())
    }

    /// Removes what unbloat created on each interface, as far as it is still unbloat's.
    pub fn stop(&self, ifaces: &[IfName]) -> Result<Vec<Stopped>, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let mut work = vec![];
        let mut stopped = vec![];
        for iface in ifaces {
            let Some(prev) = self.state.load(iface.as_str())? else {
                return Err(ApplyError::NotShaped {
                    iface: iface.to_string(),
                    dir: self.state.path().display().to_string(),
                });
            };
            let mut left_alone = vec![];
            let mut remove = prev.plan.clone();
            let mut orphan_ifb = None;
            let link = rtnl.link(iface.as_str())?;
            if link.is_some() {
                let live = self.live(&rtnl, &prev.plan)?;
                let (egress, ingress) = live::pieces(&prev.plan, &live);
                if let Some(Found::Foreign(what)) = &egress {
                    left_alone.push(format!("the root qdisc of {iface} is no longer unbloat's ({what})"));
                }
                if !matches!(egress, Some(Found::Ours)) {
                    remove.egress = None;
                }
                if let Some(Found::Foreign(what)) = &ingress {
                    left_alone.push(format!("the ingress qdisc of {iface} is no longer unbloat's ({what})"));
                }
                if ingress == Some(Found::Gone) {
                    orphan_ifb = self.own_ifb(&rtnl, &prev.plan)?;
                }
                if !matches!(ingress, Some(Found::Ours)) {
                    remove.ingress = None;
                }
            } else {
                // The device is gone with its qdiscs; an IFB unbloat made for it may remain.
                orphan_ifb = self.own_ifb(&rtnl, &prev.plan)?;
                remove.egress = None;
                remove.ingress = None;
            }
            let before = match &link {
                Some(l) => Snapshot::take(&rtnl, l, ifb_of(Some(&prev.plan)).as_ref().map(IfName::as_str))?,
                None => Snapshot { wan: vec![], ifb: None },
            };
            stopped.push(Stopped {
                iface: iface.clone(),
                left_alone,
            });
            work.push(Work {
                req: Request {
                    plan: remove,
                    options: serde_json::Value::Null,
                },
                previous: Some(prev),
                effective: None,
                orphan_ifb,
                before,
            });
        }
        let entries = work
            .iter()
            .map(|w| Entry {
                iface: w.req.plan.wan.clone(),
                before: w.before.clone(),
                previous: w.previous.clone(),
                next: None,
            })
            .collect();
        let teardown = |w: &Work| -> Result<usize, Failed> {
            if let Some(index) = w.orphan_ifb {
                rtnl.delete_link(index).map_err(netlink)?;
            }
            self.execute(&rtnl, &transition::between(Some(&w.req.plan), None))?;
            Ok(0)
        };
        self.run(
            &rtnl,
            Journal::new(entries),
            teardown,
            |work| self.check_removed(&rtnl, work),
            &work,
        )?;
        Ok(stopped)
    }

    /// After a stop: the pieces it removed are gone (the kernel's default root, no ingress
    /// qdisc, no IFB).
    fn check_removed(&self, rtnl: &Rtnl, work: &[Work]) -> Result<(), Failed> {
        let mut left = vec![];
        for w in work {
            let plan = &w.req.plan;
            let Some(link) = rtnl.link(plan.wan.as_str()).map_err(netlink)? else {
                continue;
            };
            let ifb = ifb_of(Some(plan));
            let now = Snapshot::take(rtnl, &link, ifb.as_ref().map(IfName::as_str)).map_err(netlink)?;
            if plan.egress.is_some() {
                if let Some(q) = now.custom_root() {
                    left.push(format!("{}: {} is still there", plan.wan, q.summary()));
                }
            }
            if plan.ingress.is_some() {
                if let Some(q) = now.ingress() {
                    left.push(format!("{}: {} is still there", plan.wan, q.summary()));
                }
                if let Some((name, _)) = &now.ifb {
                    left.push(format!("{}: the IFB {name} is still there", plan.wan));
                }
            }
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(Failed::Verify(left))
        }
    }

    /// unbloat's IFB of `plan`, if it still exists as an IFB.
    fn own_ifb(&self, rtnl: &Rtnl, plan: &Plan) -> Result<Option<u32>, ApplyError> {
        Ok(match &plan.ingress {
            Some(i) => rtnl
                .link(i.ifb.as_str())?
                .filter(|l| l.kind.as_deref() == Some("ifb"))
                .map(|l| l.index),
            None => None,
        })
    }

    /// Changes only the shaper rates of a running setup, in place. `req.plan` must differ from
    /// the recorded plan in rates (and what follows from them) only. cake's bandwidth alone goes
    /// over rtnetlink, with no process at all.
    pub fn set_rate(&self, req: &Request) -> Result<Outcome, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let wan = &req.plan.wan;
        let Some(prev) = self.state.load(wan.as_str())? else {
            return Err(ApplyError::NotShaped {
                iface: wan.to_string(),
                dir: self.state.path().display().to_string(),
            });
        };
        if prev.plan == req.plan {
            return Ok(Outcome::Unchanged);
        }
        let t = transition::between(Some(&prev.plan), Some(&req.plan));
        if t.replaced > 0 || !t.links_before.is_empty() || !t.links_after.is_empty() {
            return Err(ApplyError::NotARateChange {
                iface: wan.to_string(),
                why: "a qdisc would have to be replaced".into(),
            });
        }
        let link = self.link(&rtnl, wan.as_str())?;
        let before = Snapshot::take(&rtnl, &link, ifb_of(Some(&prev.plan)).as_ref().map(IfName::as_str))?;
        let fast = bandwidth_only(&prev.plan, &req.plan);
        if let Some(changes) = &fast {
            // The cheap ownership check of the fast path: cake is still at the roots it changes.
            for (dev, _) in changes {
                let root = if dev == wan { before.root() } else { before.ifb_root() };
                if root.is_none_or(|q| q.kind != "cake") {
                    return Err(ApplyError::Replaced {
                        iface: wan.to_string(),
                        piece: if dev == wan { "upload" } else { "download" },
                        place: if dev == wan { "root" } else { "ingress" },
                        what: format!("{dev} has {}", root.map_or("no root qdisc".into(), |q| q.summary())),
                    });
                }
            }
        }
        let work = [Work {
            req: req.clone(),
            previous: Some(prev.clone()),
            effective: Some(prev.plan.clone()),
            orphan_ifb: None,
            before: before.clone(),
        }];
        let journal = Journal::new(vec![Entry {
            iface: wan.clone(),
            before,
            previous: Some(prev),
            next: Some(ShapedState::new(req.plan.clone(), req.options.clone())),
        }]);
        match fast {
            Some(changes) => {
                let apply = |_: &Work| -> Result<usize, Failed> {
                    for (dev, bytes_per_sec) in &changes {
                        let index = rtnl
                            .link(dev.as_str())
                            .map_err(netlink)?
                            .map(|l| l.index)
                            .ok_or_else(|| Failed::Command {
                                command: format!("netlink: change cake on {dev}"),
                                message: "the device is gone".into(),
                            })?;
                        rtnl.change_cake_bandwidth(index, *bytes_per_sec)
                            .map_err(netlink)?;
                    }
                    crash_point("tc");
                    Ok(changes.len())
                };
                // The kernel's acknowledgement of each change is the check: reading back with
                // tc would cost a process per call.
                self.run(&rtnl, journal, apply, |_| Ok(()), &work)?;
            }
            None => {
                self.run(
                    &rtnl,
                    journal,
                    |w| self.apply_one(&rtnl, w),
                    |work| self.verify_all(&rtnl, work),
                    &work,
                )?;
            }
        }
        Ok(Outcome::Applied {
            replaced: true,
            in_place: t.changed_in_place,
        })
    }

    /// What the kernel holds for a plan's devices, parsed.
    pub(crate) fn live(&self, rtnl: &Rtnl, plan: &Plan) -> Result<LiveState, ApplyError> {
        let texts = self.read_live_with(rtnl, &plan.wan, ifb_of(Some(plan)).as_ref(), live::has_htb(plan))?;
        LiveState::parse(&plan.wan, &texts).map_err(|e| ApplyError::Read {
            iface: plan.wan.to_string(),
            why: e.to_string(),
        })
    }

    fn read_live_with(
        &self,
        rtnl: &Rtnl,
        wan: &IfName,
        ifb: Option<&IfName>,
        classes: bool,
    ) -> Result<LiveTexts, ApplyError> {
        let ifb = match ifb {
            Some(name) if rtnl.link(name.as_str())?.is_some() => Some(name),
            _ => None,
        };
        Ok(live::read(self.runner, wan, ifb, classes)?)
    }

    /// Reads what the kernel holds for `iface` and its IFB (`tc -j -s -d`, classes included), in
    /// the shape [`LiveTexts`] documents.
    pub fn read_live(&self, iface: &IfName, ifb: Option<&IfName>) -> Result<LiveTexts, ApplyError> {
        self.read_live_with(&Rtnl::open()?, iface, ifb, true)
    }
}

/// The IFB a plan uses, if it shapes the download.
fn ifb_of(plan: Option<&Plan>) -> Option<IfName> {
    plan.and_then(|p| p.ingress.as_ref()).map(|i| i.ifb.clone())
}

/// For a start without a record: refuse to replace what someone else put there.
fn refuse_foreign(plan: &Plan, before: &Snapshot) -> Result<(), ApplyError> {
    let iface = plan.wan.to_string();
    if plan.egress.is_some() {
        if let Some(root) = before.custom_root() {
            return Err(ApplyError::Foreign {
                iface,
                what: format!("a root qdisc ({})", root.summary()),
                place: "root",
            });
        }
    }
    if let Some(i) = &plan.ingress {
        if let Some(ing) = before.ingress() {
            return Err(ApplyError::Foreign {
                iface,
                what: format!("an ingress qdisc ({})", ing.summary()),
                place: "ingress",
            });
        }
        if before.ifb.is_some() {
            return Err(ApplyError::ForeignIfb {
                ifb: i.ifb.to_string(),
            });
        }
    }
    Ok(())
}

/// When the only difference between two plans is cake's bandwidth at either root: the devices and
/// their new rates in bytes per second (cake stores bytes per second: net/sched/sch_cake.c).
fn bandwidth_only(a: &Plan, b: &Plan) -> Option<Vec<(IfName, u64)>> {
    let pairs = [
        (a.egress.as_ref(), b.egress.as_ref()),
        (
            a.ingress.as_ref().map(|i| &i.shaping),
            b.ingress.as_ref().map(|i| &i.shaping),
        ),
    ];
    if a.wan != b.wan || a.ingress.as_ref().map(|i| (&i.ifb, &i.redirect)) != b.ingress.as_ref().map(|i| (&i.ifb, &i.redirect)) {
        return None;
    }
    let mut out = vec![];
    for (x, y) in pairs {
        match (x, y) {
            (None, None) => {}
            (Some(Shaping { dev: d1, root: RootQdisc::Cake(p) }), Some(Shaping { dev: d2, root: RootQdisc::Cake(q) }))
                if d1 == d2 =>
            {
                let mut same = q.clone();
                same.bandwidth = p.bandwidth;
                if same != *p {
                    return None;
                }
                if p.bandwidth != q.bandwidth {
                    out.push((d2.clone(), q.bandwidth.bits_per_sec() / 8));
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The qdiscs and features the kernel must have for a plan, probed to explain a failure.
pub fn needs(plan: &Plan) -> Vec<&'static str> {
    let mut needs = vec![];
    let roots = plan
        .egress
        .iter()
        .map(|e| &e.root)
        .chain(plan.ingress.iter().map(|i| &i.shaping.root));
    for root in roots {
        match root {
            RootQdisc::Cake(_) => needs.push("cake"),
            RootQdisc::Htb(tree) => {
                needs.extend(["htb", "fq_codel"]);
                if !tree.filters.is_empty() {
                    needs.push("u32");
                }
            }
        }
    }
    if plan.ingress.is_some() {
        needs.extend(["ingress", "ifb", "mirred", "u32"]);
    }
    needs.sort();
    needs.dedup();
    needs
}

/// An `ip` step of a transition, over rtnetlink.
fn link_step(rtnl: &Rtnl, step: &Step) -> Result<(), Failed> {
    let shown = format!("ip {}", argv(step).join(" "));
    let fail = |message: String| Failed::Command {
        command: shown.clone(),
        message,
    };
    match step {
        Step::AddIfb { name } => rtnl.add_ifb(name.as_str()).map_err(|e| fail(e.to_string())),
        Step::SetUp { name } | Step::DeleteLink { name } => {
            let link = rtnl
                .link(name.as_str())
                .map_err(|e| fail(e.to_string()))?
                .ok_or_else(|| fail(format!("Cannot find device \"{name}\"")))?;
            let done = if matches!(step, Step::SetUp { .. }) {
                rtnl.set_up(link.index)
            } else if link.kind.as_deref() == Some("ifb") {
                rtnl.delete_link(link.index)
            } else {
                return Err(fail(format!("{name} is not an IFB; unbloat deletes only its own IFBs")));
            };
            done.map_err(|e| fail(e.to_string()))
        }
        other => Err(fail(format!("not a link step: {other:?}"))),
    }
}

fn netlink(e: RtnlError) -> Failed {
    Failed::Command {
        command: "netlink".into(),
        message: e.to_string(),
    }
}

/// A plan's script as the commands that run it: the `ip` steps, then one `tc -batch -` with the
/// batch text on its standard input, then the `ip` steps after it (the lab's strategies and the
/// benchmark's "one by one" baseline run scripts this way).
pub fn script_commands(script: &Script) -> Vec<Cmd> {
    let ip = |argv: &Vec<String>| Cmd::ip(argv.iter().map(String::as_str));
    let mut cmds: Vec<Cmd> = script.ip_before.iter().map(ip).collect();
    if !script.tc_batch.is_empty() {
        cmds.push(Cmd::tc(["-batch", "-"]).stdin(script.batch_text()));
    }
    cmds.extend(script.ip_after.iter().map(ip));
    cmds
}

/// The same, each `tc` command its own process, as a shell script like sqm-scripts runs them.
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

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::options::ShapeOptions;
    use unbloat_shaper::spec::Spec;

    #[test]
    fn the_failing_line_of_a_batch_is_named() {
        let cmd =
            Cmd::tc(["-batch", "-"]).stdin("qdisc add dev x root cake\nqdisc add dev x ingress\n");
        let out = CmdOutput::failed(1, "Error: Exclusivity flag on.\nCommand failed -:2\n");
        assert_eq!(failing_command(&cmd, &out), "tc qdisc add dev x ingress");
        assert_eq!(tc_message(&out.stderr), "Error: Exclusivity flag on.");
    }

    fn plan(down: &str, up: &str, extra: ShapeOptions) -> Plan {
        let opts = ShapeOptions {
            down: Some(down.parse().unwrap()),
            up: Some(up.parse().unwrap()),
            ..extra
        };
        Plan::build(&Spec::new("eth0".parse().unwrap(), &opts).unwrap())
    }

    #[test]
    fn a_cake_rate_change_is_bandwidth_only_and_anything_more_is_not() {
        let a = plan("50mbit", "10mbit", Default::default());
        let b = plan("60mbit", "10mbit", Default::default());
        assert_eq!(
            bandwidth_only(&a, &b),
            Some(vec![("ifb4eth0".parse().unwrap(), 60_000_000 / 8)])
        );
        // Crossing 4 Mbit/s turns cake's ingress mode off: more than the bandwidth.
        let slow = plan("3mbit", "10mbit", Default::default());
        assert_eq!(bandwidth_only(&a, &slow), None);
        let nat = plan(
            "60mbit",
            "10mbit",
            ShapeOptions {
                nat: Some(true),
                ..Default::default()
            },
        );
        assert_eq!(bandwidth_only(&a, &nat), None);
    }
}
