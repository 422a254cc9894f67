//! `unbloat config import-sqm` through the built binary: exit statuses, what goes to stdout,
//! stderr and `--out`, and that what it writes is what `unbloat config check` and `unbloat plan
//! --config` take. The inputs are the golden cases of crates/shaper/tests/sqm_import; the mapping
//! itself is pinned there. `--check` runs the real sqm-scripts (the vendored
//! third_party/sqm-scripts, given with --sqm-scripts) with tc, ip and iptables shadowed: nothing
//! here needs root or touches the network. It runs sqm-scripts only from where it is told, or from
//! where distributions install it, and only when no one else could have changed it: the last tests
//! plant scripts that would leave a mark if they ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

fn input(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shaper/tests/sqm_import/input")
        .join(name)
        .display()
        .to_string()
}

/// A throw-away directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "unbloat-import-sqm-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        Dir(p)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unbloat(args: &[&str]) -> Output {
    unbloat_in(None, args)
}

/// `unbloat ARGS`, in directory `cwd` when given.
fn unbloat_in(cwd: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(UNBLOAT);
    cmd.args(args)
        // No state of a real install is read or written.
        .env(
            "UNBLOAT_RUN_DIR",
            std::env::temp_dir().join("unbloat-import-sqm-run"),
        );
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    cmd.output().expect("unbloat runs")
}

/// The vendored sqm-scripts, third_party/sqm-scripts of this repository.
fn vendored_sqm() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../third_party/sqm-scripts")
}

/// Where distributions install sqm-scripts, which `--check` uses without `--sqm-scripts`.
const SYSTEM_SQM: &str = "/usr/lib/sqm/start-sqm";

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn sqm_import_prints_toml_and_notes_and_the_result_plans() {
    let o = unbloat(&["config", "import-sqm", &input("several-queues.uci")]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let toml = out(&o);
    assert!(
        toml.contains("[interface.eth1]\ndown = \"85000kbit\""),
        "{toml}"
    );
    assert!(
        toml.contains("# [interface.wwan0]"),
        "disabled, commented out: {toml}"
    );
    // Notes on stderr, the mapped ones only as comments in the TOML.
    let e = err(&o);
    assert!(
        e.contains("unbloat: queue 'lte': enabled '0': warning: disabled"),
        "{e}"
    );
    assert!(e.contains("eth1 again"), "{e}");
    assert!(!e.contains(": mapped:"), "{e}");
    // What it printed is a config unbloat takes.
    let dir = Dir::new("plans");
    let file = dir.path("unbloat.toml");
    std::fs::write(&file, &toml).expect("write");
    let c = unbloat(&["config", "check", &file]);
    assert_eq!(c.status.code(), Some(0), "{}", err(&c));
    assert!(err(&c).contains("valid (2 interfaces)"), "{}", err(&c));
    let p = unbloat(&["plan", "--config", &file]);
    assert_eq!(p.status.code(), Some(0), "{}", err(&p));
    assert!(out(&p).contains("cake bandwidth 10mbit"), "{}", out(&p));
}

#[test]
fn sqm_import_out_refuses_to_overwrite_without_force() {
    let dir = Dir::new("out");
    let file = dir.path("unbloat.toml");
    let args = |extra: &[&str]| -> Output {
        let mut a = vec!["config", "import-sqm", "--out", &file];
        a.extend_from_slice(extra);
        unbloat(&a)
    };
    let o = args(&[&input("layer-cake-diffserv4.uci")]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).is_empty(), "the TOML goes to the file: {}", out(&o));
    assert!(
        err(&o).contains(&format!("wrote {file} (1 interface)")),
        "{}",
        err(&o)
    );
    let first = std::fs::read_to_string(&file).expect("written");
    assert!(first.contains("isolation = \"dual-host\""), "{first}");

    let o = args(&[&input("adsl-cake-atm.uci")]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("exists; --force replaces it (nothing was written)"),
        "{}",
        err(&o)
    );
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), first);

    let o = args(&["--force", &input("adsl-cake-atm.uci")]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let second = std::fs::read_to_string(&file).expect("replaced");
    assert!(second.contains("[interface.pppoe-wan]"), "{second}");
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&dir.0).expect("dir").collect();
    assert_eq!(left.len(), 1);
}

