//! Keeping a config applied: the daemon's decisions and the transactions that carry them out.
//!
//! - At start: finish or undo a change a dead process left (the journal), then shape every
//!   configured interface that exists, each in a transaction of its own, so one interface that
//!   cannot be shaped (a foreign qdisc, a missing module) does not hold back the others.
//! - On link events ([`decide`]): a configured device that went away has its IFB and record
//!   removed (`stop` on a gone device); one that appeared, came up or was re-created is shaped
//!   again. `start` on a device that still holds the setup verifies it and changes nothing, so
//!   flag changes cost one read-back.
//! - On reload: the new file is checked and planned first; an error refuses it and the running
//!   setup stays. Then every present interface changes in one transaction (in place where only
//!   values changed: no gap for flows); interfaces no longer in the file are stopped.
//! - Periodically: the same check as a link event for every interface, which puts back shaping
//!   someone deleted by hand (a setup replaced by someone else's is left alone and reported).
//! - With networks (feature `networks`, [`follow`]): the plan an interface gets is its network's,
//!   its own, or none; route and neighbour events, reloads and the periodic check recognise the
//!   network again ([`Keeper::recognise`]).

#[cfg(feature = "networks")]
mod follow;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use unbloat_shaper::autorate_config::AutorateConfig;
use unbloat_shaper::config::ConfigFile;
use unbloat_system::apply::{ApplyError, Outcome, Request, Shaper};
use unbloat_system::lock::ControllerLock;
use unbloat_system::planned::{self, PlanError, Planned};
use unbloat_system::rtnl::events::LinkEvent;
use unbloat_system::state::now_unix;
use unbloat_units::{IfName, Rate};

use crate::autorate::Live;
use crate::metrics::DaemonCounters;
use crate::say;

/// What to do about one interface after a batch of link events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// It went away: remove what unbloat left for it (its IFB, its record).
    Cleanup(String),
    /// It is there (new, re-created, up or down): shape it, or check that it still is.
    Ensure(String),
    /// Events were lost: look at every configured interface.
    All,
}

/// The actions for a batch of events, in order: a device removed and re-created within the
/// batch is cleaned up, then shaped. Events about devices not in the config are ignored; several
/// changes of one device count once.
pub fn decide(events: &[LinkEvent], configured: &BTreeSet<String>) -> Vec<Action> {
    if events.iter().any(|e| matches!(e, LinkEvent::Lost)) {
        return vec![Action::All];
    }
    // Per device: whether it went away at some point, and whether it is there at the end.
    let mut seen: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for e in events {
        let (name, present) = match e {
            LinkEvent::Changed(l) => (l.name.as_str(), true),
            LinkEvent::Removed(l) => (l.name.as_str(), false),
            LinkEvent::Lost => unreachable!("handled above"),
            // The caller recognises the networks again after every batch.
            #[cfg(feature = "networks")]
            LinkEvent::Network => continue,
        };
        if !configured.contains(name) {
            continue;
        }
        let entry = seen.entry(name).or_insert((false, true));
        entry.0 |= !present;
        entry.1 = present;
    }
    let mut actions = vec![];
    for (name, (removed, present)) in seen {
        if removed {
            actions.push(Action::Cleanup(name.to_string()));
        }
        if present {
            actions.push(Action::Ensure(name.to_string()));
        }
    }
    actions
}

/// Where one configured interface stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "detail")]
pub enum Health {
    /// Shaped as configured and verified.
    Shaped,
    /// The device does not exist (yet): shaped when it appears.
    Waiting,
    /// The last apply failed; the text says why. Tried again on its next link event, a reload
    /// or the periodic check.
    Failed(String),
    /// Left unshaped on purpose: an unknown network, and `unknown_network = "none"`.
    #[cfg(feature = "networks")]
    Unshaped,
    /// Another process moves its rates and holds its controller lock (`unbloat tune`, or
    /// `unbloat autorate` by hand; the text names it): not checked until that process is done.
    Held(String),
}

