//! The daemon's `[autorate.NAME]` tables: a controller per interface, each on a thread of its own
//! (issue 16), doing what `unbloat autorate` does.
//!
//! The keeper and the controllers change the same qdiscs, so they share one lock, [`Live`]: the
//! rates each controller has set. A controller holds it while it changes a rate and records the
//! new one; the keeper holds it for each transaction and plans a controlled interface at its
//! live rates, so its periodic check finds the setup as it should be instead of putting the base
//! rates back under the controller.
//!
//! A controller starts from the base rates (the interface's `down` and `up`) and goes back to
//! them when it ends (the daemon ends, or a reload restarts it with the new table): what the
//! kernel keeps afterwards is the config's setup, which a restart verifies without a change. When
//! its interface is not shaped (yet), or its run fails (a device re-created under it: the cake's
//! handle changed), it waits and opens again.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use unbloat_autorate::controller::Config;
use unbloat_autorate::narrate::Narrator;
use unbloat_autorate::pinger::{Pinger, Probe};
use unbloat_autorate::reflectors::default_reflectors;
use unbloat_autorate::run::{self, Link};
use unbloat_autorate::shaped::ShapedLink;
use unbloat_shaper::autorate_config::AutorateConfig;
use unbloat_system::apply::Shaper;
use unbloat_system::lock::ControllerLock;
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::StateDir;
use unbloat_units::{IfName, Rate};

use crate::say;

/// The rates each running controller has set (download, upload), by interface; see the
/// module's text.
#[derive(Clone, Default)]
pub struct Live(Arc<Mutex<BTreeMap<String, (Rate, Rate)>>>);

