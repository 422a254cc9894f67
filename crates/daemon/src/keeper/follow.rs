//! The keeper's side of networks (feature `networks`): each network planned when the file is
//! read (so a reload refuses a bad one before anything changes), the network each interface is
//! on, and which plan it gets. The decision itself is [`crate::seen::decide`]; applying it is
//! the keeper's usual [`Keeper::ensure`], in place when only values change.

use std::collections::BTreeMap;

use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::network::Networks;
use unbloat_system::planned::{self, PlanError, Planned};
use unbloat_system::rtnl::Rtnl;
use unbloat_system::runner::Runner;
use unbloat_system::wifi::Nl80211;
use unbloat_units::IfName;

use super::Keeper;
use crate::say;
use crate::seen::{decide, Seen, Shaping};

/// The file's networks, planned, and what each interface is on.
#[derive(Debug, Default)]
pub struct Follow {
    networks: Networks,
    /// Per interface with networks: each network's plan, by the network's name.
    plans: BTreeMap<String, BTreeMap<String, Planned>>,
    /// What each of those interfaces is on now.
    now: BTreeMap<String, Seen>,
}

impl Follow {
    /// Every network planned on every interface it is for; an error names the network's table.
    pub fn plan(runner: &dyn Runner, file: &ConfigFile) -> Result<Follow, PlanError> {
        let mut plans: BTreeMap<String, BTreeMap<String, Planned>> = BTreeMap::new();
        for i in &file.interfaces {
            for n in file.networks.for_iface(&i.name) {
                // Over the interface's options as the file gives them; under an [autorate.NAME]
                // table those carry cake's ingress mode pinned at the base rate (autorate's
                // `pinned`), which a network then keeps unless its table says `ingress-keyword`.
                let options = Networks::options(n, &i.options);
                let planned =
                    planned::with_fairness(runner, i.name.clone(), &options).map_err(|source| {
                        PlanError::System {
                            path: format!("{}:{}", file.path.display(), n.line),
                            iface: i.name.to_string(),
                            label: format!("[network.{}] on {}", n.name, i.name),
                            source: Box::new(source),
                        }
                    })?;
                plans
                    .entry(i.name.to_string())
                    .or_default()
                    .insert(n.name.clone(), planned);
            }
        }
        Ok(Follow {
            networks: file.networks.clone(),
            plans,
            now: BTreeMap::new(),
        })
    }

    /// What `old` recognised, kept for the interfaces both follow: a reload does not forget
    /// the network while the gateway's MAC is being resolved.
    pub fn carry(&mut self, old: &Follow) {
        self.now = old.now.clone();
    }

    /// What each interface with networks is on now.
    pub fn seen(&self) -> &BTreeMap<String, Seen> {
        &self.now
    }

    /// The plan `name` gets now: its network's, or `base` (its own table); `None`: no shaping.
    pub fn current<'a>(&'a self, name: &str, base: &'a Planned) -> Option<&'a Planned> {
        let Some(seen) = self.now.get(name) else {
            return Some(base);
        };
        match (seen.shaping, &seen.network) {
            (Shaping::Network, Some(n)) => self.plans.get(name)?.get(n).or(Some(base)),
            (Shaping::None, _) => None,
            _ => Some(base),
        }
    }

    /// Whether `name` is on its own table now (an autorate controller may run on it).
    pub fn on_own_table(&self, name: &str) -> bool {
        self.now
            .get(name)
            .is_none_or(|s| s.shaping == Shaping::Interface)
    }

    /// The interfaces that follow a network: those with networks, and those that leave an
    /// unknown network unshaped.
    fn followed(&self) -> Vec<String> {
        let mut names: Vec<String> = self.plans.keys().cloned().collect();
        for (i, u) in &self.networks.unknown {
            if *u != Default::default() && !names.iter().any(|n| n == i.as_str()) {
                names.push(i.to_string());
            }
        }
        names
    }
}

impl Keeper<'_> {
    /// Reads the gateway and the Wi-Fi association of every followed interface and records the
    /// network it is on; the names whose shaping that changes (to be applied by the caller,
    /// around its controllers).
    pub fn recognise(&mut self) -> Vec<String> {
        let followed = self.follow.followed();
        // A full build hears every route and neighbour event, networks or not: with none to
        // follow, no socket to open.
        let rtnl = match followed.is_empty() {
            true => None,
            false => Rtnl::open().ok(),
        };
        // Opened afresh each time (a read is two requests): cfg80211 loaded after the daemon
        // started is seen, and a machine without it costs one refused request.
        let mut nl80211 = match followed.is_empty() {
            true => None,
            false => Nl80211::open()
                .map_err(|e| say::warn(&format!("reading Wi-Fi associations (nl80211): {e}")))
                .ok()
                .flatten(),
        };
        let mut changed = vec![];
        for name in followed {
            let Ok(iface) = name.parse::<IfName>() else {
                continue;
            };
            let index = rtnl
                .as_ref()
                .and_then(|r| r.link(&name).ok().flatten())
                .map(|l| l.index);
            let gateway = rtnl.as_ref().zip(index).and_then(|(r, i)| {
                r.gateway(i)
                    .map_err(|e| say::warn(&format!("{name}: reading its gateway: {e}")))
                    .ok()?
            });
            let wifi = nl80211.as_mut().zip(index).and_then(|(n, i)| {
                n.association(i)
                    .map_err(|e| say::warn(&format!("{name}: reading its Wi-Fi association: {e}")))
                    .ok()?
            });
            let before = self.follow.now.get(&name);
            let seen = decide(&self.follow.networks, &iface, gateway, wifi, before);
            if before.is_none_or(|b| b.differs(&seen)) {
                say::info(&format!("{name}: on {}", seen.describe()));
                changed.push(name.clone());
            }
            self.follow.now.insert(name, seen);
        }
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.networks = self.follow.now.clone();
        changed
    }

    /// `name` is on an unknown network that gets no shaping: what unbloat set there goes.
    pub(super) fn unshape(&mut self, name: &str) -> bool {
        if let Ok(iface) = name.parse::<IfName>() {
            if let Ok(Some(_)) = self.shaper.state.load(&iface) {
                let _changes = self.live.lock();
                match self.shaper.stop(std::slice::from_ref(&iface)) {
                    Ok(_) => say::info(&format!(
                        "{name}: an unknown network, unknown_network = \"none\": shaping removed"
                    )),
                    Err(e) => say::warn(&format!("{name}: removing its shaping: {e}")),
                }
            }
        }
        self.set_health(name, super::Health::Unshaped);
        false
    }
}
