//! A `tc` that hangs (issue 36, item 12): it held the transaction lock for ever, and every later
//! change with it. Now its deadline kills it (and what it started), the change fails naming the
//! command and is undone, and the lock is free for the next one at once.

mod common;

use common::{text, Netns};
use std::time::{Duration, Instant};
use unbloat_testbed::real_kernel_test;

/// A `tc` whose apply batches (`tc -batch -`) never end; everything else is the real one.
fn tc_hanging_on_apply(ns: &Netns) -> String {
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    let path = ns.run_dir.join("tc-hangs");
    std::fs::write(
        &path,
        "#!/bin/sh\nif [ \"$1\" = \"-batch\" ]; then sleep 1000; fi\nexec tc \"$@\"\n",
    )
    .unwrap();
    common::must(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

/// Whether a process `sleep 1000` (the hung tc's) exists, from /proc: a `pgrep -f` would find
/// the shell that runs it.
fn sleep_runs() -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x001000\x00"))
}

real_kernel_test! {
    fn a_hung_tc_is_killed_at_its_deadline_and_frees_the_lock() needs ["cake", "ingress"] {
        let ns = Netns::new();
        let shaped = ["start", "eth0", "--down", "20mbit", "--up", "5mbit"];
        assert!(ns.unbloat(&shaped).status.success());
        let old = ns.snapshot();
        let tc = tc_hanging_on_apply(&ns);
        let change = ["start", "eth0", "--down", "50mbit", "--up", "10mbit"];
        let t0 = Instant::now();
        let out = ns.unbloat_env(&change, &[("UNBLOAT_TC", &tc), ("UNBLOAT_CHILD_TIMEOUT_MS", "2000")]);
        let took = t0.elapsed();
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains("`tc -batch -` did not finish within 2 s and was killed"), "{msg}");
        assert!(took < Duration::from_secs(30), "{took:?}: {msg}");
        assert_eq!(ns.snapshot(), old, "the failed change was not undone");
        assert!(!sleep_runs(), "the hung tc's sleep outlived it");
        // The lock is free: the next change goes through at once.
        let t0 = Instant::now();
        let out = ns.unbloat(&change);
        assert!(out.status.success(), "{}", text(&out));
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
        assert_ne!(ns.snapshot(), old);
        assert!(ns.unbloat(&["stop", "eth0"]).status.success());
    }
}
