//! `unbloat_system::stop` in a process of its own: it installs handlers for the whole process,
//! which would race the kernel runner's signal tests in the library's test binary.

use std::sync::atomic::Ordering;

use unbloat_system::stop;

#[test]
fn a_caught_signal_sets_the_flag_and_is_remembered() {
    stop::catch();
    assert_eq!(stop::caught(), None);
    assert!(!stop::flag().load(Ordering::SeqCst));
    // SAFETY: raise(3) on this process; the handler installed above only stores atomics.
    let raised = unsafe { libc::raise(libc::SIGHUP) };
    assert_eq!(raised, 0);
    // The process is still here (SIGHUP's default would have ended it), and it remembers.
    assert_eq!(stop::caught(), Some(libc::SIGHUP));
    assert!(stop::flag().load(Ordering::SeqCst));
}
