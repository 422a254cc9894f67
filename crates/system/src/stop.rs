//! The stop signals of a long foreground run (`unbloat tune`, `unbloat autorate`): SIGINT
//! (Ctrl-C), SIGTERM (`kill`, a service manager) and SIGHUP (a closed terminal).
//!
//! Such a run must not die between two lines: it has a link to put back (the shaping before the
//! run, or the base rates). So once [`catch`] is called, the signals only set a flag (atomic
//! stores, which are async-signal-safe); the run looks at it ([`caught`], or [`flag`] for loops
//! that take an `&AtomicBool`), puts the link back and exits with 128 + the signal. No
//! SA_RESTART: a blocking poll or sleep returns at once and its loop sees the flag.
//!
//! (The test bench's kernel runner has a guard of another kind, unbloat-testbed's
//! `kernel::signals`: it stands for one child process and gives the old dispositions back when
//! it ends.)

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The stop signal caught, 0 while none was. Sticky: the user asked to stop.
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// The same, as a flag.
static STOPPING: AtomicBool = AtomicBool::new(false);

extern "C" fn note_signal(signal: libc::c_int) {
    CAUGHT.store(signal, Ordering::SeqCst);
    STOPPING.store(true, Ordering::SeqCst);
}

/// From now on, SIGINT, SIGTERM and SIGHUP set the flag instead of ending the process.
pub fn catch() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a handler that only stores to atomics; sigaction zeroed, then filled.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The stop signal that came, if one did.
pub fn caught() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Set once a stop signal came.
pub fn flag() -> &'static AtomicBool {
    &STOPPING
}
