//! `set-rate` as a transaction: only the rates change, in place; cake's bandwidth alone goes
//! over rtnetlink, with no process at all (autorate calls this many times a second).

use super::commands::netlink;
use super::{crash_point, ifb_of, ApplyError, Failed, Outcome, Request, Shaper, Work};
use crate::journal::Journal;
use crate::snapshot::Snapshot;
use crate::state::ShapedState;
use unbloat_shaper::plan::{Plan, RootQdisc, Shaping};
use unbloat_shaper::transition;
use unbloat_units::IfName;

impl Shaper<'_> {
    /// Changes only the shaper rates of a running setup, in place. `req.plan` must differ from
    /// the recorded plan in rates (and what follows from them) only. cake's bandwidth alone goes
    /// over rtnetlink, with no process at all.
    pub fn set_rate(&self, req: &Request) -> Result<Outcome, ApplyError> {
        let (_lock, rtnl) = self.begin()?;
        let wan = &req.plan.wan;
        let Some(prev) = self.state.load(wan)? else {
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
        let link = self.link(&rtnl, wan)?;
        let before = Snapshot::take(
            &rtnl,
            &link,
            ifb_of(Some(&prev.plan)).as_ref().map(IfName::as_str),
        )?;
        let fast = bandwidth_only(&prev.plan, &req.plan);
        if let Some(changes) = &fast {
            // The cheap ownership check of the fast path: cake is still at the roots it changes.
            for (dev, _) in changes {
                let root = if dev == wan {
                    before.root()
                } else {
                    before.ifb_root()
                };
                if root.is_none_or(|q| q.kind != "cake") {
                    return Err(ApplyError::Replaced {
                        iface: wan.to_string(),
                        piece: if dev == wan { "upload" } else { "download" },
                        place: if dev == wan { "root" } else { "ingress" },
                        what: format!(
                            "{dev} has {}",
                            root.map_or("no root qdisc".into(), |q| q.summary())
                        ),
                    });
                }
            }
        }
        let work = [Work {
            req: req.clone(),
            effective: Some(prev.plan.clone()),
            previous: Some(prev),
            orphan_ifb: None,
            before,
        }];
        let next = ShapedState::new(req.plan.clone(), req.options.clone())
            .with_fairness(req.fairness.clone());
        let journal = Journal::new(vec![work[0].entry(Some(next))]);
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
}

/// When the only difference between two plans is cake's bandwidth at either root: the devices and
/// their new rates in bytes per second (cake stores bytes per second: net/sched/sch_cake.c).
pub(super) fn bandwidth_only(a: &Plan, b: &Plan) -> Option<Vec<(IfName, u64)>> {
    let pairs = [
        (a.egress.as_ref(), b.egress.as_ref()),
        (
            a.ingress.as_ref().map(|i| &i.shaping),
            b.ingress.as_ref().map(|i| &i.shaping),
        ),
    ];
    if a.wan != b.wan
        || a.ingress.as_ref().map(|i| (&i.ifb, &i.redirect))
            != b.ingress.as_ref().map(|i| (&i.ifb, &i.redirect))
    {
        return None;
    }
    let mut out = vec![];
    for (x, y) in pairs {
        match (x, y) {
            (None, None) => {}
            (
                Some(Shaping {
                    dev: d1,
                    root: RootQdisc::Cake(p),
                }),
                Some(Shaping {
                    dev: d2,
                    root: RootQdisc::Cake(q),
                }),
            ) if d1 == d2 => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::options::ShapeOptions;
    use unbloat_shaper::spec::Spec;

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
