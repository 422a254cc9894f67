//! The kernel runner for real: commands in a kernel that has cake (the host's if it has it, else
//! User-Mode Linux), their status and output, the timeout, a crashing guest, and the test re-exec
//! helper. Needs root when the host kernel is probed (make test runs as root); UML itself does not.

use std::time::{Duration, Instant};

use unbloat_testbed::kernel::slot::{self, Share};
use unbloat_testbed::kernel::{run_test_in_real_kernel, GuestOptions, Kernel, KernelError, Uml};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn sh(script: &str) -> Vec<String> {
    argv(&["sh", "-c", script])
}

fn kernel_with_cake() -> Kernel {
    Kernel::detect(&["cake", "htb"]).unwrap_or_else(|e| panic!("{e}"))
}

/// UML explicitly, for what only a guest can show (and what must never run on the host).
fn uml() -> Kernel {
    Kernel::Uml(Uml::find().unwrap_or_else(|e| panic!("these tests need User-Mode Linux: {e}")))
}

#[test]
fn a_command_in_the_kernel_can_put_cake_on_a_veth() {
    let ns = format!("unbloat-krtest-{}", std::process::id());
    let script = format!(
        "set -e; trap 'ip netns del {ns} 2>/dev/null' EXIT; ip netns add {ns}; \
         ip -n {ns} link add vethleft type veth peer name vethright; \
         tc -n {ns} qdisc add dev vethleft root cake bandwidth 10mbit diffserv4; \
         tc -n {ns} -j qdisc show dev vethleft"
    );
    let out = kernel_with_cake()
        .run(&sh(&script), &GuestOptions::default())
        .unwrap();
    assert_eq!(out.status, 0, "{out:?}");
    let qdiscs: serde_json::Value = serde_json::from_str(&out.stdout).expect("tc -j prints JSON");
    assert_eq!(qdiscs[0]["kind"], "cake", "{qdiscs}");
    assert_eq!(qdiscs[0]["options"]["diffserv"], "diffserv4", "{qdiscs}");
    // tc -j gives cake's bandwidth in bytes per second: 10 Mbit/s = 1 250 000 B/s.
    assert_eq!(qdiscs[0]["options"]["bandwidth"], 1_250_000, "{qdiscs}");
}

#[test]
fn status_stdout_and_stderr_come_out_and_stdin_is_empty() {
    let kernel = kernel_with_cake();
    let out = kernel
        .run(
            &sh("cat; printf 'out \\342\\234\\223\\n'; echo err >&2; exit 42"),
            &GuestOptions::default(),
        )
        .unwrap();
    assert_eq!(
        (out.status, out.stdout.as_str(), out.stderr.as_str()),
        (42, "out ✓\n", "err\n")
    );
    let out = kernel
        .run(&argv(&["true"]), &GuestOptions::default())
        .unwrap();
    assert_eq!(out.status, 0);
    let out = kernel.run(
        &argv(&["unbloat-no-such-program"]),
        &GuestOptions::default(),
    );
    match out {
        Ok(out) => assert_eq!(out.status, 127, "in a guest the shell reports it: {out:?}"),
        Err(e) => assert!(e.to_string().contains("unbloat-no-such-program"), "{e}"),
    }
}

#[test]
fn a_guest_runs_where_we_are_with_our_environment_and_its_own_root() {
    let opts = GuestOptions {
        env: vec![("UNBLOAT_KR_TEST".into(), "it's \"quoted\" $HOME".into())],
        ..GuestOptions::default()
    };
    let out = uml()
        .run(&sh("pwd; echo \"$UNBLOAT_KR_TEST\"; echo $UNBLOAT_IN_GUEST; id -u; cat /proc/sys/net/ipv4/ping_group_range"), &opts)
        .unwrap();
    let cwd = std::env::current_dir().unwrap();
    let expected = format!(
        "{}\nit's \"quoted\" $HOME\n1\n0\n0\t2147483647\n",
        cwd.display()
    );
    assert_eq!(out.stdout, expected, "{out:?}");
}

