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

mod commands;
mod rate;
mod session;
mod stop;

pub use session::RateSession;

pub use commands::nft;
use commands::{failing_command, link_step, tc_message};

use crate::journal::{Entry, Journal, Phase};
use crate::live::{self, Found};
use crate::lock::LockError;
use crate::probe::{Missing, ProbeError};
use crate::rtnl::{Link, Rtnl, RtnlError};
use crate::runner::{Cmd, RunError, Runner};
use crate::snapshot::Snapshot;
use crate::state::{ShapedState, StateDir, StateError};
use unbloat_shaper::classify::{counters, Classifier, RuleCount};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_shaper::spec::{Spec, SpecError};
use unbloat_shaper::tcjson::{LiveState, LiveTexts};
use unbloat_shaper::transition::{self, Transition};
use unbloat_shaper::verify::verify;
use unbloat_units::{IfName, Rate};

/// One interface to shape: the plan, and the options it came from (kept in the record).
#[derive(Debug, Clone)]
pub struct Request {
    pub plan: Plan,
    pub options: ShapeOptions,
    /// The fairness line recorded for `status` ([`unbloat_shaper::fairness::line`]).
    pub fairness: Option<String>,
}

impl Request {
    /// `opts` at other rates, planned for `iface`, with its fairness line: the request of a
    /// rate change (set-rate's, a controller's).
    pub fn at_rates(
        iface: &IfName,
        opts: &ShapeOptions,
        fairness: Option<String>,
        down: Rate,
        up: Rate,
    ) -> Result<Request, SpecError> {
        let opts = ShapeOptions {
            down: Some(down),
            up: Some(up),
            ..opts.clone()
        };
        Ok(Request {
            plan: Plan::build(&Spec::new(iface.clone(), &opts)?),
            options: opts,
            fairness,
        })
    }
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
    #[error(transparent)]
    Offload(#[from] crate::offload::HardwareOffload),
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
                write!(
                    f,
                    "nothing was changed: every interface is exactly as it was"
                )
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
            Failed::Command { command, message } => {
                format!("`{command}` failed: {}", message.trim())
            }
            Failed::Verify(m) => m.join("; "),
        }
    }
}

