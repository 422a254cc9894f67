//! `stop` as a transaction: remove what is still unbloat's, leave what someone else put in its
//! place (and say so), check that what was removed is gone.

use super::commands::netlink;
use super::{ifb_of, own_ifb, ApplyError, Failed, Request, Shaper, Stopped, Work};
use crate::journal::Journal;
use crate::live::{self, Found};
use crate::rtnl::Rtnl;
use crate::snapshot::Snapshot;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::transition;
use unbloat_units::IfName;

impl Shaper<'_> {
    /// Removes what unbloat created on each interface, as far as it is still unbloat's.
    pub fn stop(&self, ifaces: &[IfName]) -> Result<Vec<Stopped>, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let mut work = vec![];
        let mut stopped = vec![];
        for iface in ifaces {
            let Some(prev) = self.state.load(iface)? else {
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
                    left_alone.push(format!(
                        "the root qdisc of {iface} is no longer unbloat's ({what})"
                    ));
                }
                if !matches!(egress, Some(Found::Ours)) {
                    remove.egress = None;
                }
                if let Some(Found::Foreign(what)) = &ingress {
                    left_alone.push(format!(
                        "the ingress qdisc of {iface} is no longer unbloat's ({what})"
                    ));
                }
                if ingress == Some(Found::Gone) {
                    orphan_ifb = own_ifb(&rtnl, &prev.plan)?;
                }
                if !matches!(ingress, Some(Found::Ours)) {
                    remove.ingress = None;
                }
            } else {
                // The device is gone with its qdiscs; an IFB unbloat made for it may remain.
                orphan_ifb = own_ifb(&rtnl, &prev.plan)?;
                remove.egress = None;
                remove.ingress = None;
            }
            let before = match &link {
                Some(l) => Snapshot::take(
                    &rtnl,
                    l,
                    ifb_of(Some(&prev.plan)).as_ref().map(IfName::as_str),
                )?,
                None => Snapshot {
                    wan: vec![],
                    ifb: None,
                },
            };
            stopped.push(Stopped {
                iface: iface.clone(),
                left_alone,
            });
            work.push(Work {
                req: Request {
                    plan: remove,
                    // Never recorded: a stop leaves no record.
                    options: ShapeOptions::default(),
                    fairness: None,
                },
                previous: Some(prev),
                effective: None,
                orphan_ifb,
                before,
            });
        }
        let entries = work.iter().map(|w| w.entry(None)).collect();
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
            let now =
                Snapshot::take(rtnl, &link, ifb.as_ref().map(IfName::as_str)).map_err(netlink)?;
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
}
