//! The one start of a controller, for `unbloat autorate` and the daemon's `[autorate.NAME]`
//! tables alike: the probes' sockets bound to the interface, the interface's controller lock,
//! and the run with its log and its narration.
//!
//! What the two callers do differently stays with them: the CLI shapes an interface that is not
//! shaped yet, prints, and leaves the rates as `--on-exit` says; the daemon waits for its
//! interface, opens again after a failure (a device re-created under it), and records the rates
//! it sets for its keeper. Both find the shaped link with [`ShapedLink::open`](crate::shaped).
//!
//! A [`Session`] lives as long as its caller keeps controlling the interface (the daemon's
//! across its restarts), so the sockets and the narrator's memory are opened once; the lock is
//! taken by [`claim`] for each run, as the daemon lets a hand-run `unbloat autorate` have it
//! between two.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use unbloat_system::lock::{ControllerLock, LockError};
use unbloat_system::state::{StateDir, StateError};
use unbloat_units::IfName;

use crate::controller::{Config, Tick};
use crate::narrate::Narrator;
use crate::pinger::{OpenError, Pinger};
use crate::run::{self, Link, RunError, Summary};

/// Why the interface's controller lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The run directory could not be made safe.
    #[error(transparent)]
    State(#[from] StateError),
    /// Another controller holds the interface (its name is in the message), or the lock file
    /// could not be opened.
    #[error(transparent)]
    Lock(#[from] LockError),
}

/// Takes `iface`'s one controller lock, as `who`, in the run directory (made first if need be).
/// Held until the lock is dropped; refused, naming the holder, while another controller runs.
pub fn claim(state: &StateDir, iface: &IfName, who: &str) -> Result<ControllerLock, ClaimError> {
    state.ensure()?;
    Ok(ControllerLock::acquire(state.path(), iface.as_str(), who)?)
}

/// A controller of one interface: its settings, its probes' sockets and its narrator.
pub struct Session {
    iface: IfName,
    cfg: Config,
    pinger: Pinger,
    narrator: Narrator,
}

impl Session {
    /// Opens the probes' sockets for `cfg`'s reflectors, bound to `iface`: the probes leave by
    /// the interface whose rates they set, whatever the default route (a router with two
    /// WANs: each controller measures its own), and only answers that came in by it are read.
    /// `iface` must exist ([`OpenError::NoDevice`] while it does not: the daemon waits).
    pub fn open(iface: &IfName, cfg: Config, narrator: Narrator) -> Result<Session, OpenError> {
        let pinger = Pinger::open_on(&cfg.reflectors, Some(iface.as_str()))?;
        Ok(Session {
            iface: iface.clone(),
            cfg,
            pinger,
            narrator,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The log's first line: the interface and the settings (`unbloat plot` knows a log by it).
    pub fn start_event(&self) -> serde_json::Value {
        crate::log::start_event(self.iface.as_str(), &self.cfg)
    }

    /// Runs the controller on `link` from its base rates (the caller has set them) until `stop`
    /// (or `until` has passed). Every tick goes to `log` as a JSON line, and the narrator's
    /// lines to `say`.
    pub fn run<W: Write>(
        &mut self,
        link: &mut dyn Link,
        stop: &AtomicBool,
        until: Option<Duration>,
        mut log: Option<&mut W>,
        say: &mut dyn FnMut(&str),
    ) -> Result<Summary, RunError> {
        let narrator = &mut self.narrator;
        let mut on_tick = |t: &Tick| {
            for line in narrator.tick(t) {
                say(&line);
            }
            if let Some(l) = log.as_mut() {
                // A line at a time, so that `tail -f` and a plot of a running log see every tick.
                let _ = serde_json::to_writer(&mut **l, t);
                let _ = l.write_all(b"\n");
                let _ = l.flush();
            }
        };
        run::run(
            self.cfg.clone(),
            link,
            &self.pinger,
            stop,
            until,
            &mut on_tick,
        )
    }
}
