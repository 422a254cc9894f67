//! LuCI's views read and drive unbloat through rpcd's exec plugin
//! (`packaging/openwrt/luci/rpcd/luci.unbloat`, installed as /usr/libexec/rpcd/luci.unbloat).
//! rpcd and LuCI are not here (docs/openwrt.md says why); the plugin is run as rpcd runs it
//! (`list`, then `call METHOD` with the arguments on stdin), under busybox's ash (OpenWrt's
//! /bin/sh) with libubox's jshn (scripts/openwrt/userland builds it), in a real kernel, and what
//! it prints is what rpcd would hand the view:
//! - `list` names the methods the views call, and nothing else (the ACL grants exactly those);
//! - `call status` is one JSON object whose `interfaces` carry each shaped device's tins with
//!   the numbers the view draws (delays, drops, marks), and `exit` 0;
//! - with nothing shaped, an empty list and still a JSON object; an unknown method is refused;
//! - `test_start` refuses a far end that is not one, or anything that is not an argument it
//!   takes, and starts nothing; a good one returns at once, a second start is refused while the
//!   test runs, `test_status` tells its progress and then its grade, figures and plots, and
//!   `test_plot` hands over the SVG; a state directory that is a planted link is refused;
//! - `test_cancel` stops the test it started (the process gone, the run `cancelled`, the next
//!   start allowed), and nothing else: a pid file naming another process, or a link, or a run
//!   whose recorded subshell is not the plugin's, is refused with that process left running;
//! - `tune_start` refuses what is not a device's name or an `unbloat serve` far end, and anything
//!   it does not take, starting nothing; it is refused while a test runs, and a test while it
//!   runs; `tune_cancel` stops a real tune that has changed the shaping, and the shaping from
//!   before it is back, exactly; a finished tune's status carries the rates and link options it
//!   found (the test knob `UNBLOAT_TUNE_RESULT` stands for its minutes of load there);
//! - `import_sqm` shows what sqm's /etc/config/sqm becomes and writes nothing;
//!   `import_sqm_apply` writes it only over the files the preview showed.
//!
//! The plugin's paths are a router's (/etc/config, /usr/share/libubox/jshn.sh): each test runs
//! in a mount namespace of its own where /etc and /usr/share are overlays whose writes land in a
//! tmpfs ([`RouterFiles`]), so this machine's files are never touched.

mod common;

use common::Netns;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use unbloat_testbed::real_kernel_test;

/// The plugin's output for `args`, run as rpcd would (stdin: the call's arguments, `{}` when it
/// has none), in `ns`, under busybox's ash, with the tests' unbloat and OpenWrt's jshn first on
/// PATH.
fn plugin(ns: &Netns, args: &[&str]) -> (Option<i32>, String) {
    plugin_with(ns, args, "{}")
}

fn plugin_with(ns: &Netns, args: &[&str], input: &str) -> (Option<i32>, String) {
    plugin_env(ns, args, input, &[])
}

/// As [`plugin_with`], with `env` added to the plugin's environment (and so to the unbloat it
/// starts: the tests' knobs).
fn plugin_env(
    ns: &Netns,
    args: &[&str],
    input: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging/openwrt/luci/rpcd/luci.unbloat");
    let bin_dir = Path::new(common::UNBLOAT).parent().unwrap();
    let path = format!(
        "{}:{}/bin:{}",
        bin_dir.display(),
        userland().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "busybox", "sh"])
        .arg(&script)
        .args(args)
        .env("PATH", path)
        .env("UNBLOAT_RUN_DIR", &ns.run_dir)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// `call METHOD` with `input`: what it answered, as JSON (exit status 0: rpcd hands on what is
/// printed, a refusal too).
fn call(ns: &Netns, method: &str, input: &serde_json::Value) -> serde_json::Value {
    let (code, text) = plugin_with(ns, &["call", method], &input.to_string());
    assert_eq!(code, Some(0), "{method} {input}: {text}");
    json(&text)
}

/// OpenWrt's jshn and jshn.sh, built by scripts/openwrt/userland (make test does it first).
fn userland() -> PathBuf {
    let dir = PathBuf::from("/var/cache/unbloat/openwrt");
    assert!(
        dir.join("bin/jshn").is_file() && dir.join("share/libubox/jshn.sh").is_file(),
        "{}: OpenWrt's jshn is not built here; run scripts/openwrt/userland (make test does)",
        dir.display()
    );
    dir
}

