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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use unbloat_autorate::controller::Config;
use unbloat_autorate::narrate::Narrator;
use unbloat_autorate::pinger::Probe;
use unbloat_autorate::reflectors::default_reflectors;
use unbloat_autorate::run::Link;
use unbloat_autorate::shaped::ShapedLink;
use unbloat_autorate::start::{self, Session};
use unbloat_shaper::autorate_config::{AutorateConfig, LOG_DIR};
use unbloat_system::apply::Shaper;
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::{default_run_dir, StateDir};
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
    let (down, up) = (cfg.down, cfg.up);
    let started = format!(
        "{name}: autorate: down {}..{} from {}, up {}..{} from {}, {} of {} reflectors probed ({:?})",
        down.min, down.max, down.base, up.min, up.max, up.base,
        cfg.active.min(cfg.reflectors.len()), cfg.reflectors.len(), cfg.probe
    );
    // Bound to the WAN it judges: on a router with two WANs each controller measures its own.
    let mut session = match Session::open(name, cfg, Narrator::events_only()) {
        Ok(s) => s,
        Err(e) => return say::error(&format!("{name}: autorate cannot run: {e}")),
    };
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    let who = format!("the daemon's [autorate.{name}] table");
    let mut log = table.log.as_ref().and_then(|file| {
        open_log(&log_dir(&state), file)
            .map(std::io::BufWriter::new)
            .map_err(|e| say::warn(&format!("{name}: autorate: no log: {e}")))
            .ok()
    });
    let mut waiting: Option<String> = None;
    while !stop.load(Ordering::SeqCst) {
        // The interface's one controller: a hand-run `unbloat autorate` there makes this one
        // wait, as an unshaped interface does.
        let held = start::claim(&state, name, &who).map_err(|e| e.to_string());
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
        if let Err(e) = link.set_rates(down.base, up.base) {
            say::warn(&format!("{name}: autorate: cannot set the base rates: {e}"));
            pause(stop, Duration::from_secs(2));
            continue;
        }
        say::info(&started);
        if let Some(l) = log.as_mut() {
            let _ = writeln!(l, "{}", session.start_event());
            let _ = l.flush();
        }
        let result = session.run(&mut link, stop, None, log.as_mut(), &mut |line| {
            say::info(&format!("{name}: autorate: {line}"))
        });
        let back = link.set_rates(down.base, up.base);
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

/// Where the tables' logs go: [`LOG_DIR`], or `log/` in the run directory when that was moved
/// (`$UNBLOAT_RUN_DIR`: the tests, which must not write /var/log). Whoever sets the variable
/// already chooses where the daemon keeps its records; a config cannot set it.
pub fn log_dir(state: &StateDir) -> PathBuf {
    if state.path() == default_run_dir() {
        PathBuf::from(LOG_DIR)
    } else {
        state.path().join("log")
    }
}

/// The log `file` (a bare name, checked with the config) in `dir`, emptied: a real directory
/// and a regular file, never through a link (the directory may be writable by others, a
/// file there may be a link planted to make root write elsewhere).
fn open_log(dir: &Path, file: &Path) -> std::io::Result<std::fs::File> {
    unbloat_safefs::ensure_dir(dir)?;
    unbloat_safefs::create(&dir.join(file), 0o640)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, item 1b: a link planted where the log goes is not followed, and its target is
    /// left as it was.
    #[test]
    fn a_link_at_the_log_is_not_followed() {
        let scratch = crate::web::scratch::Scratch::new("autorate-log");
        let dir = scratch.path();
        std::fs::write(dir.join("motd"), "precious").unwrap();
        std::os::unix::fs::symlink(dir.join("motd"), dir.join("wan0.log")).unwrap();
        let err = open_log(dir, Path::new("wan0.log")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        let motd = std::fs::read_to_string(dir.join("motd")).unwrap();
        assert_eq!(motd, "precious");
        // A log directory that is a link is not written through either.
        std::os::unix::fs::symlink(dir, dir.join("linked")).unwrap();
        let err = open_log(&dir.join("linked"), Path::new("new.log")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!dir.join("new.log").exists());
        open_log(dir, Path::new("real.log")).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join("real.log"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o007, 0, "a log others can read: {mode:o}");
    }
}