impl Health {
    /// In words, for `unbloat status` and the daemon's log.
    pub fn describe(&self) -> String {
        match self {
            Health::Shaped => "shaped as configured".to_string(),
            Health::Waiting => "no such device; shaped when it appears".to_string(),
            Health::Failed(why) => format!("FAILED: {why}"),
            #[cfg(feature = "networks")]
            Health::Unshaped => {
                "not shaped: an unknown network (unknown_network = \"none\")".into()
            }
            Health::Held(by) => format!("left to {by}, which moves its rates"),
        }
    }
}

/// Why a reload was refused; the running setup stays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub reason: String,
    /// The file itself is wrong (invalid input), rather than the kernel refusing its change.
    pub bad_config: bool,
}

/// The answer to a reload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    /// Interfaces whose setup changed.
    pub changed: Vec<String>,
    /// Interfaces that were already as the file says.
    pub unchanged: Vec<String>,
    /// Interfaces no longer in the file, whose shaping was removed.
    pub removed: Vec<String>,
    /// Interfaces in the file without a device yet.
    pub waiting: Vec<String>,
}

pub struct Keeper<'r> {
    shaper: Shaper<'r>,
    config: PathBuf,
    plans: Vec<Planned>,
    /// The file's `[autorate.NAME]` tables.
    autorate: Vec<(IfName, AutorateConfig)>,
    /// The rates the controllers have set; held for every change (see [`crate::autorate`]).
    live: Live,
    health: BTreeMap<String, Health>,
    counters: Arc<Mutex<DaemonCounters>>,
    /// The networks, planned, and what each interface is on.
    #[cfg(feature = "networks")]
    follow: follow::Follow,
}