/// A router's files for the plugin, in a mount namespace of this thread's own (every process
/// the test starts from it is in it too): /etc and /usr/share are overlays over this machine's
/// whose writes land in a tmpfs, /etc/config exists, and jshn.sh is where OpenWrt installs it.
/// The mounts go with the thread; the scratch directory is removed on drop.
struct RouterFiles {
    scratch: PathBuf,
}

impl RouterFiles {
    fn new() -> RouterFiles {
        // SAFETY: unshare(2) with a constant flag; it changes only this thread's namespaces.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNS) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let scratch =
            std::env::temp_dir().join(format!("luci-rpcd-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        let s = scratch.display();
        common::must(&format!(
            "set -e; mount --make-rprivate /; mount -t tmpfs tmpfs {s}
             for d in etc usr/share; do
               n=$(echo $d | tr / _); mkdir -p {s}/$n/upper {s}/$n/work
               mount -t overlay overlay -o lowerdir=/$d,upperdir={s}/$n/upper,workdir={s}/$n/work /$d
             done
             mkdir -p /etc/config /usr/share/libubox
             cp {}/share/libubox/jshn.sh /usr/share/libubox/jshn.sh",
            userland().display()
        ));
        let busybox = common::sh("busybox true");
        assert!(
            busybox.status.success(),
            "busybox is not installed (OpenWrt's shell: scripts/install-deps test installs it)"
        );
        RouterFiles { scratch }
    }
}

impl Drop for RouterFiles {
    fn drop(&mut self) {
        let _ = common::sh(&format!(
            "umount -l /etc /usr/share {}",
            self.scratch.display()
        ));
        let _ = std::fs::remove_dir(&self.scratch);
    }
}

/// The Test tab's router: its files, `wan0` shaped at 20/5 Mbit/s, and `unbloat serve` listening
/// at the far end (10.9.0.2:4420), killed by the caller.
fn shaped_router_and_far_end() -> (RouterFiles, Netns, common::FarEnd, std::process::Child) {
    let files = RouterFiles::new();
    let ns = Netns::new();
    let far = ns.wan_to_far_end();
    let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit"]);
    assert!(out.status.success(), "{}", common::text(&out));
    let serve = Command::new("ip")
        .args([
            "netns",
            "exec",
            &far.0,
            common::UNBLOAT,
            "serve",
            "--listen",
            "10.9.0.2:4420",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let listening = common::wait_until(Duration::from_secs(20), || {
        common::text(&common::sh(&format!(
            "ip netns exec {} ss -Hltn 'sport = :4420'",
            far.0
        )))
        .contains("4420")
    });
    assert!(listening.is_some(), "unbloat serve did not listen");
    (files, ns, far, serve)
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

real_kernel_test! {
    fn rpcds_plugin_gives_the_status_view_each_tins_numbers() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");

        let (code, listed) = plugin(&ns, &["list"]);
        assert_eq!(code, Some(0));
        let methods: Vec<String> = json(&listed).as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            methods,
            ["import_sqm", "import_sqm_apply", "status", "test_cancel", "test_plot", "test_start", "test_status",
             "tune_cancel", "tune_start", "tune_status"],
            "{listed}"
        );

        let (code, empty) = plugin(&ns, &["call", "status"]);
        assert_eq!(code, Some(0));
        assert_eq!(json(&empty)["interfaces"], serde_json::json!([]), "{empty}");

        let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit", "--diffserv", "diffserv4"]);
        assert!(out.status.success(), "{}", common::text(&out));
        let (code, text) = plugin(&ns, &["call", "status"]);
        assert_eq!(code, Some(0));
        let status = json(&text);
        assert_eq!(status["exit"], 0, "{text}");
        let wan = &status["interfaces"][0];
        assert_eq!(wan["device"], "wan0", "{text}");
        for dir in ["egress", "ingress"] {
            let tins = wan[dir]["shaper"]["tins"].as_array().unwrap_or_else(|| panic!("no {dir} tins: {text}"));
            assert_eq!(tins.len(), 4, "diffserv4 has four tins: {text}");
            for tin in tins {
                for key in ["name", "avg_delay_us", "peak_delay_us", "sparse_delay_us", "drops", "ecn_marks", "backlog_bytes"] {
                    assert!(!tin[key].is_null(), "{dir} tin without {key}: {tin}");
                }
            }
        }

        let (code, refused) = plugin(&ns, &["call", "stop"]);
        assert_eq!(code, Some(2), "{refused}");
        assert!(json(&refused)["error"].is_string());
    }

    /// The Test tab: a far end that is not one, an argument the plugin does not take, or a state
    /// directory planted as a link starts nothing; a good start returns at once and runs
    /// `unbloat test` in the background through a shaped link to `unbloat serve`; a second start
    /// is refused while it runs; its progress shows while it runs, then its grade, figures and
    /// plots; after it, the next test may start.
    fn the_test_tab_runs_one_test_at_a_time_and_refuses_what_is_not_a_far_end() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let (_files, ns, _far, mut serve) = shaped_router_and_far_end();
        let state = Path::new("/var/run/unbloat-luci");
        let _ = std::fs::remove_dir_all(state);

        // Refused, each with its reason, and nothing started: no state, no shell ran.
        let marker = std::env::temp_dir().join(format!("luci-rpcd-pwned-{}", std::process::id()));
        let m = marker.display();
        let refused = [
            (serde_json::json!({"server": format!("10.9.0.2;touch {m}")}), "server"),
            (serde_json::json!({"server": format!("$(touch {m})")}), "server"),
            (serde_json::json!({"server": format!("10.9.0.2`touch {m}`")}), "server"),
            (serde_json::json!({"server": "10.9.0.2 --load iperf3://10.9.0.2"}), "server"),
            (serde_json::json!({"server": "--help"}), "server"),
            (serde_json::json!({"server": "http://10.9.0.2/"}), "server"),
            (serde_json::json!({"server": ""}), "server"),
            (serde_json::json!({}), "server"),
            (serde_json::json!({"server": 4420}), "server"),
            (serde_json::json!({"server": ["10.9.0.2"]}), "server"),
            (serde_json::json!({"server": "10.9.0.2", "profile": "rrul; reboot"}), "profile"),
            (serde_json::json!({"server": "10.9.0.2", "duration": 1}), "duration"),
            (serde_json::json!({"server": "10.9.0.2", "duration": 3600}), "duration"),
            (serde_json::json!({"server": "10.9.0.2", "duration": "30"}), "duration"),
            (serde_json::json!({"server": "10.9.0.2", "out": "/etc"}), "unknown argument"),
        ];
        for (input, reason) in &refused {
            let answer = call(&ns, "test_start", input);
            let error = answer["error"].as_str().unwrap_or_else(|| panic!("{input} was not refused: {answer}"));
            assert!(error.contains(reason), "{input}: {error}");
        }
        let (_, text) = plugin_with(&ns, &["call", "test_start"], "[\"10.9.0.2\"]");
        assert!(json(&text)["error"].is_string(), "{text}");
        assert!(!marker.exists(), "a shell ran what came in the server argument");
        assert_eq!(call(&ns, "test_status", &serde_json::json!({})), serde_json::json!({"state": "none"}));
        assert!(!state.join("test").exists(), "a refused start left a test directory");

        // A link planted where the state directory goes is not followed.
        let victim = std::env::temp_dir().join(format!("luci-rpcd-victim-{}", std::process::id()));
        std::fs::create_dir_all(&victim).unwrap();
        let _ = std::fs::remove_dir(state);
        std::os::unix::fs::symlink(&victim, state).unwrap();
        let good = serde_json::json!({"server": "10.9.0.2", "profile": "rrul", "duration": 5});
        let answer = call(&ns, "test_start", &good);
        assert!(answer["error"].as_str().is_some_and(|e| e.contains("symbolic link")), "{answer}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "written through the link");
        std::fs::remove_file(state).unwrap();
        std::fs::remove_dir(&victim).unwrap();

        // A good one returns at once; the test runs on (5 s idle, 5 s of load, 5 s idle).
        let t0 = Instant::now();
        let answer = call(&ns, "test_start", &good);
        assert_eq!(answer["started"], true, "{answer}");
        assert!(t0.elapsed() < Duration::from_secs(10), "test_start waited for the test ({:?})", t0.elapsed());
        let again = call(&ns, "test_start", &good);
        assert!(again["error"].as_str().is_some_and(|e| e.contains("running")), "a second test started: {again}");
        let mode = std::fs::symlink_metadata(state).unwrap();
        assert!(mode.is_dir() && mode.permissions().mode() & 0o777 == 0o700, "{mode:?}");

        let mut progress = None;
        let done = common::wait_until(Duration::from_secs(180), || {
            let st = call(&ns, "test_status", &serde_json::json!({}));
            if st["state"] == "running" && st["total_s"].is_u64() {
                progress = Some(st.clone());
            }
            std::thread::sleep(Duration::from_millis(500));
            st["state"] == "finished"
        });
        assert!(done.is_some(), "the test did not finish: {}", call(&ns, "test_status", &serde_json::json!({})));
        let progress = progress.expect("no progress was shown while the test ran");
        assert!(progress["total_s"].as_u64().unwrap() >= 15, "{progress}");
        assert_eq!(progress["server"], "10.9.0.2", "{progress}");

        let st = call(&ns, "test_status", &serde_json::json!({}));
        assert_eq!(st["exit"], 0, "{st}");
        let grade = st["summary"]["grade"].as_str().unwrap_or_else(|| panic!("no grade: {st}"));
        assert!(["A+", "A", "B", "C", "D", "F"].contains(&grade), "{grade}");
        // Through the 20 Mbit/s shaper: the four download streams carried most of it, and no more.
        let down = st["summary"]["download"]["goodput_bps"].as_f64().unwrap_or_else(|| panic!("{st}"));
        assert!((5e6..=20.5e6).contains(&down), "download goodput {down} through a 20 Mbit/s shaper");
        assert!(st["summary"]["idle_latency_ms"].is_f64(), "{st}");
        let results = st["results"].as_str().unwrap_or_else(|| panic!("no results file: {st}"));
        assert!(Path::new(results).is_file(), "{results}");
        let plots: Vec<&str> = st["plots"].as_array().unwrap().iter().filter_map(|p| p.as_str()).collect();
        assert!(plots.contains(&"timeseries") && plots.contains(&"latency_cdf"), "{st}");

        let plot = call(&ns, "test_plot", &serde_json::json!({"name": "timeseries"}));
        let svg = plot["svg"].as_str().unwrap_or_else(|| panic!("{plot}"));
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        let file = std::fs::read_dir(state.join("test/out")).unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("-timeseries.svg")).unwrap();
        assert_eq!(svg.trim_end(), std::fs::read_to_string(file).unwrap().trim_end(), "the plot as unbloat drew it");
        for name in [serde_json::json!("../../../etc/passwd"), serde_json::json!("timeseries.svg"), serde_json::json!(1)] {
            let refused = call(&ns, "test_plot", &serde_json::json!({"name": name}));
            assert!(refused["error"].is_string(), "{name}: {refused}");
        }

        // The test is over: the next one may start.
        let next = call(&ns, "test_start", &serde_json::json!({"server": "unbloat://10.9.0.2:4420", "profile": "ping", "duration": 5}));
        assert_eq!(next["started"], true, "{next}");
        let done = common::wait_until(Duration::from_secs(120), || {
            std::thread::sleep(Duration::from_millis(500));
            call(&ns, "test_status", &serde_json::json!({}))["state"] == "finished"
        });
        assert!(done.is_some(), "the second test did not finish");
        let st = call(&ns, "test_status", &serde_json::json!({}));
        assert_eq!((st["exit"].clone(), st["profile"].clone()), (serde_json::json!(0), serde_json::json!("ping")), "{st}");

        let _ = serve.kill();
        let _ = serve.wait();
        let _ = std::fs::remove_dir_all(state);
    }

    /// The Test tab's Cancel: nothing to cancel is refused; a running test's pid file replaced by
    /// another process's pid, by a link to a file with the test's pid, or its subshell's by
    /// another's, and the plugin signals nothing; the real one is stopped at once (long before its
    /// 60 s), its process is gone, its status says cancelled, and the next test may start. Through
    /// a shaped link, as on a router (and a load that stays at its 20 Mbit/s).
    fn the_test_tab_cancels_its_own_test_and_signals_nothing_else() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let (_files, ns, _far, mut serve) = shaped_router_and_far_end();
        let state = Path::new("/var/run/unbloat-luci");
        let run = state.join("test");
        let _ = std::fs::remove_dir_all(state);
        let none = call(&ns, "test_cancel", &serde_json::json!({}));
        assert!(none["error"].as_str().is_some_and(|e| e.contains("no test is running")), "{none}");
        assert!(call(&ns, "test_cancel", &serde_json::json!({"pid": 1}))["error"].as_str().is_some_and(|e| e.contains("unknown argument")));

        let answer = call(&ns, "test_start", &serde_json::json!({"server": "10.9.0.2", "profile": "rrul", "duration": 60}));
        assert_eq!(answer["started"], true, "{answer}");
        let t0 = Instant::now();
        let pid_of = |file: &str| -> Option<u32> { std::fs::read_to_string(run.join(file)).ok()?.trim().parse().ok() };
        assert!(common::wait_until(Duration::from_secs(10), || pid_of("unbloat.pid").is_some()).is_some(), "no pid recorded");
        let (runner, test) = (pid_of("pid").unwrap(), pid_of("unbloat.pid").unwrap());
        let alive = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        };
        // Forked, then unbloat: a moment later.
        let cmdline = || String::from_utf8_lossy(&std::fs::read(format!("/proc/{test}/cmdline")).unwrap_or_default()).into_owned();
        let started = common::wait_until(Duration::from_secs(5), || cmdline().starts_with("unbloat\0test\0"));
        assert!(started.is_some(), "{:?}", cmdline());

        // Decoys: a process of the test's own, whose pid is planted in the plugin's files.
        let mut decoy = Command::new("sleep").arg("300").spawn().unwrap();
        let plant = |file: &str, text: String| {
            let part = run.join(format!("{file}.planted"));
            std::fs::write(&part, text).unwrap();
            std::fs::rename(&part, run.join(file)).unwrap();
        };
        let refused = |what: &str, why: &str| {
            let answer = call(&ns, "test_cancel", &serde_json::json!({}));
            assert!(answer["error"].as_str().is_some_and(|e| e.contains(why)), "{what}: {answer}");
            assert!(alive(decoy.id()), "{what}: the plugin signalled another process");
            assert!(alive(test), "{what}: the test was stopped");
            assert!(!run.join("cancelled").exists(), "{what}: recorded as cancelled");
        };
        plant("unbloat.pid", format!("{}\n", decoy.id()));
        let not_ours = "not one this plugin can stop";
        refused("another process's pid", not_ours);
        plant("unbloat.pid", format!("{} ", test));
        refused("a pid with a space", not_ours);
        let elsewhere = std::env::temp_dir().join(format!("luci-rpcd-pid-{}", std::process::id()));
        std::fs::write(&elsewhere, format!("{test}\n")).unwrap();
        std::fs::remove_file(run.join("unbloat.pid")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, run.join("unbloat.pid")).unwrap();
        refused("a link to the test's pid", not_ours);
        std::fs::remove_file(run.join("unbloat.pid")).unwrap();
        std::fs::remove_file(&elsewhere).unwrap();
        plant("unbloat.pid", format!("{test}\n"));
        plant("pid", format!("{}\n", decoy.id()));
        // Its subshell is not the plugin's: no test of its own runs.
        refused("another process as the subshell", "no test is running");
        plant("pid", format!("{runner}\n"));
        assert_eq!(call(&ns, "test_status", &serde_json::json!({}))["state"], "running");

        // The real one.
        let answer = call(&ns, "test_cancel", &serde_json::json!({}));
        assert_eq!(answer["cancelled"], true, "{answer}");
        assert_eq!(answer["exit"], 143, "SIGTERM: {answer}");
        assert!(t0.elapsed() < Duration::from_secs(40), "cancelled only after {:?}", t0.elapsed());
        assert!(common::wait_until(Duration::from_secs(5), || !alive(test) && !alive(runner)).is_some(), "the test's processes are still there");
        assert!(alive(decoy.id()), "the decoy was signalled");
        let st = call(&ns, "test_status", &serde_json::json!({}));
        assert_eq!((st["state"].as_str(), st["error"].as_str()), (Some("cancelled"), Some("cancelled")), "{st}");
        assert!(call(&ns, "test_plot", &serde_json::json!({"name": "timeseries"}))["error"].is_string());
        let again = call(&ns, "test_cancel", &serde_json::json!({}));
        assert!(again["error"].as_str().is_some_and(|e| e.contains("no test is running")), "{again}");

        // The next test may start, and ends by itself.
        let next = call(&ns, "test_start", &serde_json::json!({"server": "10.9.0.2", "profile": "ping", "duration": 5}));
        assert_eq!(next["started"], true, "{next}");
        let done = common::wait_until(Duration::from_secs(120), || {
            std::thread::sleep(Duration::from_millis(500));
            call(&ns, "test_status", &serde_json::json!({}))["state"] == "finished"
        });
        assert!(done.is_some(), "the next test did not finish: {}", call(&ns, "test_status", &serde_json::json!({})));

        let _ = decoy.kill();
        let _ = decoy.wait();
        let _ = serve.kill();
        let _ = serve.wait();
        let _ = std::fs::remove_dir_all(state);
    }

