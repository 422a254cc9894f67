//! The [`Link`] of an interface unbloat shapes with cake both ways: the bytes it carried over
//! rtnetlink, the rates moved through set-rate's [`RateSession`] (one `RTM_NEWQDISC` per
//! direction, no process). Used by `unbloat autorate` and by the daemon's `[autorate.NAME]`.
//!
//! The achieved rates are the bytes the IFB sent (the download, after its shaper) and the WAN
//! sent (the upload).

use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_system::apply::{RateSession, Request, Shaper};
use unbloat_system::rtnl::Rtnl;
use unbloat_units::{IfName, Rate};

use crate::run::Link;

/// An interface under autorate; see the module's text.
pub struct ShapedLink {
    iface: IfName,
    ifb: IfName,
    opts: ShapeOptions,
    fairness: Option<String>,
    session: RateSession,
    rtnl: Rtnl,
}

impl ShapedLink {
    /// Opens the rate session on `iface` as unbloat's record has it: shaped by unbloat, with
    /// cake both ways (anything else is refused, saying why).
    pub fn open(shaper: &Shaper, iface: &IfName) -> Result<ShapedLink, String> {
        let record = shaper
            .state
            .load(iface)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{iface} is not shaped by unbloat"))?;
        cake_both_ways(iface, &record.plan)?;
        let opts = ingress_mode_as_planned(record.options.clone(), &record.plan);
        let ifb = record
            .plan
            .ingress
            .as_ref()
            .map(|i| i.ifb.clone())
            .ok_or_else(|| format!("{iface} has no download shaping"))?;
        Ok(ShapedLink {
            iface: iface.clone(),
            ifb,
            opts,
            fairness: record.fairness.clone(),
            session: shaper
                .rate_session(iface)
                .map_err(|e| format!("cannot change the rates of {iface}: {e}"))?,
            rtnl: Rtnl::open().map_err(|e| format!("rtnetlink: {e}"))?,
        })
    }
}

/// `opts` with cake's `ingress` mode as `plan` has it, unless the user set it. Left unset, the
/// mode follows the rate (on from 4 Mbit/s: `unbloat_shaper::cake::INGRESS_MODE_FROM`), so a
/// cut across that line planned a mode change, which set-rate refuses as more than a rate: on
/// the lab's ramp trace `unbloat autorate` cut 6276 kbit/s below 4 Mbit/s and ended with "set-rate
/// changes rates only".
fn ingress_mode_as_planned(mut opts: ShapeOptions, plan: &Plan) -> ShapeOptions {
    if let Some(RootQdisc::Cake(c)) = plan.ingress.as_ref().map(|i| &i.shaping.root) {
        opts.ingress_keyword.get_or_insert(c.ingress);
    }
    opts
}

/// `Ok` when `plan` has cake at both roots: autorate moves both rates.
pub fn cake_both_ways(iface: &IfName, plan: &Plan) -> Result<(), String> {
    let cake = |r: &RootQdisc| matches!(r, RootQdisc::Cake(_));
    let up = plan.egress.as_ref().is_some_and(|s| cake(&s.root));
    let down = plan.ingress.as_ref().is_some_and(|i| cake(&i.shaping.root));
    if up && down {
        Ok(())
    } else {
        Err(format!(
            "{iface} must be shaped with cake both ways for autorate (it moves both rates)"
        ))
    }
}

impl Link for ShapedLink {
    fn carried(&mut self) -> Result<(u64, u64), String> {
        let tx = |dev: &IfName| -> Result<u64, String> {
            Ok(self
                .rtnl
                .link_bytes(dev.as_str())
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{dev} is gone"))?
                .tx)
        };
        Ok((tx(&self.ifb)?, tx(&self.iface)?))
    }

    fn set_rates(&mut self, down: Rate, up: Rate) -> Result<(), String> {
        let req = Request::at_rates(&self.iface, &self.opts, self.fairness.clone(), down, up)
            .map_err(|e| e.to_string())?;
        self.session
            .set(&req)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::spec::Spec;

    fn plan(down: &str, opts: &ShapeOptions) -> Plan {
        let o = ShapeOptions {
            down: Some(down.parse().unwrap()),
            up: Some("1mbit".parse().unwrap()),
            ..opts.clone()
        };
        Plan::build(&Spec::new("wan0".parse().unwrap(), &o).unwrap())
    }

    fn ingress_of(p: &Plan) -> bool {
        match &p.ingress.as_ref().unwrap().shaping.root {
            RootQdisc::Cake(c) => c.ingress,
            RootQdisc::Htb(_) => unreachable!(),
        }
    }

    /// Regression (the lab's ramp trace): shaped at 6276 kbit/s, a cut below 4 Mbit/s planned
    /// cake without its ingress mode, and set-rate refused it. Pinned, the cut plans the mode in
    /// place; a mode the user set is kept whatever the plan says.
    #[test]
    fn a_cut_below_4mbit_keeps_the_ingress_mode_the_shaping_has() {
        let unset = ShapeOptions::default();
        let at_base = plan("6276kbit", &unset);
        assert!(ingress_of(&at_base));
        assert!(
            !ingress_of(&plan("1308kbit", &unset)),
            "unpinned, the mode follows the rate"
        );
        let pinned = ingress_mode_as_planned(unset.clone(), &at_base);
        assert!(ingress_of(&plan("1308kbit", &pinned)));

        let said = ShapeOptions {
            ingress_keyword: Some(false),
            ..unset
        };
        assert_eq!(
            ingress_mode_as_planned(said.clone(), &at_base).ingress_keyword,
            Some(false)
        );
    }
}
