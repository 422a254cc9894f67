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
//! kernel keeps afterwards is the config's setup, which a restart verifies without a change.
//!
//! A controller waits, and tries again, while its interface does not exist (a PPPoE link or a
//! USB modem that comes up after the daemon, or goes away across a reload: its probes' sockets
//! are bound to the device, which needs the device), while it is not shaped (yet), and while
//! another controller holds it; and it opens again when its run fails (a device re-created under
//! it: the cake's handle changed). Each reason is said once, in the log and in `unbloat status`
//! ([`Autorates::waiting`]), and tried again after a [`Backoff`]: soon at first, then every 2 s.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use unbloat_autorate::controller::Config;
use unbloat_autorate::narrate::Narrator;
use unbloat_autorate::pinger::{OpenError, Probe};
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

/// Why each controller that does not run waits, by interface: what `unbloat status` shows.
#[derive(Clone, Default)]
struct Waits(Arc<Mutex<BTreeMap<String, String>>>);

impl Waits {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running controllers.
pub struct Autorates {
    live: Live,
    waits: Waits,
    running: Vec<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Autorates {
    pub fn new(live: Live) -> Autorates {
        Autorates {
            live,
            waits: Waits::default(),
            running: vec![],
        }
    }

    /// Why each controller that is not running (yet) waits, by interface.
    pub fn waiting(&self) -> BTreeMap<String, String> {
        self.waits.lock().clone()
    }

    /// A controller for each table.
    pub fn start(&mut self, tables: &[(IfName, AutorateConfig)]) {
        for (name, cfg) in tables {
            let stop = Arc::new(AtomicBool::new(false));
            let (n, c, l, s) = (name.clone(), cfg.clone(), self.live.clone(), stop.clone());
            let w = self.waits.clone();
            let thread = std::thread::Builder::new()
                .name(format!("autorate {name}"))
                .spawn(move || {
                    keep(&n, &c, &l, &w, &s);
                    w.lock().remove(n.as_str());
                });
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

/// The pauses between two tries while a controller waits: [`Backoff::FIRST`] at first (a PPPoE
/// link that comes up a moment after the daemon is probed at once), doubling up to
/// [`Backoff::MOST`] (a modem that stays away for hours costs one try every 2 s, two raw sockets
/// opened and closed, and the controller starts within 2 s of its return).
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MOST: Duration = Duration::from_secs(2);

    fn new() -> Backoff {
        Backoff { next: Self::FIRST }
    }

    /// The pause before the next try.
    fn pause(&mut self) -> Duration {
        let now = self.next;
        self.next = (now * 2).min(Self::MOST);
        now
    }
}

/// A controller's waiting: why (said once per reason, and published for `unbloat status`), and
/// how long until the next try.
struct Waiting<'a> {
    name: &'a IfName,
    waits: &'a Waits,
    why: Option<String>,
    backoff: Backoff,
}

impl Waiting<'_> {
    /// Says `why` unless it was the last reason (a new reason starts the back-off again), then
    /// pauses.
    fn wait(&mut self, why: String, stop: &AtomicBool) {
        if self.why.as_ref() != Some(&why) {
            say::info(&format!("{}: autorate waits: {why}", self.name));
            self.waits.lock().insert(self.name.to_string(), why.clone());
            self.why = Some(why);
            self.backoff = Backoff::new();
        }
        pause(stop, self.backoff.pause());
    }

    /// Running: the next wait is said again.
    fn over(&mut self) {
        self.why = None;
        self.backoff = Backoff::new();
        self.waits.lock().remove(self.name.as_str());
    }
}

/// One controller's thread: runs until `stop`, opening again after a failure.
fn keep(name: &IfName, table: &AutorateConfig, live: &Live, waits: &Waits, stop: &AtomicBool) {
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
    // The probes' sockets, bound to the WAN they judge (on a router with two WANs each
    // controller measures its own): opened once the device exists, then kept across runs, as
    // they follow a device made again under the same name.
    let mut session: Option<Session> = None;
    let mut waiting = Waiting {
        name,
        waits,
        why: None,
        backoff: Backoff::new(),
    };
    while !stop.load(Ordering::SeqCst) {
        let session = match &mut session {
            Some(s) => s,
            None => match Session::open(name, cfg.clone(), Narrator::events_only()) {
                Ok(s) => session.insert(s),
                Err(e @ OpenError::NoDevice(_)) => {
                    waiting.wait(e.to_string(), stop);
                    continue;
                }
                // No raw socket (not root, nor CAP_NET_RAW): trying again would not help.
                Err(e) => return say::error(&format!("{name}: autorate cannot run: {e}")),
            },
        };
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
                waiting.wait(why, stop);
                continue;
            }
        };
        waiting.over();
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

    /// Soon at first, then every 2 s at most, however long the interface stays away.
    #[test]
    fn the_backoff_starts_short_and_stays_at_two_seconds() {
        let mut b = Backoff::new();
        let ms: Vec<u128> = (0..7).map(|_| b.pause().as_millis()).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 2000, 2000, 2000]);
    }

    /// A reason is published while it holds and taken back when the controller runs; the
    /// back-off starts again with a new reason.
    #[test]
    fn a_wait_is_published_until_the_controller_runs() {
        let name: IfName = "wan0".parse().unwrap();
        let waits = Waits::default();
        let stop = AtomicBool::new(true);
        let mut w = Waiting {
            name: &name,
            waits: &waits,
            why: None,
            backoff: Backoff::new(),
        };
        w.wait("wan0 does not exist (yet)".into(), &stop);
        w.wait("wan0 does not exist (yet)".into(), &stop);
        assert_eq!(w.backoff.next, Duration::from_secs(1));
        assert_eq!(
            waits.lock().get("wan0").map(String::as_str),
            Some("wan0 does not exist (yet)")
        );
        w.wait("wan0 is not shaped".into(), &stop);
        assert_eq!(w.backoff.next, Duration::from_millis(500));
        assert_eq!(
            waits.lock().get("wan0").map(String::as_str),
            Some("wan0 is not shaped")
        );
        w.over();
        assert!(waits.lock().is_empty());
        assert!(w.why.is_none());
    }

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