    /// The Tune tab: refusals start nothing; a tune and a test never run at once; a real tune,
    /// cancelled once it has taken the shaping off to measure the line, puts the shaping from
    /// before back exactly, and shows as cancelled; a finished one shows what it found.
    #[cfg(feature = "tune")]
    fn the_tune_tab_puts_the_shaping_back_when_cancelled_and_shows_what_it_found() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let (_files, ns, _far, mut serve) = shaped_router_and_far_end();
        let state = Path::new("/var/run/unbloat-luci");
        let run = state.join("tune");
        let _ = std::fs::remove_dir_all(state);
        let none = serde_json::json!({});

        // Refused, each with its reason, and nothing started.
        let marker = std::env::temp_dir().join(format!("luci-rpcd-tune-pwned-{}", std::process::id()));
        let m = marker.display();
        let refused = [
            (serde_json::json!({"device": format!("wan0;touch {m}"), "server": "10.9.0.2"}), "device"),
            (serde_json::json!({"device": "-h", "server": "10.9.0.2"}), "device"),
            (serde_json::json!({"device": "wan0wan0wan0wan0", "server": "10.9.0.2"}), "device"),
            (serde_json::json!({"device": "", "server": "10.9.0.2"}), "device"),
            (serde_json::json!({"server": "10.9.0.2"}), "device"),
            (serde_json::json!({"device": 0, "server": "10.9.0.2"}), "device"),
            (serde_json::json!({"device": "wan0", "server": format!("$(touch {m})")}), "server"),
            (serde_json::json!({"device": "wan0", "server": "irtt://10.9.0.2"}), "server"),
            (serde_json::json!({"device": "wan0", "server": "iperf3://10.9.0.2"}), "server"),
            (serde_json::json!({"device": "wan0"}), "server"),
            (serde_json::json!({"device": "wan0", "server": "10.9.0.2", "apply": true}), "unknown argument"),
        ];
        for (input, reason) in &refused {
            let answer = call(&ns, "tune_start", input);
            let error = answer["error"].as_str().unwrap_or_else(|| panic!("{input} was not refused: {answer}"));
            assert!(error.contains(reason), "{input}: {error}");
        }
        assert!(!marker.exists(), "a shell ran what came in an argument");
        assert_eq!(call(&ns, "tune_status", &none), serde_json::json!({"state": "none"}));
        assert!(!run.exists(), "a refused start left a tune directory");
        let nothing = call(&ns, "tune_cancel", &none);
        assert!(nothing["error"].as_str().is_some_and(|e| e.contains("no tune is running")), "{nothing}");