#[test]
fn a_guest_that_runs_too_long_is_killed_with_everything_it_started() {
    let started = Instant::now();
    let opts = GuestOptions {
        timeout: Duration::from_secs(8),
        ..GuestOptions::default()
    };
    let err = uml().run(&argv(&["sleep", "600"]), &opts).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(err, KernelError::Timeout { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("`sleep 600` did not finish within 8 s"),
        "{msg}"
    );
    assert!(
        msg.contains("the last lines it logged"),
        "the boot log is quoted: {msg}"
    );
    let run_dirs = format!("unbloat-uml-{}-", std::process::id());
    // Killed, but a process of a loaded host can still be on its way out for a moment (CI once
    // listed two UML processes right after the timeout); a survivor stays past a second.
    let mut left = processes_mentioning(&run_dirs);
    for _ in 0..20 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = processes_mentioning(&run_dirs);
    }
    assert_eq!(
        left,
        Vec::<String>::new(),
        "UML processes survived the timeout"
    );
    assert_eq!(leftover_run_dirs(&run_dirs), Vec::<String>::new());
}

#[test]
fn a_guest_that_dies_before_reporting_is_an_error_quoting_its_log() {
    // Powers the guest off at once: only ever in UML, never on the host.
    let err = uml()
        .run(
            &sh("echo o > /proc/sysrq-trigger; sleep 30"),
            &GuestOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(err, KernelError::GuestCrashed { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("ended without reporting the exit status"),
        "{err}"
    );
}

#[test]
fn the_reexec_helper_refuses_a_test_that_does_not_exist() {
    let kernel = kernel_with_cake();
    let result = std::panic::catch_unwind(|| {
        run_test_in_real_kernel("kernel_runner::no_such_test", &["cake"])
    });
    match kernel {
        // The host has cake: the caller runs the body here, no re-exec.
        Kernel::Host => assert!(matches!(result, Ok(true))),
        Kernel::Uml(_) => {
            let panic = result.expect_err("a misnamed test must not pass");
            let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains("did not run exactly one test"), "{msg}");
        }
    }
}

/// Bug: the guests these tests boot through `Kernel::run` took no slot, so `make test` ran an
/// `alone` test beside them (the lab's real sqm-scripts, crates/lab/tests/script.rs, measured a
/// steady p95 of 103 ms against its 30). Now a guest holds a shared slot while it runs, however
/// it was booted: an `alone` test asked for meanwhile starts only once the guest has ended and its
/// run directory is gone.
#[test]
fn an_alone_test_waits_for_a_guest_that_kernel_run_booted_without_a_slot_of_its_own() {
    let uml = uml();
    let scratch = Scratch::new("slot");
    let running = scratch.0.join("running");
    let script = format!("touch '{}' && sleep 4", running.display());
    let guest = std::thread::spawn(move || uml.run(&sh(&script), &GuestOptions::default()));
    // The guest's own run directory: the one whose init runs this script.
    let started = Instant::now();
    let run_dir = loop {
        if running.exists() {
            break run_dir_running(&running.display().to_string()).expect("its run directory");
        }
        assert!(
            started.elapsed() < Duration::from_secs(120) && !guest.is_finished(),
            "the guest never ran its command"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let alone = slot::take(Share::Alone, "this test").expect("the guests' lock files");
    assert!(
        !run_dir.exists(),
        "an alone test started while a guest ran ({})",
        run_dir.display()
    );
    drop(alone);
    let out = guest
        .join()
        .expect("the guest's thread")
        .expect("the guest ran");
    assert_eq!(out.status, 0, "{out:?}");
}

/// A directory of ours under the temporary directory, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let tmp = std::path::absolute(std::env::temp_dir()).expect("the temporary directory");
        Scratch(
            unbloat_safefs::private_dir(&tmp, &format!("unbloat-kr-{tag}")).expect("a scratch dir"),
        )
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The run directory of this process's guest whose PID 1 script names `needle`.
fn run_dir_running(needle: &str) -> Option<std::path::PathBuf> {
    let prefix = format!("unbloat-uml-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .find(|d| std::fs::read_to_string(d.join("init")).is_ok_and(|t| t.contains(needle)))
}

unbloat_testbed::real_kernel_test! {
    /// Runs in a kernel with cake and htb; its body checks it really does.
    fn the_reexec_helper_runs_the_body_in_a_kernel_with_cake() needs ["cake", "htb"] {
        let ns = format!("unbloat-krbody-{}", std::process::id());
        let script = format!(
            "set -e; trap 'ip netns del {ns}' EXIT; ip netns add {ns}; \
             tc -n {ns} qdisc add dev lo root cake; tc -n {ns} qdisc show dev lo"
        );
        let out = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("qdisc cake"), "{out:?}");
    }
}

/// Command lines of live processes that contain `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

fn leftover_run_dirs(prefix: &str) -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}
