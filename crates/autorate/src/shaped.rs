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
            .load(iface.as_str())
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{iface} is not shaped by unbloat"))?;
        cake_both_ways(iface, &record.plan)?;
        let opts: ShapeOptions = serde_json::from_value(record.options.clone())
            .map_err(|e| format!("reading unbloat's record of {iface}: {e}"))?;
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
