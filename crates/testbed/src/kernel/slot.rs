//! Real-kernel tests from several test processes share the machine (`make test` runs two lanes
//! at once, scripts/test). Most guests use a third of a core at the lab's 20/5 Mbit/s, so they
//! can run side by side; a test whose result hangs on timing that another guest's CPU could
//! disturb (tune's rate search judges each step by its p99) is written `alone` and runs with no
//! other guest.
//!
//! The host's CPU is the guests' too: a test on the host that moves data as fast as loopback
//! allows (iperf3, nginx, `unbloat serve` in-process) takes a shared slot as well. Beside such
//! transfers, and with no other guest running, the short lab and the user-script lab measured a
//! steady p95 of 57 and 36.5 ms against their bound of 30.
//!
//! Every guest holds a shared slot while it runs ([`super::Kernel::run`] and the trial boot take
//! one themselves), so a guest booted outside [`real_kernel_test!`](crate::real_kernel_test) is
//! seen too: the kernel runner's own tests once booted theirs without one, and the lab's real
//! sqm-scripts run, `alone`, measured a steady p95 of 103 ms beside them.
//!
//! Two `flock`s beside the test binaries (`target/<profile>/deps/`): every test takes the gate,
//! then the slot, shared or exclusive, then lets the gate go. A test waiting to run alone holds
//! the gate, so no new shared test starts before it: it waits only for those already running.
//! A process that starts another which boots a guest (a test running `unbloat-lab`) takes a
//! slot itself: the other's lock files are beside its own binary.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::{Arc, Weak};

/// How a real-kernel test shares the machine with other tests' guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Beside other guests (the default).
    Shared,
    /// With no other guest running: its result depends on timing.
    Alone,
}

/// Held while a test runs (in a guest or on the host); released when its last holder drops it.
#[derive(Debug)]
pub struct Slot {
    _held: Arc<File>,
}

thread_local! {
    /// The slot this thread holds, if any, and how. A shared one asked for inside it (a second
    /// server in one test, the guest of a test that runs alone or shared) is the same slot rather
    /// than a second wait at the gate: there a test waiting to run alone would hold it up while
    /// waiting for this very slot, and a shared lock beside this thread's exclusive one would
    /// wait for ever. Per thread, so the tests of a binary run on two threads still queue at the
    /// gate each.
    static HELD: RefCell<(Share, Weak<File>)> = const { RefCell::new((Share::Shared, Weak::new())) };
}

/// Waits for the turn of `what` (a test, a guest) and returns the slot to hold while it runs.
/// `None` inside a guest (the host's process holds it already) and when the lock files cannot
/// be opened, which it says on stderr, and runs anyway: a lost lock costs timing, never a test.
pub fn take(share: Share, what: &str) -> Option<Slot> {
    if super::in_guest() {
        return None;
    }
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    match take_at(&dir, share) {
        Ok(slot) => Some(slot),
        Err(e) => {
            eprintln!(
                "{what}: runs without the guests' lock in {}: {e}",
                dir.display()
            );
            None
        }
    }
}

/// [`take`] with the lock files in `dir`: a slot this thread holds already is shared when it
/// covers what is asked (alone covers shared); alone asked for inside a shared slot is an error,
/// since it would wait for that very slot.
fn take_at(dir: &Path, share: Share) -> std::io::Result<Slot> {
    let (held_as, held) = HELD.with(|h| {
        let h = h.borrow();
        (h.0, h.1.upgrade())
    });
    if let Some(held) = held {
        return match (held_as, share) {
            (Share::Shared, Share::Alone) => Err(std::io::Error::other(
                "this thread holds a shared slot: it cannot also wait to run alone",
            )),
            _ => Ok(Slot { _held: held }),
        };
    }
    let slot = take_in(dir, share)?;
    HELD.with(|h| *h.borrow_mut() = (share, Arc::downgrade(&slot._held)));
    Ok(slot)
}

fn take_in(dir: &Path, share: Share) -> std::io::Result<Slot> {
    let gate = flocked(&dir.join(".unbloat-guests-gate"), libc::LOCK_EX)?;
    let op = match share {
        Share::Shared => libc::LOCK_SH,
        Share::Alone => libc::LOCK_EX,
    };
    let slot = flocked(&dir.join(".unbloat-guests"), op)?;
    drop(gate);
    Ok(Slot {
        _held: Arc::new(slot),
    })
}

