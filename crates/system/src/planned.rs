//! A plan for this machine: the user's options over the fairness defaults read here (does it
//! NAT or forward out of the WAN device?), and the one check of a spec that needs the system
//! (a rate far below the device's own speed). `start`, `plan`, `config check` and the daemon
//! plan through here, so a config shapes the same whoever applies it.

use std::path::Path;

use crate::apply::Request;
use crate::hostnet;
use crate::runner::Runner;
use unbloat_shaper::config::{ConfigError, ConfigFile};
use unbloat_shaper::fairness;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::{Spec, SpecError};
use unbloat_units::{IfName, Rate};

/// One interface's plan, the options it was built from (the fairness defaults under the
/// user's), and the line that says how it is fair.
#[derive(Debug, Clone)]
pub struct Planned {
    pub plan: Plan,
    pub opts: ShapeOptions,
    pub fairness: String,
}

impl Planned {
    /// What [`crate::apply::Shaper::start`] takes: the plan, its options for the record, the line.
    pub fn request(&self) -> Request {
        Request {
            plan: self.plan.clone(),
            options: self.opts.clone(),
            fairness: Some(self.fairness.clone()),
        }
    }
}

/// Why a config file cannot be planned: its own error (with the line), or a spec that fails
/// the check against the system.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error("{path}: {label}: {source}")]
    System {
        path: String,
        iface: String,
        /// How the file names the interface: `[interface.eth0]`, or UCI's `interface 'wan'`.
        label: String,
        source: Box<SpecError>,
    },
}

impl From<ConfigError> for PlanError {
    fn from(e: ConfigError) -> PlanError {
        PlanError::Config(Box::new(e))
    }
}

/// The fairness defaults of this machine under `user`'s options, the spec they make, and its
/// line. The machine is read only when it matters: cake, and nothing the user said already.
pub fn with_fairness(
    runner: &dyn Runner,
    iface: IfName,
    user: &ShapeOptions,
) -> Result<Planned, SpecError> {
    let qdisc = user.qdisc.unwrap_or_default();
    let machine = hostnet::read_machine(runner, Path::new("/proc"), iface.as_str());
    let f = fairness::decide(iface.as_str(), qdisc, &machine);
    let opts = f.apply(user);
    let spec = checked(Spec::new(iface, &opts)?)?;
    Ok(Planned {
        fairness: fairness::line(&spec, &f, user),
        plan: Plan::build(&spec),
        opts,
    })
}

/// Every interface of a config file, planned for this machine, in the file's order.
pub fn of_config(runner: &dyn Runner, config: &ConfigFile) -> Result<Vec<Planned>, PlanError> {
    // The file's own check first: its errors carry the line of the table. The link-speed check
    // is with_fairness's own (the fairness defaults add no rate, so it judges the user's rates).
    config.specs(&ShapeOptions::default())?;
    let mut out = vec![];
    for i in &config.interfaces {
        let planned = with_fairness(runner, i.name.clone(), &i.options).map_err(|source| {
            PlanError::System {
                path: config.path.display().to_string(),
                iface: i.name.to_string(),
                label: i.label.clone(),
                source: Box::new(source),
            }
        })?;
        out.push(planned);
    }
    Ok(out)
}

/// The one check of a spec that needs the system: a rate far below the interface's own speed
/// (a unit typo) needs `--i-mean-it`. Only a physical device's speed counts: virtual ones
/// (veth, vlan, ppp, ifb) report a made-up number or none.
pub fn checked(spec: Spec) -> Result<Spec, SpecError> {
    if let Some(speed) = link_speed(spec.wan.as_str()) {
        spec.check_link_speed(speed)?;
    }
    Ok(spec)
}

/// `/sys/class/net/IFACE/speed` (Mbit/s) of a physical device (no rtnetlink kind), if known.
fn link_speed(iface: &str) -> Option<Rate> {
    let rtnl = crate::rtnl::Rtnl::open().ok()?;
    let link = rtnl.link(iface).ok()??;
    if link.kind.is_some() {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/speed")).ok()?;
    let mbit: u64 = text.trim().parse().ok().filter(|m| *m > 0)?;
    Some(Rate::from_mbit(mbit))
}