/// A test hook: `UNBLOAT_CRASH_AT=<point>` kills this process with SIGKILL at that point of a
/// transaction, so the tests can prove that every later command finds the old or the new setup
/// whole. The points, in order: `journal`, `links`, `tc`, `committed`, `recorded`. Test builds
/// only ([`crate::knobs`]).
pub fn crash_point(at: &str) {
    if crate::knobs::var("UNBLOAT_CRASH_AT").is_some_and(|v| v == at) {
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
    /// unbloat's own IFB whose device is gone: a stop deletes it as part of the change (a start
    /// deletes such an IFB before it takes its snapshot).
    orphan_ifb: Option<u32>,
    before: Snapshot,
}

impl Work {
    /// This interface's part of the journal, with the record it will have after (None: a stop).
    fn entry(&self, next: Option<ShapedState>) -> Entry {
        Entry {
            iface: self.req.plan.wan.clone(),
            before: self.before.clone(),
            previous: self.previous.clone(),
            next,
        }
    }
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

    /// The interface's link, or an error naming the ones that exist.
    pub fn link(&self, rtnl: &Rtnl, iface: &IfName) -> Result<Link, ApplyError> {
        match rtnl.link(iface.as_str())? {
            Some(l) => Ok(l),
            None => Err(ApplyError::NoSuchInterface {
                iface: iface.to_string(),
                known: rtnl.links()?.into_iter().map(|l| l.name).collect(),
            }),
        }
    }

    /// Checks that `iface` exists, naming the ones that do when it does not.
    pub fn check_interface(&self, iface: &IfName) -> Result<(), ApplyError> {
        self.link(&Rtnl::open()?, iface).map(|_| ())
    }

    /// Refuses, without changing anything, what `start` would refuse on a device unbloat has no
    /// record of: a root or ingress qdisc someone else put there, an IFB of the plan's name it did
    /// not create. For commands that spend minutes before their first change (tune measures the
    /// unshaped link first, through whatever qdisc is there).
    pub fn check_free(&self, plan: &Plan) -> Result<(), ApplyError> {
        let rtnl = Rtnl::open()?;
        let link = self.link(&rtnl, &plan.wan)?;
        if self.state.load(&plan.wan)?.is_some() {
            return Ok(());
        }
        let ifb = ifb_of(Some(plan));
        let before = Snapshot::take(&rtnl, &link, ifb.as_ref().map(IfName::as_str))?;
        refuse_foreign(plan, &before)
    }

    /// Refuses, without changing anything, a plan's device that the hardware forwards (flow
    /// offloading); returns what software offloading takes from a plan ([`crate::offload`]).
    /// Once per command or configuration, before its first start, not at each rate change.
    pub fn check_offload(&self, reqs: &[Request]) -> Result<Vec<String>, ApplyError> {
        let listed = crate::offload::listed(self.runner);
        let tables = crate::offload::parse(&listed);
        let mut warnings = vec![];
        for req in reqs {
            warnings.extend(crate::offload::judge(&tables, &req.plan)?);
        }
        Ok(warnings)
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
            .map(|w| {
                w.entry(Some(
                    ShapedState::new(w.req.plan.clone(), w.req.options.clone())
                        .with_fairness(w.req.fairness.clone()),
                ))
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
            // On the boot clock: a step of the wall clock neither extends nor cuts the trial.
            let now = crate::deadline::Now::read();
            journal.confirm_by = Some(crate::deadline::Deadline::after(&now, within));
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
        let link = self.link(rtnl, wan)?;
        let previous = self.state.load(wan)?;
        let mut effective = None;
        if let Some(prev) = &previous {
            let live = self.live(rtnl, &prev.plan)?;
            let (egress, ingress) = live::pieces(&prev.plan, &live);
            let ours = |f: &Option<Found>| f.as_ref().is_none_or(|f| *f == Found::Ours);
            // A table someone removed (`nft flush ruleset`) is written again.
            let rules_in_place = self.classify_mismatches(&prev.plan).is_empty();
            if prev.plan == req.plan && ours(&egress) && ours(&ingress) && rules_in_place {
                return Ok(None);
            }
            for (found, piece, place) in [
                (&egress, "upload", "root"),
                (&ingress, "download", "ingress"),
            ] {
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
                // unbloat's own IFB, left behind without its redirect (the device was re-created
                // under it): deleted now, before the snapshot, so the change and its undo start
                // from a clean device. It is garbage either way; a crash right after this finds
                // the same record with the download gone, as now.
                if let Some(index) = own_ifb(rtnl, &plan)? {
                    rtnl.delete_link(index)?;
                }
                plan.ingress = None;
            }
            if !rules_in_place {
                plan.classify = None;
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
            orphan_ifb: None,
            before,
        }))
    }

    /// Step 4 for one interface; the number of pieces changed in place.
    fn apply_one(&self, rtnl: &Rtnl, w: &Work) -> Result<usize, Failed> {
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
        if let Some(text) = &t.nft {
            self.run_nft(text)?;
        }
        Ok(())
    }

    /// One `nft -f -` transaction: the classification's table written whole, or removed.
    pub(crate) fn run_nft(&self, text: &str) -> Result<(), Failed> {
        let cmd = commands::nft(text);
        let out = self.runner.run(&cmd).map_err(|e| Failed::Command {
            command: cmd.display(),
            message: match e {
                RunError::NotFound { .. } => "nft is not installed; classification needs nftables (Debian: apt install nftables; OpenWrt: fw4 has it)".into(),
                e => e.to_string(),
            },
        })?;
        if !out.success() {
            return Err(Failed::Command {
                command: cmd.display(),
                message: out.stderr.trim().to_string(),
            });
        }
        Ok(())
    }

    /// `nft -j list table` of the classification's table, or why it cannot be read.
    fn classify_listing(&self, c: &Classifier) -> Result<String, String> {
        let table = c.table();
        let cmd = Cmd::new("nft").args(["-j", "list", "table", "inet", &table]);
        match self.runner.run(&cmd) {
            Ok(out) if out.success() => Ok(out.stdout),
            Ok(_) => Err(format!(
                "the classification's table inet {table} is missing"
            )),
            Err(e) => Err(format!("cannot read the classification's table: {e}")),
        }
    }

    /// Whether the classification's table of `plan` is in place, rule for rule.
    fn classify_mismatches(&self, plan: &Plan) -> Vec<String> {
        let Some(c) = &plan.classify else {
            return vec![];
        };
        match self.classify_listing(c) {
            Ok(json) => c.mismatches(&json),
            Err(e) => vec![e],
        }
    }

    /// Each classification rule's counter, for `status`; None without classification.
    pub fn classify_counters(&self, plan: &Plan) -> Option<Result<Vec<RuleCount>, String>> {
        let c = plan.classify.as_ref()?;
        Some(self.classify_listing(c).and_then(|json| counters(&json)))
    }

    fn verify_all(&self, rtnl: &Rtnl, work: &[Work]) -> Result<(), Failed> {
        let mut mismatches = vec![];
        for w in work {
            match self.live(rtnl, &w.req.plan) {
                Ok(live) => mismatches.extend(
                    verify(&w.req.plan, &live)
                        .iter()
                        .map(|m| format!("{}: {m}", w.req.plan.wan)),
                ),
                Err(e) => mismatches.push(e.to_string()),
            }
            mismatches.extend(
                self.classify_mismatches(&w.req.plan)
                    .iter()
                    .map(|m| format!("{}: {m}", w.req.plan.wan)),
            );
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
                // Backed off: a flapping link fails apply after apply (probe/backoff.rs).
                if let Some(caps) = crate::probe::probe_backed_off(self.runner, &needs) {
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
                None => self.state.remove(&e.iface)?,
            }
        }
        Ok(())
    }

    /// The records of the journal's old setup (a change undone after it was recorded).
    pub(crate) fn restore_records(&self, journal: &Journal) -> Result<(), StateError> {
        for e in &journal.entries {
            match &e.previous {
                Some(prev) => self.state.save(prev)?,
                None => self.state.remove(&e.iface)?,
            }
        }
        Ok(())
    }

    /// What the kernel holds for a plan's devices, parsed.
    pub(crate) fn live(&self, rtnl: &Rtnl, plan: &Plan) -> Result<LiveState, ApplyError> {
        let texts = self.read_live_with(
            rtnl,
            &plan.wan,
            ifb_of(Some(plan)).as_ref(),
            live::has_htb(plan),
        )?;
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

/// The index of `plan`'s IFB, if the device still exists and is an IFB: what unbloat created and
/// may delete (a record naming another device never gets that device deleted).
fn own_ifb(rtnl: &Rtnl, plan: &Plan) -> Result<Option<u32>, RtnlError> {
    Ok(match &plan.ingress {
        Some(i) => rtnl
            .link(i.ifb.as_str())?
            .filter(Link::is_ifb)
            .map(|l| l.index),
        None => None,
    })
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

/// The qdiscs and features the kernel must have for a plan, probed to explain a failure.
pub fn needs(plan: &Plan) -> Vec<&'static str> {
    let mut needs = vec![];
    for root in live::roots(plan) {
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
        if plan.classify.is_some() {
            needs.push("ctinfo");
        }
    }
    needs.sort();
    needs.dedup();
    needs
}