        // A test runs: no tune beside it.
        let test = call(&ns, "test_start", &serde_json::json!({"server": "10.9.0.2", "profile": "ping", "duration": 60}));
        assert_eq!(test["started"], true, "{test}");
        let beside = call(&ns, "tune_start", &serde_json::json!({"device": "wan0", "server": "10.9.0.2"}));
        assert!(beside["error"].as_str().is_some_and(|e| e.contains("a test is running")), "{beside}");
        assert_eq!(call(&ns, "test_cancel", &none)["cancelled"], true);

        // A real tune: once it has taken wan0's shaping off (its capacity phase measures the line
        // unshaped), no test beside it, and its cancel puts the 20/5 Mbit/s cake back as it was.
        let before = ns.snapshot();
        let tune = call(&ns, "tune_start", &serde_json::json!({"device": "wan0", "server": "10.9.0.2"}));
        assert_eq!(tune["started"], true, "{tune}");
        let changed = common::wait_until(Duration::from_secs(60), || {
            std::thread::sleep(Duration::from_millis(200));
            !ns.tc("qdisc show dev wan0").contains("bandwidth 5Mbit")
        });
        assert!(changed.is_some(), "the tune did not change the shaping: {}", call(&ns, "tune_status", &none));
        let st = call(&ns, "tune_status", &none);
        assert_eq!((st["state"].as_str(), st["device"].as_str(), st["server"].as_str()), (Some("running"), Some("wan0"), Some("10.9.0.2")), "{st}");
        assert!(st["phase"].as_u64().is_some_and(|p| p >= 1) && st["phases"] == 6, "{st}");
        let test = call(&ns, "test_start", &serde_json::json!({"server": "10.9.0.2", "profile": "ping", "duration": 5}));
        assert!(test["error"].as_str().is_some_and(|e| e.contains("a tune is running")), "{test}");
        let cancelled = call(&ns, "tune_cancel", &none);
        assert_eq!((cancelled["cancelled"].clone(), cancelled["exit"].clone(), cancelled["killed"].clone()),
            (serde_json::json!(true), serde_json::json!(143), serde_json::json!(false)), "SIGTERM, and tune's own restore: {cancelled}");
        assert_eq!(ns.snapshot(), before, "the cancelled tune did not put the shaping back as it was");
        let st = call(&ns, "tune_status", &none);
        assert_eq!((st["state"].as_str(), st["error"].as_str()), (Some("cancelled"), Some("cancelled")), "{st}");
        assert!(st["result"].is_null(), "{st}");