impl<'r> Keeper<'r> {
    /// Reads and plans the config; nothing is applied yet.
    pub fn new(
        shaper: Shaper<'r>,
        config: &Path,
        counters: Arc<Mutex<DaemonCounters>>,
        live: Live,
    ) -> Result<Keeper<'r>, PlanError> {
        let Plans {
            plans,
            autorate,
            #[cfg(feature = "networks")]
            follow,
        } = plan(&shaper, config)?;
        Ok(Keeper {
            shaper,
            config: config.to_path_buf(),
            plans,
            autorate,
            live,
            health: BTreeMap::new(),
            counters,
            #[cfg(feature = "networks")]
            follow,
        })
    }

    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The configured interfaces, in the file's order.
    pub fn names(&self) -> Vec<String> {
        self.plans.iter().map(|p| p.plan.wan.to_string()).collect()
    }

    pub fn configured(&self) -> BTreeSet<String> {
        self.names().into_iter().collect()
    }

    pub fn health(&self) -> &BTreeMap<String, Health> {
        &self.health
    }

    /// The interfaces whose rates a controller moves, and its settings: with networks, only
    /// those on their own table now (a known network's rates are fixed).
    pub fn autorate(&self) -> Vec<(IfName, AutorateConfig)> {
        #[cfg(feature = "networks")]
        return self
            .autorate
            .iter()
            .filter(|(i, _)| self.follow.on_own_table(i.as_str()))
            .cloned()
            .collect();
        #[cfg(not(feature = "networks"))]
        self.autorate.clone()
    }

    /// Whether the file has any `[autorate.NAME]` table.
    #[cfg(feature = "networks")]
    pub fn has_autorate(&self) -> bool {
        !self.autorate.is_empty()
    }

    /// What each interface that follows a network is on.
    #[cfg(feature = "networks")]
    pub fn networks(&self) -> &BTreeMap<String, crate::seen::Seen> {
        self.follow.seen()
    }

    /// The rates the controllers have set now.
    pub fn live_rates(&self) -> BTreeMap<String, (Rate, Rate)> {
        self.live.lock().clone()
    }

    /// The daemon's start: recover, then shape every configured interface there is.
    pub fn start_up(&mut self) {
        match self.shaper.recover(false) {
            Ok(r) if !r.is_empty() => say::info(&format!(
                "recovered an interrupted change: undone {:?}, finished {:?}, reverted {:?}",
                r.undone, r.finished, r.reverted
            )),
            Ok(_) => {}
            Err(e) => say::error(&format!("recovering an interrupted change: {e}")),
        }
        #[cfg(feature = "networks")]
        self.recognise();
        for name in self.names() {
            self.ensure(&name, "start");
        }
    }

    pub fn act(&mut self, actions: &[Action]) {
        for a in actions {
            match a {
                Action::Cleanup(name) => self.cleanup(name),
                Action::Ensure(name) => {
                    self.ensure(name, "a link event");
                }
                Action::All => {
                    for name in self.names() {
                        self.ensure(&name, "lost link events");
                    }
                }
            }
        }
    }

    /// Shapes `name` as planned, or checks that it still is. Returns whether it is shaped.
    pub fn ensure(&mut self, name: &str, why: &str) -> bool {
        let Some(p) = self.plans.iter().find(|p| p.plan.wan.as_str() == name) else {
            return false;
        };
        #[cfg(feature = "networks")]
        let Some(p) = self.follow.current(name, p) else {
            return self.unshape(name);
        };
        // Another process moves its rates (a tune's steps, or a controller started by hand): a
        // check now would put the configured rates back under it. Left to it until it is done,
        // then checked as before. This daemon's own controllers hold the same lock: interfaces
        // with an [autorate] table are not asked about (looking could refuse one just starting),
        // and a holder with this process's pid is not another.
        if !self.autorate.iter().any(|(i, _)| i.as_str() == name) {
            let held = ControllerLock::held_by(self.shaper.state.path(), name);
            if let Some(by) = held.filter(|by| !ControllerLock::is_this_process(by)) {
                return self.set_health(name, Health::Held(by));
            }
        }
        let t0 = Instant::now();
        let index = link_index(name);
        // Under autorate, the setup as the controller has it: the base rates would undo its work.
        let live = self.live.clone();
        let changes = live.lock();
        let request = match changes.get(name) {
            // The controller set them, so they plan.
            Some(&(down, up)) => {
                Request::at_rates(&p.plan.wan, &p.opts, Some(p.fairness.clone()), down, up)
                    .unwrap_or_else(|_| p.request())
            }
            None => p.request(),
        };
        let result = self.shaper.start(&[request]);
        drop(changes);
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        let health = match result {
            Ok(outcomes) => {
                if let Some(Outcome::Applied { .. }) = outcomes.first() {
                    say::info(&format!(
                        "{name}: shaped after {why} in {ms:.0} ms: {}",
                        p.plan.summary().join("; ")
                    ));
                    let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
                    *c.reapplies.entry(name.to_string()).or_default() += 1;
                    c.last_apply_unix = Some(now_unix());
                }
                Health::Shaped
            }
            Err(ApplyError::NoSuchInterface { .. }) => Health::Waiting,
            // Deleted (or deleted and re-created) while we applied, as a modem that bounces: the
            // transaction rolled back, and the device's appearance brings its own event.
            Err(_) if link_index(name) != index => Health::Waiting,
            Err(e) => {
                let text = e.to_string();
                let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
                *c.failures.entry(name.to_string()).or_default() += 1;
                Health::Failed(text)
            }
        };
        self.set_health(name, health)
    }

    /// Records the new health of `name`, saying it when it changed; whether it is shaped.
    fn set_health(&mut self, name: &str, health: Health) -> bool {
        let old = self.health.insert(name.to_string(), health.clone());
        if old.as_ref() != Some(&health) {
            match &health {
                Health::Shaped => {}
                Health::Waiting => say::info(&format!(
                    "{name}: no such device yet; it is shaped when it appears"
                )),
                Health::Failed(why) => say::error(&format!("{name}: cannot shape it: {why}")),
                Health::Held(by) => say::info(&format!(
                    "{name}: left to {by}, which moves its rates; checked again once it is done"
                )),
                // Said by `unshape` when it removed something.
                #[cfg(feature = "networks")]
                Health::Unshaped => {}
            }
        }
        health == Health::Shaped
    }

    /// `name` went away: its IFB and record go too (its own qdiscs went with the device).
    pub fn cleanup(&mut self, name: &str) {
        let Ok(iface) = name.parse::<IfName>() else {
            self.set_health(name, Health::Waiting);
            return;
        };
        let Ok(Some(_)) = self.shaper.state.load(&iface) else {
            self.set_health(name, Health::Waiting);
            return;
        };
        let _changes = self.live.lock();
        match self.shaper.stop(std::slice::from_ref(&iface)) {
            Ok(_) => say::info(&format!(
                "{name} went away: removed what unbloat kept for it (its IFB, its record); it is shaped \
                 again when it returns"
            )),
            Err(e) => say::warn(&format!("{name} went away; cleaning up after it: {e}")),
        }
        // Said above already: no second line for the same news.
        self.health.insert(name.to_string(), Health::Waiting);
    }

    /// The config file checked as [`Keeper::reload`] would check it, before anything is stopped
    /// for the reload (the autorate controllers): a file that cannot be used is a refused reload,
    /// counted and said as one, with nothing changed at all.
    pub fn check(&mut self) -> Result<(), Refusal> {
        match plan(&self.shaper, &self.config) {
            Ok(_) => Ok(()),
            Err(e) => self
                .counted(Err(Refusal {
                    reason: e.to_string(),
                    bad_config: true,
                }))
                .map(|_| ()),
        }
    }

    /// Reads the config again and applies what changed. An invalid file, or a change the kernel
    /// refuses, leaves the running setup as it was and says why.
    pub fn reload(&mut self) -> Result<Reloaded, Refusal> {
        let result = self.try_reload();
        self.counted(result)
    }

    /// A reload's result, counted and said.
    fn counted(&mut self, result: Result<Reloaded, Refusal>) -> Result<Reloaded, Refusal> {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.reloads += 1;
        if result.is_err() {
            c.reload_failures += 1;
        }
        drop(c);
        match &result {
            Ok(r) => say::info(&format!(
                "reloaded {}: changed {:?}, unchanged {:?}, removed {:?}, waiting {:?}",
                self.config.display(),
                r.changed,
                r.unchanged,
                r.removed,
                r.waiting
            )),
            Err(e) => say::error(&format!(
                "reload refused; the running setup stays: {}",
                e.reason
            )),
        }
        result
    }

    fn try_reload(&mut self) -> Result<Reloaded, Refusal> {
        let live = self.live.clone();
        let _changes = live.lock();
        let Plans {
            plans,
            autorate,
            #[cfg(feature = "networks")]
            follow,
        } = plan(&self.shaper, &self.config).map_err(|e| Refusal {
            reason: e.to_string(),
            bad_config: true,
        })?;
        // The new networks, recognised now; the old ones back if the kernel refuses the change.
        #[cfg(feature = "networks")]
        let old_follow = {
            let old = std::mem::replace(&mut self.follow, follow);
            self.follow.carry(&old);
            self.recognise();
            old
        };
        let result = self.apply_reload(plans, autorate);
        #[cfg(feature = "networks")]
        if result.is_err() {
            self.follow = old_follow;
        }
        result
    }

    /// The checked and planned file applied: [`Keeper::try_reload`]'s effects.
    fn apply_reload(&mut self, plans: Vec<Planned>, autorate: Tables) -> Result<Reloaded, Refusal> {
        let refused = |e: &dyn std::fmt::Display| Refusal {
            reason: e.to_string(),
            bad_config: false,
        };
        let all: Vec<_> = plans.iter().map(|p| p.request()).collect();
        for warning in self.shaper.check_offload(&all).map_err(|e| refused(&e))? {
            say::warn(&warning);
        }
        let mut out = Reloaded::default();
        let new: BTreeSet<String> = plans.iter().map(|p| p.plan.wan.to_string()).collect();
        let rtnl = unbloat_system::rtnl::Rtnl::open().map_err(|e| refused(&e))?;
        let mut present = vec![];
        #[cfg(feature = "networks")]
        let mut unshaped = vec![];
        for p in &plans {
            let name = p.plan.wan.to_string();
            #[cfg(feature = "networks")]
            let Some(p) = self.follow.current(&name, p) else {
                unshaped.push(name);
                continue;
            };
            match rtnl.link(&name).map_err(|e| refused(&e))? {
                Some(_) => present.push(p),
                None => out.waiting.push(name),
            }
        }
        // Every present interface in one transaction: the new file is applied whole or not at all.
        let reqs: Vec<_> = present.iter().map(|p| p.request()).collect();
        let outcomes = if reqs.is_empty() {
            vec![]
        } else {
            self.shaper.start(&reqs).map_err(|e| refused(&e))?
        };
        for (p, o) in present.iter().zip(&outcomes) {
            let name = p.plan.wan.to_string();
            match o {
                Outcome::Unchanged => out.unchanged.push(name.clone()),
                Outcome::Applied { .. } => out.changed.push(name.clone()),
            }
            self.health.insert(name, Health::Shaped);
        }
        for name in &out.waiting {
            self.health.insert(name.clone(), Health::Waiting);
        }
        #[cfg(feature = "networks")]
        for name in unshaped {
            self.unshape(&name);
        }
        for old in self.names() {
            if new.contains(&old) {
                continue;
            }
            self.health.remove(&old);
            let recorded = |i: &IfName| matches!(self.shaper.state.load(i), Ok(Some(_)));
            if let Some(iface) = old.parse::<IfName>().ok().filter(recorded) {
                match self.shaper.stop(std::slice::from_ref(&iface)) {
                    Ok(_) => out.removed.push(old),
                    Err(e) => say::warn(&format!("{old} left the config; stopping it: {e}")),
                }
            }
        }
        self.plans = plans;
        self.autorate = autorate;
        Ok(out)
    }
}

