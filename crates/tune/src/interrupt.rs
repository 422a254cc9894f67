//! Ctrl-C at any phase puts back the shaping that was there before.
//!
//! A tune step loads the link for seconds inside `unbloat test`'s timeline, which has no way to
//! be cut short; waiting for it would leave the user's link saturated and shaped at a trial rate
//! for up to ten seconds after they asked to stop. So the stop signals (SIGINT, SIGTERM, SIGHUP)
//! only set a flag (an atomic store, async-signal-safe), and a watcher thread that sees it takes
//! the shaping lock (waiting out a transaction under way, never cutting one in half), puts the
//! old shaping back, says so and ends the process with 128 + the signal. The measurement threads
//! die with the process; the far end sees its connections close.
//!
//! [`Stop::check`] lets the run itself notice between phases too (a test that ended just then).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use unbloat_system::stop;

use crate::shaping::Shaping;
use crate::TuneError;

/// Set once a stop signal came (for loops that take an `&AtomicBool`).
pub fn flag() -> &'static AtomicBool {
    stop::flag()
}

/// The shaping, shared between the run and the watcher.
pub type Shared = Arc<Mutex<Box<dyn Shaping + Send>>>;

/// Lets the run look at whether a stop was asked.
#[derive(Debug, Clone, Default)]
pub struct Stop;

impl Stop {
    pub fn check(&self) -> Result<(), TuneError> {
        match stop::caught() {
            None => Ok(()),
            Some(_) => Err(TuneError::Interrupted),
        }
    }
}

/// Installs the handlers and starts the watcher that restores `shaping` on a stop signal.
pub fn watch(shaping: Shared) -> Stop {
    stop::catch();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(50));
        let Some(sig) = stop::caught() else {
            continue;
        };
        let mut s = shaping.lock().unwrap_or_else(|e| e.into_inner());
        match s.restore() {
            Ok(what) => eprintln!("unbloat: tune interrupted: {what}"),
            Err(e) => {
                eprintln!("unbloat: tune interrupted: COULD NOT PUT BACK THE OLD SHAPING: {e}")
            }
        }
        std::process::exit(128 + sig);
    });
    Stop
}
