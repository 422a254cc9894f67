//! The transaction lock is waited for, within a bound (issue 36, item 5). A change that met the
//! lock used to be refused at once: a root `unbloat status` (which took the lock for its
//! recovery) beside `unbloat autorate` ended the controller; a re-apply after a PPPoE reconnect
//! stayed unshaped until the next periodic check. No kernel is needed: `confirm` with nothing on
//! trial only takes the lock, and `status` reads.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use unbloat_system::lock::TxLock;
use unbloat_system::state::StateDir;

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

fn run_dir(tag: &str) -> StateDir {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"))
        .join(format!("lock-wait-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let state = StateDir::new(dir);
    state.ensure().expect("a run directory");
    state
}

fn unbloat(state: &StateDir, args: &[&str]) -> Output {
    Command::new(UNBLOAT)
        .args(args)
        .env("UNBLOAT_RUN_DIR", state.path())
        .output()
        .expect("unbloat runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_change_waits_for_a_lock_held_briefly_and_names_one_held_too_long() {
    let state = run_dir("confirm");
    let lock = TxLock::acquire(state.path()).expect("the test holds the lock");
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(lock);
    });
    let t0 = Instant::now();
    let out = unbloat(&state, &["confirm"]);
    assert!(
        out.status.success(),
        "a change that met the lock did not wait for it: {}",
        text(&out)
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );
    release.join().unwrap();

    // Held past the bound (10 s): refused, naming the holder (this test) and how long.
    let _held = TxLock::acquire(state.path()).expect("the test holds the lock again");
    let t0 = Instant::now();
    let out = unbloat(&state, &["confirm"]);
    let waited = t0.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let msg = text(&out);
    let holder = format!("pid {} (`lock_wait", std::process::id());
    assert!(msg.contains(&holder), "names the holder: {msg}");
    assert!(msg.contains("waited 10 s"), "{msg}");
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(13),
        "{waited:?}"
    );
    drop(_held);
    let _ = std::fs::remove_dir_all(state.path());
}

/// `status` as root with nothing to recover only reads: it never takes the lock, so a
/// controller's rate change beside it, which takes the lock many times a second, never meets it.
#[test]
fn status_in_a_loop_never_takes_the_lock_from_a_change_beside_it() {
    assert!(
        unbloat_system::runner::is_root(),
        "status recovers only as root: run as root"
    );
    let state = run_dir("status");
    // The change beside it is a process of its own, taking the lock as a controller took it
    // before this fix: without waiting (flock(1) -n), counting refusals, until `stop` appears.
    // (Not a thread of this test: the `status` children forked here would inherit its lock
    // between fork and exec.)
    let dir = state.path().display().to_string();
    let taker = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd '{dir}' && n=0 r=0; while [ ! -e stop ]; do flock -n -E 7 transaction.lock true; \
             case $? in 0) n=$((n+1));; 7) r=$((r+1));; *) exit 2;; esac; done; echo $n $r"
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..20 {
        let out = unbloat(&state, &["status"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    std::fs::write(state.path().join("stop"), "").unwrap();
    let out = taker.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let counts: Vec<u64> = said
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(
        out.status.success() && counts.len() == 2,
        "the taker: {said}"
    );
    assert!(counts[0] > 0, "the taker never took the lock: {said}");
    assert_eq!(
        counts[1], 0,
        "status took the lock from a change {} times",
        counts[1]
    );
    let _ = std::fs::remove_dir_all(state.path());
}
