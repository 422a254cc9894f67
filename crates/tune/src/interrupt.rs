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

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::shaping::Shaping;
use crate::TuneError;

/// The stop signal caught, 0 while none was.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// The same, as the flag the framing sweep looks at.
static STOPPING: AtomicBool = AtomicBool::new(false);

extern "C" fn note_signal(signal: libc::c_int) {
    CAUGHT.store(signal, Ordering::SeqCst);
    STOPPING.store(true, Ordering::SeqCst);
}

/// Set once a stop signal came (for loops that take an `&AtomicBool`).
pub fn flag() -> &'static AtomicBool {
    &STOPPING
}

/// The shaping, shared between the run and the watcher.
pub type Shared = Arc<Mutex<Box<dyn Shaping + Send>>>;

/// Lets the run look at whether a stop was asked.
#[derive(Debug, Clone, Default)]
pub struct Stop;

impl Stop {
    pub fn check(&self) -> Result<(), TuneError> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => Ok(()),
            _ => Err(TuneError::Interrupted),
        }
    }
}

/// Installs the handlers and starts the watcher that restores `shaping` on a stop signal.
pub fn watch(shaping: Shared) -> Stop {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a handler that only stores to an atomic; sigaction zeroed, then filled.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(50));
        let sig = CAUGHT.load(Ordering::SeqCst);
        if sig == 0 {
            continue;
        }
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