        // A finished tune (its result from the test knob, in place of minutes of load): the
        // rates and link options it found, for the view to write into wan0's section.
        let result = ns.run_dir.join("tune-result.json");
        let cap = serde_json::json!({"goodput": "50mbit", "line": "55mbit"});
        std::fs::write(&result, serde_json::json!({
            "idle_rtt_ms": 1.0, "capacity_down": cap, "capacity_up": cap, "framing": null,
            "link": {}, "bound_down_ms": 10.0, "bound_up_ms": 10.0, "steps_down": [], "steps_up": [],
            "down": "33mbit", "up": "8mbit",
            "options": {"down": "33mbit", "up": "8mbit", "framing": "ptm", "overhead": 30, "mpu": 0},
            "seconds": 171.0, "ending": "the shaping from before the run was put back",
        }).to_string()).unwrap();
        let knob = [("UNBLOAT_TUNE_RESULT", result.to_str().unwrap())];
        let (code, text) = plugin_env(&ns, &["call", "tune_start"], r#"{"device": "wan0", "server": "10.9.0.2"}"#, &knob);
        assert_eq!((code, json(&text)["started"].clone()), (Some(0), serde_json::json!(true)), "{text}");
        let done = common::wait_until(Duration::from_secs(60), || {
            std::thread::sleep(Duration::from_millis(300));
            call(&ns, "tune_status", &none)["state"] == "finished"
        });
        assert!(done.is_some(), "the tune did not finish: {}", call(&ns, "tune_status", &none));
        let st = call(&ns, "tune_status", &none);
        assert_eq!(st["exit"], 0, "{st}");
        assert_eq!((st["result"]["down"].as_str(), st["result"]["up"].as_str()), (Some("33mbit"), Some("8mbit")), "{st}");
        assert_eq!(st["result"]["options"]["overhead"], 30, "{st}");
        assert!(run.join("out/unbloat.toml").is_file(), "tune wrote no config into its run's directory");
        assert_eq!(ns.snapshot(), before, "a tune without --apply left the shaping changed");

        let _ = serve.kill();
        let _ = serve.wait();
        let _ = std::fs::remove_dir_all(state);
    }