impl Live {
    /// Held while a change is made; a panic elsewhere does not stop the changes.
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<String, (Rate, Rate)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running controllers.
pub struct Autorates {
    live: Live,
    running: Vec<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Autorates {
    pub fn new(live: Live) -> Autorates {
        Autorates {
            live,
            running: vec![],
        }
    }

    /// A controller for each table.
    pub fn start(&mut self, tables: &[(IfName, AutorateConfig)]) {
        for (name, cfg) in tables {
            let stop = Arc::new(AtomicBool::new(false));
            let (n, c, l, s) = (name.clone(), cfg.clone(), self.live.clone(), stop.clone());
            let thread = std::thread::Builder::new()
                .name(format!("autorate {name}"))
                .spawn(move || keep(&n, &c, &l, &s));
            match thread {
                Ok(t) => self.running.push((stop, t)),
                Err(e) => say::error(&format!("{name}: cannot start autorate: {e}")),
            }
        }
    }

    /// Every controller stopped, each having put its base rates back.
    pub fn stop_all(&mut self) {
        for (stop, _) in &self.running {
            stop.store(true, Ordering::SeqCst);
        }
        for (_, thread) in self.running.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The rates a controller set, recorded in [`Live`] under its lock.
struct Recorded<'a> {
    name: &'a str,
    link: ShapedLink,
    live: &'a Live,
}

impl Link for Recorded<'_> {
    fn carried(&mut self) -> Result<(u64, u64), String> {
        self.link.carried()
    }

    fn set_rates(&mut self, down: Rate, up: Rate) -> Result<(), String> {
        let mut live = self.live.lock();
        self.link.set_rates(down, up)?;
        live.insert(self.name.to_string(), (down, up));
        Ok(())
    }
}

/// One controller's thread: runs until `stop`, opening again after a failure.
fn keep(name: &IfName, table: &AutorateConfig, live: &Live, stop: &AtomicBool) {
    let reflectors = table.reflectors.clone().unwrap_or_else(default_reflectors);
    // The table's probe word was checked with the file.
    let probe = table.probe.parse().unwrap_or(Probe::Auto);
    let cfg = Config::probing(
        table.down,
        table.up,
        reflectors,
        usize::from(table.pingers),
        probe,
        table.threshold,
    );
    let pinger = match Pinger::open(&cfg.reflectors) {
        Ok(p) => p,
        Err(e) => return say::error(&format!("{name}: autorate cannot run: {e}")),
    };
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    let who = format!("the daemon's [autorate.{name}] table");
    let mut log = table.log.as_ref().and_then(|p| {
        std::fs::File::create(p)
            .map(std::io::BufWriter::new)
            .map_err(|e| say::warn(&format!("{name}: autorate: no log {}: {e}", p.display())))
            .ok()
    });
    let mut narrator = Narrator::events_only();
    let mut waiting: Option<String> = None;
    while !stop.load(Ordering::SeqCst) {
        // The interface's one controller: a hand-run `unbloat autorate` there makes this one
        // wait, as an unshaped interface does.
        let held = state.ensure().map_err(|e| e.to_string()).and_then(|()| {
            ControllerLock::acquire(state.path(), name.as_str(), &who).map_err(|e| e.to_string())
        });
        let opened = held.and_then(|held| {
            let _changes = live.lock();
            ShapedLink::open(&shaper, name).map(|link| (held, link))
        });
        let (_held, mut link) = match opened {
            Ok((held, link)) => (
                held,
                Recorded {
                    name: name.as_str(),
                    link,
                    live,
                },
            ),
            Err(why) => {
                if waiting.as_ref() != Some(&why) {
                    say::info(&format!("{name}: autorate waits: {why}"));
                    waiting = Some(why);
                }
                pause(stop, Duration::from_secs(2));
                continue;
            }
        };
        waiting = None;
        // From the base rates, which the controller takes to be set when it starts.
        if let Err(e) = link.set_rates(cfg.down.base, cfg.up.base) {
            say::warn(&format!("{name}: autorate: cannot set the base rates: {e}"));
            pause(stop, Duration::from_secs(2));
            continue;
        }
        say::info(&format!(
            "{name}: autorate: down {}..{} from {}, up {}..{} from {}, {} of {} reflectors probed ({:?})",
            cfg.down.min, cfg.down.max, cfg.down.base, cfg.up.min, cfg.up.max, cfg.up.base,
            cfg.active.min(cfg.reflectors.len()), cfg.reflectors.len(), cfg.probe
        ));
        if let Some(l) = log.as_mut() {
            let _ = writeln!(
                l,
                "{}",
                unbloat_autorate::log::start_event(name.as_str(), &cfg)
            );
            let _ = l.flush();
        }
        let mut on_tick = |t: &unbloat_autorate::controller::Tick| {
            for line in narrator.tick(t) {
                say::info(&format!("{name}: autorate: {line}"));
            }
            if let Some(l) = log.as_mut() {
                // A line at a time, so that `tail -f` and a plot of the running log see it.
                let _ = serde_json::to_writer(&mut *l, t);
                let _ = l.write_all(b"\n");
                let _ = l.flush();
            }
        };
        let result = run::run(cfg.clone(), &mut link, &pinger, stop, None, &mut on_tick);
        let back = link.set_rates(cfg.down.base, cfg.up.base);
        live.lock().remove(name.as_str());
        match (result, back) {
            (Ok(s), Ok(())) => say::info(&format!(
                "{name}: autorate stopped after {:.0} s ({} rate changes); left at the base rates",
                s.seconds, s.rate_changes
            )),
            (Ok(_), Err(e)) => say::warn(&format!(
                "{name}: autorate stopped, and the base rates could not be set back: {e}"
            )),
            (Err(e), _) => {
                say::warn(&format!("{name}: autorate: {e}; starting again"));
                pause(stop, Duration::from_secs(2));
            }
        }
    }
}

/// Sleeps `d`, or less when `stop` is set.
fn pause(stop: &AtomicBool, d: Duration) {
    let step = Duration::from_millis(100);
    let mut left = d;
    while !stop.load(Ordering::SeqCst) && !left.is_zero() {
        std::thread::sleep(step.min(left));
        left = left.saturating_sub(step);
    }
}
