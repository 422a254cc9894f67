//! The deadline of a change on trial (`--confirm`), on a clock the wall clock cannot move.
//!
//! The wall clock steps: NTP sets it back or forward, and a router without a real-time clock
//! boots in 1970 or at its last shutdown and jumps by hours once it syncs. A deadline in wall
//! time was extended by a step back (every other change refused meanwhile) and cut short by a
//! step forward. So a deadline is a point of `CLOCK_BOOTTIME` (monotonic, counts suspend;
//! clock_gettime(2)) together with the boot it belongs to (`/proc/sys/kernel/random/boot_id`,
//! random(4)): that clock restarts at every boot, so a deadline of another boot is past by
//! definition. The machine rebooted during the trial; undoing the change is the trial's point
//! (a change that cut you off is undone).
//!
//! Journals written before this kept only `confirm_by_unix` (wall time): they are still read,
//! and judged by the wall clock as before (a journal lives in `/run`, a tmpfs, so only an upgrade
//! during a trial meets one).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where the kernel names this boot (random(4)).
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// A moment: this boot and the time since it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Now {
    pub boot_id: String,
    pub since_boot: Duration,
}

impl Now {
    /// The kernel's boot id and `CLOCK_BOOTTIME`. Without a boot id (a kernel without procfs),
    /// the empty one: every deadline is then of "this" boot, which is the best we can know.
    pub fn read() -> Now {
        let boot_id = std::fs::read_to_string(BOOT_ID)
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Now {
            boot_id,
            since_boot: boottime(),
        }
    }
}

/// `CLOCK_BOOTTIME`: monotonic, and it keeps counting while the machine is suspended.
fn boottime() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; CLOCK_BOOTTIME exists since Linux 2.6.39.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// When a change on trial is undone unless confirmed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deadline {
    pub boot_id: String,
    /// Milliseconds of `CLOCK_BOOTTIME` in that boot.
    pub boottime_ms: u64,
}

impl Deadline {
    /// `within` after `now`.
    pub fn after(now: &Now, within: Duration) -> Deadline {
        Deadline {
            boot_id: now.boot_id.clone(),
            boottime_ms: (now.since_boot + within).as_millis() as u64,
        }
    }

    /// The time left at `now`: zero once it is due, and at once in another boot.
    pub fn left(&self, now: &Now) -> Duration {
        if self.boot_id != now.boot_id {
            return Duration::ZERO;
        }
        Duration::from_millis(self.boottime_ms).saturating_sub(now.since_boot)
    }
}

/// Whole seconds of `left` for messages, rounded up: "0 s left" only once it is due.
pub fn whole_secs(left: Duration) -> u64 {
    left.as_secs() + u64::from(left.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(boot: &str, secs: u64) -> Now {
        Now {
            boot_id: boot.into(),
            since_boot: Duration::from_secs(secs),
        }
    }

    #[test]
    fn a_deadline_counts_down_on_the_boot_clock_only() {
        let d = Deadline::after(&at("boot-a", 100), Duration::from_secs(15));
        assert_eq!(d.left(&at("boot-a", 100)), Duration::from_secs(15));
        assert_eq!(d.left(&at("boot-a", 110)), Duration::from_secs(5));
        assert_eq!(d.left(&at("boot-a", 115)), Duration::ZERO);
        assert_eq!(d.left(&at("boot-a", 4000)), Duration::ZERO);
    }

    #[test]
    fn a_deadline_of_another_boot_is_due_at_once() {
        // After a reboot the boot clock starts again near zero: 10 s into the new boot is
        // not "90 s before the deadline", the machine went down during the trial.
        let d = Deadline::after(&at("boot-a", 100), Duration::from_secs(15));
        assert_eq!(d.left(&at("boot-b", 10)), Duration::ZERO);
    }

    #[test]
    fn this_boot_has_an_id_and_its_clock_moves_forward() {
        let a = Now::read();
        std::thread::sleep(Duration::from_millis(20));
        let b = Now::read();
        assert_eq!(a.boot_id.len(), 36, "{:?}", a.boot_id);
        assert_eq!(a.boot_id, b.boot_id);
        assert!(b.since_boot >= a.since_boot + Duration::from_millis(20));
    }

    #[test]
    fn seconds_left_round_up() {
        assert_eq!(whole_secs(Duration::from_millis(14_001)), 15);
        assert_eq!(whole_secs(Duration::from_secs(15)), 15);
        assert_eq!(whole_secs(Duration::ZERO), 0);
    }
}