/// The device's index now: `None` when there is no such device (or it cannot be read).
fn link_index(name: &str) -> Option<u32> {
    let rtnl = unbloat_system::rtnl::Rtnl::open().ok()?;
    Some(rtnl.link(name).ok()??.index)
}

type Tables = Vec<(IfName, AutorateConfig)>;

/// A file read and planned.
struct Plans {
    /// Per interface, its own table's plan.
    plans: Vec<Planned>,
    autorate: Tables,
    #[cfg(feature = "networks")]
    follow: follow::Follow,
}

fn plan(shaper: &Shaper, config: &Path) -> Result<Plans, PlanError> {
    let file = ConfigFile::load(config)?;
    let autorate = file
        .interfaces
        .iter()
        .filter_map(|i| Some((i.name.clone(), i.autorate.clone()?)))
        .collect();
    Ok(Plans {
        plans: planned::of_config(shaper.runner, &file)?,
        autorate,
        #[cfg(feature = "networks")]
        follow: follow::Follow::plan(shaper.runner, &file)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_system::rtnl::Link;

    fn link(name: &str) -> Link {
        Link {
            index: 7,
            name: name.into(),
            kind: Some("veth".into()),
            up: true,
        }
    }

    fn wan() -> BTreeSet<String> {
        ["wan0".to_string()].into_iter().collect()
    }

    #[test]
    fn a_recreated_device_is_cleaned_up_then_shaped_and_others_are_ignored() {
        let events = [
            LinkEvent::Changed(link("wan0")),
            LinkEvent::Removed(link("wan0")),
            LinkEvent::Changed(link("ifb4wan0")),
            LinkEvent::Changed(link("wan0")),
            LinkEvent::Changed(link("wan0")),
        ];
        assert_eq!(
            decide(&events, &wan()),
            vec![
                Action::Cleanup("wan0".into()),
                Action::Ensure("wan0".into())
            ]
        );
    }

    #[test]
    fn a_device_that_went_away_for_good_is_only_cleaned_up() {
        let events = [
            LinkEvent::Changed(link("wan0")),
            LinkEvent::Removed(link("wan0")),
        ];
        assert_eq!(
            decide(&events, &wan()),
            vec![Action::Cleanup("wan0".into())]
        );
    }

    #[test]
    fn lost_events_mean_every_interface_and_unknown_devices_mean_nothing() {
        assert_eq!(
            decide(&[LinkEvent::Changed(link("eth1")), LinkEvent::Lost], &wan()),
            vec![Action::All]
        );
        assert!(decide(&[LinkEvent::Removed(link("eth1"))], &wan()).is_empty());
    }
}