/// Issue 15: bad input is a clear error with exit status 2, and nothing is written.
#[test]
fn sqm_import_bad_input_exits_2_and_writes_nothing() {
    let dir = Dir::new("bad");
    let file = dir.path("unbloat.toml");
    let missing = dir.path("no-such-file");
    for (name, want) in [
        (
            input("bad-missing-interface.uci"),
            "queue 'wan': no interface",
        ),
        (
            input("bad-unknown-script.uci"),
            "script 'ctinfo_4layercake.qos': not one of sqm-scripts' recipes",
        ),
        (
            input("bad-negative-rate.uci"),
            "download '-5000': a negative rate",
        ),
        (
            input("bad-rate.iface.conf"),
            "UPLINK '10mbit': not a whole number of kbit/s",
        ),
        (input("bad-tiny-rate.uci"), "--up 50kbit: below 64kbit"),
        (input("linux-sqm.conf"), "sqm-scripts' own configuration"),
        (missing.clone(), "cannot read"),
    ] {
        let o = unbloat(&["config", "import-sqm", "--out", &file, &name]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", err(&o));
        let e = err(&o);
        assert!(e.starts_with("unbloat: error: "), "{name}: {e}");
        assert!(e.contains(want), "{name}: {want:?} missing: {e}");
        assert!(!Path::new(&file).exists(), "{name}: nothing written");
        assert!(out(&o).is_empty(), "{name}");
    }
    // A rate the user means is taken with --i-mean-it; --iface names a default.conf's interface.
    let o = unbloat(&[
        "config",
        "import-sqm",
        "--i-mean-it",
        &input("bad-tiny-rate.uci"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("i-mean-it = true"), "{}", out(&o));
    let o = unbloat(&["config", "import-sqm", &input("default.conf")]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let o = unbloat(&[
        "config",
        "import-sqm",
        "--iface",
        "eth0",
        &input("default.conf"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("[interface.eth0]"), "{}", out(&o));
}

#[test]
fn sqm_import_json_holds_options_notes_and_toml() {
    let o = unbloat(&["config", "import-sqm", "--json", &input("wan0.iface.conf")]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    assert_eq!(v["format"], "shell");
    assert_eq!(v["interfaces"][0]["iface"], "wan0");
    assert_eq!(v["interfaces"][0]["script"], "simplest_tbf.qos");
    assert_eq!(v["interfaces"][0]["options"]["link"], "raw");
    assert!(v["toml"]
        .as_str()
        .expect("toml")
        .contains("[interface.wan0]"));
    let notes = v["notes"].as_array().expect("notes");
    assert!(notes
        .iter()
        .any(|n| n["kind"] == "not-mapped" && n["option"] == "AUTOFLOW"));
    assert!(
        notes.iter().any(|n| n["kind"] == "mapped"),
        "every note is in the JSON"
    );
    assert!(
        err(&o).is_empty(),
        "notes are in the JSON only: {}",
        err(&o)
    );
}

/// `--check`: unbloat's plan beside the commands the real sqm-scripts runs for the same queue.
#[test]
fn sqm_import_check_shows_both_plans() {
    let sqm = vendored_sqm();
    assert!(
        sqm.join("src/start-sqm").is_file(),
        "{}: the vendored sqm-scripts",
        sqm.display()
    );
    let o = unbloat(&[
        "config",
        "import-sqm",
        "--check",
        "--sqm-scripts",
        &sqm.display().to_string(),
        &input("adsl-cake-atm.uci"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.starts_with("==== pppoe-wan (queue 'wan', piece_of_cake.qos)\n"),
        "{text}"
    );
    assert!(
        text.contains("qdisc add dev pppoe-wan root cake bandwidth 900kbit"),
        "{text}"
    );
    assert!(
        text.contains("tc qdisc add dev pppoe-wan root cake bandwidth 900kbit atm overhead 44 mpu 0 diffserv3 nat besteffort\n"),
        "{text}"
    );
    assert!(
        text.contains("tc qdisc add dev ifb4pppoe-wan root cake bandwidth 14000kbit atm overhead 44 mpu 0 diffserv3 nat besteffort wash\n"),
        "{text}"
    );
    assert!(!text.contains("start-sqm exited"), "{text}");
    // The same for a shell file and HTB, through sqm's size table.
    let o = unbloat(&[
        "config",
        "import-sqm",
        "--check",
        "--json",
        "--sqm-scripts",
        &sqm.display().to_string(),
        &input("wan0.iface.conf"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).expect("JSON");
    let cmds = v["check"][0]["sqm_scripts"]["commands"]
        .as_array()
        .expect("commands");
    let all: Vec<&str> = cmds.iter().filter_map(|c| c.as_str()).collect();
    assert!(
        all.contains(&"tc qdisc add dev wan0 root handle 1: stab mtu 2047 tsize 512 mpu 64 overhead 26 linklayer atm tbf rate 2000kbit burst 1749 latency 300ms"),
        "{all:#?}"
    );
    let plan = v["check"][0]["unbloat"].as_str().expect("plan");
    assert!(
        plan.contains("stab mtu 2047 tsize 512 mpu 64 overhead 26 linklayer atm htb"),
        "{plan}"
    );
}

/// A sqm-scripts source tree whose start-sqm, if anything runs it, creates `marker` (and then
/// fails, so nothing else could pass for a real run); a stop-sqm that does nothing.
fn plant_sqm(src_parent: &Path, marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let src = src_parent.join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let start = src.join("start-sqm");
    std::fs::write(
        &start,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .expect("plant");
    std::fs::set_permissions(&start, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Installing a copy points stop-sqm, too, at a sqm.conf of its own: it must be there.
    std::fs::write(src.join("stop-sqm"), "#!/bin/sh\nexit 0\n").expect("stop-sqm");
}

/// Issue 35: `--check` runs start-sqm (as root when unbloat is), so it must never take one found
/// by walking up from the current directory: anyone who can write /tmp could plant
/// `shared/peers/sqm-scripts` above a directory root works in. Without `--sqm-scripts` it uses
/// only where distributions install sqm-scripts, and says to pass `--sqm-scripts DIR` when that
/// is not there.
#[test]
fn sqm_import_check_never_runs_a_start_sqm_planted_above_the_current_directory() {
    let dir = Dir::new("planted");
    let marker = dir.0.join("planted-start-sqm-ran");
    // What an attacker leaves in /tmp: the development tree's layout, above where root works.
    plant_sqm(&dir.0.join("shared/peers/sqm-scripts"), &marker);
    let cwd = dir.0.join("work/deeper");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let config = input("adsl-cake-atm.uci");
    // As a relative --sqm-scripts would, the planted tree is reachable from here.
    assert!(cwd
        .join("../../shared/peers/sqm-scripts/src/start-sqm")
        .is_file());
    for args in [
        vec!["config", "import-sqm", "--check", config.as_str()],
        vec!["config", "import-sqm", "--check", "--json", config.as_str()],
    ] {
        let o = unbloat_in(Some(&cwd), &args);
        assert!(!marker.exists(), "{args:?}: the planted start-sqm ran");
        if Path::new(SYSTEM_SQM).exists() {
            // sqm-scripts is installed here: it is what runs, never the planted one.
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        let e = err(&o);
        assert!(e.starts_with("unbloat: error: "), "{e}");
        assert!(e.contains("pass --sqm-scripts DIR"), "{e}");
        assert!(e.contains("/usr/lib/sqm/start-sqm"), "{e}");
        assert!(out(&o).is_empty(), "nothing is printed: {}", out(&o));
    }
    // A queue that is disabled runs nothing, so it needs no sqm-scripts.
    let o = unbloat_in(
        Some(&cwd),
        &["config", "import-sqm", "--check", &input("openwrt-sqm-uci")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("# disabled in sqm: sqm-scripts starts nothing"),
        "{}",
        out(&o)
    );
    assert!(!marker.exists());
}

/// `--sqm-scripts DIR` is run only when nobody but root (or the user running unbloat) could have
/// changed it: a directory or script others may write, or a symbolic link on the way, is refused
/// before anything in it runs. The same planted tree in a safe place does run: the marker is
/// what would show it.
#[test]
fn sqm_import_check_refuses_a_writable_or_linked_sqm_scripts_before_running_it() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    let check = |sqm: &Path| {
        unbloat(&[
            "config",
            "import-sqm",
            "--check",
            "--sqm-scripts",
            &sqm.display().to_string(),
            &input("adsl-cake-atm.uci"),
        ])
    };
    // The tree goes under this build's own temporary directory, target/tmp, as safe as the
    // checkout: what it proves does not hang on /tmp's sticky bit.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("import-sqm-trust-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("base");
    let base = std::fs::canonicalize(&base).expect("canonical");
    let _gone = Dir(base.clone());
    mode(&base, 0o755);
    let sqm = base.join("sqm-scripts");
    let marker = base.join("ran");
    plant_sqm(&sqm, &marker);
    mode(&sqm, 0o755);
    mode(&sqm.join("src"), 0o755);
    // Whether root may run from the checkout at all: if not (a clone in a directory others may
    // write), every case is refused for that, before the cause each one makes.
    let safe = unbloat_system::trust::trusted(&sqm.join("src/start-sqm"));
    if let Err(e) = &safe {
        eprintln!("the checkout is not safe to run from, only refusals are checked: {e}");
    }

    // World- or group-writable: the directory given, the scripts' directory, or a script.
    for (path, m) in [
        (sqm.clone(), 0o777),
        (sqm.clone(), 0o775),
        (sqm.join("src"), 0o757),
        (sqm.join("src/start-sqm"), 0o775),
    ] {
        let before = std::fs::metadata(&path).expect("meta").permissions().mode();
        mode(&path, m);
        let o = check(&sqm);
        mode(&path, before);
        let what = format!("{} at {m:o}", path.display());
        assert!(!marker.exists(), "{what}: it ran");
        assert_eq!(o.status.code(), Some(2), "{what}: {}", err(&o));
        let e = err(&o);
        assert!(
            e.contains(&format!("sqm-scripts in {}: refused", sqm.display())),
            "{what}: {e}"
        );
        assert!(out(&o).is_empty(), "{what}: {}", out(&o));
        if safe.is_ok() {
            let named = format!("{} is owned by", path.display());
            assert!(e.contains(&named), "{what}: {e}");
            assert!(e.contains("writable by nobody else"), "{what}: {e}");
        }
    }
    // A symbolic link to it.
    let link = base.join("link");
    std::os::unix::fs::symlink(&sqm, &link).expect("link");
    let o = check(&link);
    assert!(!marker.exists(), "through a link: it ran");
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let named = format!("{} is a symbolic link", link.display());
    assert!(err(&o).contains(&named) || safe.is_err(), "{}", err(&o));
    // A script that is a link to one elsewhere.
    std::fs::rename(sqm.join("src/start-sqm"), base.join("start-sqm")).expect("move");
    std::os::unix::fs::symlink(base.join("start-sqm"), sqm.join("src/start-sqm")).expect("link");
    let o = check(&sqm);
    assert!(!marker.exists(), "through a linked script: it ran");
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let named = format!("{} is a symbolic link", sqm.join("src/start-sqm").display());
    assert!(err(&o).contains(&named) || safe.is_err(), "{}", err(&o));
    std::fs::remove_file(sqm.join("src/start-sqm")).expect("unlink");
    std::fs::rename(base.join("start-sqm"), sqm.join("src/start-sqm")).expect("move back");

    // The same tree, safe: it runs (and the planted script fails, as the check shows).
    if safe.is_err() {
        return;
    }
    let o = check(&sqm);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(marker.exists(), "a safe --sqm-scripts is run: {}", out(&o));
    let failed = "# start-sqm exited with Some(1)";
    assert!(out(&o).contains(failed), "{}", out(&o));
}
