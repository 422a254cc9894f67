//! `unbloat config import-sqm` through the built binary: exit statuses, what goes to stdout,
//! stderr and `--out`, and that what it writes is what `unbloat config check` and `unbloat plan
//! --config` take. The inputs are the golden cases of crates/shaper/tests/sqm_import; the mapping
//! itself is pinned there. `--check` runs the real sqm-scripts (../shared/peers/sqm-scripts) with
//! tc, ip and iptables shadowed: nothing here needs root or touches the network.

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
    Command::new(UNBLOAT)
        .args(args)
        // No state of a real install is read or written.
        .env(
            "UNBLOAT_RUN_DIR",
            std::env::temp_dir().join("unbloat-import-sqm-run"),
        )
        .output()
        .expect("unbloat runs")
}

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
    let sqm = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("shared/peers/sqm-scripts"))
        .find(|c| c.join("src/start-sqm").is_file())
        .expect("sqm-scripts in ../shared/peers (see ORIGIN.txt there)");
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
