//! A controller's rate changes (`unbloat autorate`): set-rate's fast path, held open for a run
//! of many changes a second.
//!
//! [`Shaper::set_rate`] is a whole transaction each time: the recovery check, the record read,
//! a snapshot of both devices, the journal written and synced, the change, the record written
//! and synced, the journal removed; about 150 system calls and 7 fsyncs, 20 ms of CPU in
//! User-Mode Linux. At several changes a second that would be most of what a controller costs.
//! A session does that work once, when it opens: the recovery, the record, and which cake is
//! at each root (its device index and handle). Each change after that is, under the
//! transaction lock:
//! - one `RTM_NEWQDISC` per direction that changed, naming the handle found at the open
//!   ([`Rtnl::change_cake_bandwidth_with_handle`]): the kernel changes that cake's rate and
//!   nothing else, or refuses and changes nothing if the root is no longer that cake;
//! - the record rewritten with the new rates (renamed into place, not synced: the run directory
//!   is a tmpfs, which a crash of the process does not lose, and a power cut takes the qdiscs
//!   with it).
//!
//! There is no journal: a change is one atomic message per device, with nothing to undo. A
//! crash between the message and the record leaves the record one step behind the kernel's
//! rate, which [`crate::live::pieces`] still counts as unbloat's cake (only its rate moved).
//! A change is refused while another change is waiting for `unbloat confirm`.

use super::{ApplyError, Request, Shaper};
use crate::lock::TxLock;
use crate::rtnl::Rtnl;
use crate::state::{ShapedState, StateDir};
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_units::IfName;

use unbloat_shaper::qdisc::netlink::TC_H_ROOT;

/// Rate changes on one interface, open; see the module's text.
pub struct RateSession {
    state: StateDir,
    rtnl: Rtnl,
    record: ShapedState,
    /// The cakes at the roots: device, its index, the root's handle.
    cakes: Vec<(IfName, u32, u32)>,
}

impl Shaper<'_> {
    /// Opens a session on `iface`, which unbloat shapes with cake at its root(s).
    pub fn rate_session(&self, iface: &IfName) -> Result<RateSession, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let record = self
            .state
            .load(iface)?
            .ok_or_else(|| ApplyError::NotShaped {
                iface: iface.to_string(),
                dir: self.state.path().display().to_string(),
            })?;
        let mut cakes = vec![];
        for (dev, cake, piece, place) in cake_roots(&record.plan) {
            let index = rtnl.link(dev.as_str())?.map(|l| l.index);
            // The root as the kernel holds it, with its handle even when the kernel chose it.
            let root = match index {
                Some(i) => rtnl.qdiscs(i)?.into_iter().find(|q| q.parent == TC_H_ROOT),
                None => None,
            };
            match (cake, index, root) {
                (true, Some(i), Some(q)) if q.kind == "cake" => {
                    cakes.push((dev.clone(), i, q.handle))
                }
                (_, index, root) => {
                    return Err(ApplyError::Replaced {
                        iface: iface.to_string(),
                        piece,
                        place,
                        what: match (index, root) {
                            (None, _) => format!("{dev} is gone"),
                            (_, Some(q)) => {
                                format!("{dev} has a {} root, not unbloat's cake", q.kind)
                            }
                            _ => format!("{dev} has no root qdisc"),
                        },
                    })
                }
            }
        }
        Ok(RateSession {
            state: self.state.clone(),
            rtnl,
            record,
            cakes,
        })
    }
}

/// The plan's shaped devices: the device, whether its root is cake, and how errors name it.
fn cake_roots(plan: &Plan) -> Vec<(&IfName, bool, &'static str, &'static str)> {
    let mut out = vec![];
    if let Some(e) = &plan.egress {
        out.push((
            &e.dev,
            matches!(e.root, RootQdisc::Cake(_)),
            "upload",
            "root",
        ));
    }
    if let Some(i) = &plan.ingress {
        let cake = matches!(i.shaping.root, RootQdisc::Cake(_));
        out.push((&i.shaping.dev, cake, "download", "ingress"));
    }
    out
}

impl RateSession {
    /// Changes the rates to `req`'s, whose plan may differ from the record's in cake's
    /// bandwidth alone. Returns whether anything changed.
    pub fn set(&mut self, req: &Request) -> Result<bool, ApplyError> {
        let wan = self.record.plan.wan.to_string();
        let changes =
            super::rate::bandwidth_only(&self.record.plan, &req.plan).ok_or_else(|| {
                ApplyError::NotARateChange {
                    iface: wan.clone(),
                    why: "more than cake's bandwidth would change".into(),
                }
            })?;
        if changes.is_empty() {
            return Ok(false);
        }
        let _lock = TxLock::acquire(self.state.path())?;
        if let Some(j) = self.state.read_journal()? {
            let left = crate::deadline::whole_secs(j.left_now());
            return Err(ApplyError::AwaitingConfirmation {
                ifaces: j
                    .entries
                    .iter()
                    .map(|e| e.iface.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                left,
            });
        }
        for (dev, bytes_per_sec) in &changes {
            let Some((_, index, handle)) = self.cakes.iter().find(|(d, _, _)| d == dev) else {
                return Err(ApplyError::NotARateChange {
                    iface: wan,
                    why: format!("{dev} had no cake when the session opened"),
                });
            };
            self.rtnl
                .change_cake_bandwidth_with_handle(*index, *handle, *bytes_per_sec)
                .map_err(|e| ApplyError::Replaced {
                    iface: wan.clone(),
                    piece: if *dev == self.record.plan.wan {
                        "upload"
                    } else {
                        "download"
                    },
                    place: if *dev == self.record.plan.wan {
                        "root"
                    } else {
                        "ingress"
                    },
                    what: e.to_string(),
                })?;
        }
        self.record = ShapedState::new(req.plan.clone(), req.options.clone())
            .with_fairness(req.fairness.clone());
        self.state.save_unsynced(&self.record)?;
        Ok(true)
    }
}