/// Opens `path` (as the transaction lock's file is opened) and waits for its `flock`.
fn flocked(path: &Path, op: libc::c_int) -> std::io::Result<File> {
    let file = unbloat_system::lock::open_lock_file(path)?;
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::Duration;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("unbloat-slot-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Shared slots coexist; one alone waits for them, and a shared one asked for after it
    /// waits behind it (the gate), so a test that must run alone is not starved.
    #[test]
    fn alone_waits_for_the_shared_and_goes_before_later_ones() {
        let d = dir("order");
        let a = take_in(&d, Share::Shared).unwrap();
        let b = take_in(&d, Share::Shared).expect("two shared slots at once");
        let (tx, rx) = mpsc::channel();
        let (d2, tx2) = (d.clone(), tx.clone());
        let alone = std::thread::spawn(move || {
            let s = take_in(&d2, Share::Alone).unwrap();
            tx2.send("alone").unwrap();
            std::thread::sleep(Duration::from_millis(200));
            drop(s);
        });
        std::thread::sleep(Duration::from_millis(200));
        let d3 = d.clone();
        let later = std::thread::spawn(move || {
            let _s = take_in(&d3, Share::Shared).unwrap();
            tx.send("later").unwrap();
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            rx.try_recv().is_err(),
            "nothing ran while two shared slots were held"
        );
        drop((a, b));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("alone"));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("later"));
        alone.join().unwrap();
        later.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlinked_lock_file_is_refused() {
        let d = dir("link");
        std::os::unix::fs::symlink("/etc/passwd", d.join(".unbloat-guests-gate")).unwrap();
        assert!(take_in(&d, Share::Shared).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A test that takes a second shared slot (a second server) while another waits to run
    /// alone gets it at once: queueing at the gate behind the waiter, which waits for this very
    /// test's slot, would never end. The lock goes with the last of the two.
    #[test]
    fn a_nested_shared_slot_does_not_queue_behind_a_waiting_alone() {
        let d = dir("nested");
        let (tx, rx) = mpsc::channel();
        let (d1, tx1) = (d.clone(), tx.clone());
        // The test's own thread: the nested take is on the thread that holds the first.
        let test = std::thread::spawn(move || {
            let outer = take_at(&d1, Share::Shared).unwrap();
            tx1.send("outer").unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let inner = take_at(&d1, Share::Shared).unwrap();
            tx1.send("inner").unwrap();
            drop(outer);
            std::thread::sleep(Duration::from_millis(200));
            tx1.send("outer dropped").unwrap();
            drop(inner);
        });
        let wait = Duration::from_secs(5);
        assert_eq!(rx.recv_timeout(wait), Ok("outer"));
        let d2 = d.clone();
        let alone = std::thread::spawn(move || {
            let _s = take_at(&d2, Share::Alone).unwrap();
            tx.send("alone").unwrap();
        });
        assert_eq!(
            rx.recv_timeout(wait),
            Ok("inner"),
            "the nested take queued at the gate"
        );
        assert_eq!(
            rx.recv_timeout(wait),
            Ok("outer dropped"),
            "alone ran beside a slot"
        );
        assert_eq!(rx.recv_timeout(wait), Ok("alone"));
        test.join().unwrap();
        alone.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A guest booted inside a test that runs alone shares the test's slot, and one booted
    /// inside a shared slot too, at once: a second lock of this thread's would wait for the first.
    #[test]
    fn a_guest_inside_a_test_shares_the_test_slot() {
        let d = dir("inside");
        let (tx, rx) = mpsc::channel();
        let d1 = d.clone();
        std::thread::spawn(move || {
            for share in [Share::Alone, Share::Shared] {
                let test = take_at(&d1, share).unwrap();
                let guest = take_at(&d1, Share::Shared).unwrap();
                tx.send(share).unwrap();
                drop((guest, test));
            }
        });
        let wait = Duration::from_secs(5);
        assert_eq!(
            rx.recv_timeout(wait),
            Ok(Share::Alone),
            "the guest waited for its test"
        );
        assert_eq!(
            rx.recv_timeout(wait),
            Ok(Share::Shared),
            "the guest waited for its test"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Alone asked for inside a shared slot would wait for that very slot: refused instead.
    #[test]
    fn alone_inside_a_shared_slot_is_refused_rather_than_waiting_for_ever() {
        let d = dir("upgrade");
        let d1 = d.clone();
        let refused = std::thread::spawn(move || {
            let _shared = take_at(&d1, Share::Shared).unwrap();
            take_at(&d1, Share::Alone).is_err()
        });
        assert!(refused.join().unwrap());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