    /// Import from SQM: the preview shows what /etc/config/unbloat would become and the file it
    /// replaces, and changes nothing; apply writes it only with the preview's digest, over the
    /// files the preview showed, and with no unsaved LuCI changes to unbloat in the way.
    fn import_from_sqm_previews_without_writing_and_applies_only_what_was_shown() needs [] {
        let _files = RouterFiles::new();
        // A namespace for the plugin to run in, as in the other tests; this one needs no device.
        let name = format!("ubt-import-{}", std::process::id());
        common::must(&format!("ip netns add {name}"));
        let ns = Netns { run_dir: std::env::temp_dir().join(format!("{name}-run")), name };
        let config = Path::new("/etc/config");
        // The plugin's state directory (in a guest, /run is its own tmpfs; on a host, ours goes).
        let state = Path::new("/var/run/unbloat-luci");
        let had_state = state.exists();
        let no_sqm = call(&ns, "import_sqm", &serde_json::json!({}));
        assert!(no_sqm["error"].as_str().is_some_and(|e| e.contains("/etc/config/sqm")), "{no_sqm}");

        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shaper/tests/sqm_import/input");
        std::fs::copy(fixtures.join("several-queues.uci"), config.join("sqm")).unwrap();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/openwrt/unbloat.config");
        std::fs::copy(&shipped, config.join("unbloat")).unwrap();
        let snapshot = || -> Vec<(String, String)> {
            let mut files: Vec<(String, String)> = std::fs::read_dir(config).unwrap()
                .map(|e| e.unwrap().path())
                .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
                .collect();
            files.sort();
            files
        };
        let before = snapshot();

        let preview = call(&ns, "import_sqm", &serde_json::json!({}));
        let uci = preview["import"]["toml"].as_str().unwrap_or_else(|| panic!("{preview}"));
        for section in ["config interface 'wan'", "config interface 'guest'", "option down '85mbit'"] {
            assert!(uci.contains(section), "{section}: {uci}");
        }
        assert!(preview["import"]["notes"].as_array().is_some_and(|n| !n.is_empty()), "{preview}");
        assert_eq!(preview["current"], std::fs::read_to_string(&shipped).unwrap().as_str());
        assert_eq!(preview["sqm_enabled"], false);
        let digest = preview["digest"].as_str().unwrap().to_string();
        assert!(digest.len() == 32 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{digest}");
        assert_eq!(snapshot(), before, "the preview changed /etc/config");
        assert!(call(&ns, "import_sqm", &serde_json::json!({"apply": true}))["error"].is_string());

        // Refused: no digest, a wrong one, one that is not a digest; unsaved LuCI changes.
        for input in [
            serde_json::json!({}),
            serde_json::json!({"digest": "0123456789abcdef0123456789abcdef"}),
            serde_json::json!({"digest": format!("{digest}; rm -rf /etc")}),
            serde_json::json!({"digest": 12345}),
        ] {
            let answer = call(&ns, "import_sqm_apply", &input);
            assert!(answer["error"].is_string(), "{input}: {answer}");
        }
        // rpcd's per-session deltas (in a guest, /run is its own tmpfs; on a host, ours goes).
        let rpcd = Path::new("/var/run/rpcd");
        let had_rpcd = rpcd.exists();
        let session = rpcd.join("uci-luci-rpcd-test");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join("unbloat"), "unbloat.wan.enabled='1'\n").unwrap();
        let unsaved = call(&ns, "import_sqm_apply", &serde_json::json!({"digest": digest}));
        assert!(unsaved["error"].as_str().is_some_and(|e| e.contains("unsaved")), "{unsaved}");
        std::fs::remove_dir_all(&session).unwrap();
        if !had_rpcd {
            std::fs::remove_dir(rpcd).unwrap();
        }
        assert_eq!(snapshot(), before, "a refused apply changed /etc/config");

        // The file changed since the preview: refused, and the change kept.
        let mut edited = std::fs::read_to_string(config.join("unbloat")).unwrap();
        edited.push_str("# edited after the preview\n");
        std::fs::write(config.join("unbloat"), &edited).unwrap();
        let stale = call(&ns, "import_sqm_apply", &serde_json::json!({"digest": digest}));
        assert!(stale["error"].as_str().is_some_and(|e| e.contains("changed since the preview")), "{stale}");
        assert_eq!(std::fs::read_to_string(config.join("unbloat")).unwrap(), edited);

        // Previewed again, applied: the file is what the preview showed, and unbloat reads it.
        let preview = call(&ns, "import_sqm", &serde_json::json!({}));
        assert_eq!(preview["current"], edited.as_str());
        let applied = call(&ns, "import_sqm_apply", &serde_json::json!({"digest": preview["digest"]}));
        assert_eq!(applied["written"], "/etc/config/unbloat", "{applied}");
        assert_eq!(std::fs::read_to_string(config.join("unbloat")).unwrap(), preview["import"]["toml"].as_str().unwrap());
        let names: Vec<String> = snapshot().into_iter().map(|(p, _)| p).collect();
        assert_eq!(names, ["/etc/config/sqm", "/etc/config/unbloat"], "left behind beside the config");
        let check = ns.unbloat(&["config", "check", "/etc/config/unbloat"]);
        assert!(check.status.success(), "{}", common::text(&check));
        if !had_state {
            let _ = std::fs::remove_dir_all(state);
        }
    }
}
