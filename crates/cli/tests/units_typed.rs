//! Issue 19, "no guessed units" and "rates that would cut the user off", through the built binary:
//! `unbloat plan` (which touches nothing and needs no kernel) over flags and config files.
//!
//! Bug: `unbloat plan eth0 --down 20000 --up 10000` planned cake at 20 and 10 kbit/s (tc reads a
//! bare number as bit/s; the user meant SQM's kbit/s), and `--down 20mbps` shaped at 160 Mbit/s
//! (tc's megabytes). Each case is data: what the user typed, the exit status, and what the message
//! or the plan must say. A refused spelling exits 2 and names the readings; an accepted one exits
//! 0 and the plan's JSON holds the rate it means, read back with the units crate.

use std::path::PathBuf;
use std::process::{Command, Output};
use unbloat_units::Rate;

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

/// A throw-away directory for config files, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "unbloat-units-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        Dir(p)
    }
    /// `[interface.eth0]` with `table` under it, as units.toml; returns its path.
    fn config(&self, table: &str) -> String {
        let p = self.0.join("units.toml");
        std::fs::write(&p, format!("[interface.eth0]\n{table}\n")).expect("write config");
        p.display().to_string()
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
        // No state of a real install is read or written: plan touches nothing, and clap refuses
        // set-rate's value before anything runs.
        .env(
            "UNBLOAT_RUN_DIR",
            std::env::temp_dir().join("unbloat-units-typed-run"),
        )
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

/// What the user typed after `unbloat plan eth0` (or instead), and words the refusal must contain.
const REFUSED_FLAGS: &[(&str, &[&str], &[&str])] = &[
    (
        "SQM's kbit/s without a unit",
        &["plan", "eth0", "--down", "20000", "--up", "10000"],
        &[
            "--down",
            "20000kbit (SQM's unit)",
            "20mbit",
            "tc would read 20000 bit/s",
        ],
    ),
    (
        "a decimal without a unit",
        &["plan", "eth0", "--up", "19950"],
        &["--up", "19950kbit (SQM's unit)", "19.95mbit"],
    ),
    (
        "a small number without a unit",
        &["plan", "eth0", "--up", "20"],
        &["--up", "20mbit", "20kbit (SQM's unit)"],
    ),
    (
        "a speed test's Mbps",
        &["plan", "eth0", "--down", "20Mbps"],
        &[
            "--down",
            "20mbit if you mean megabits",
            "160mbit if you mean megabytes",
        ],
    ),
    (
        "tc's mbps",
        &["plan", "eth0", "--down", "20mbps"],
        &[
            "20mbit if you mean megabits",
            "160mbit if you mean megabytes",
        ],
    ),
    (
        "Mbps with a space",
        &["plan", "eth0", "--up", "20 Mbps"],
        &["--up", "20mbit if you mean megabits", "160mbit"],
    ),
    (
        "kbps",
        &["plan", "eth0", "--up", "800kbps"],
        &[
            "800kbit if you mean kilobits",
            "6400kbit if you mean kilobytes",
        ],
    ),
    (
        "gbps",
        &["plan", "eth0", "--down", "1Gbps"],
        &["1gbit if you mean gigabits", "8gbit if you mean gigabytes"],
    ),
    (
        "MB/s",
        &["plan", "eth0", "--down", "20MB/s"],
        &["20mbit", "160mbit"],
    ),
    (
        "bytes written out",
        &["plan", "eth0", "--down", "2 MByte/s"],
        &["megabytes", "write 16mbit"],
    ),
    (
        "a bare rtt",
        &["plan", "eth0", "--up", "10mbit", "--rtt", "100"],
        &["--rtt", "write 100ms", "100us as tc would read it"],
    ),
    (
        "a bare target",
        &[
            "plan", "eth0", "--up", "10mbit", "--qdisc", "fq_codel", "--target", "5",
        ],
        &["--target", "write 5ms"],
    ),
    (
        "a bare interval",
        &[
            "plan",
            "eth0",
            "--up",
            "10mbit",
            "--qdisc",
            "fq_codel",
            "--interval",
            "100",
        ],
        &["--interval", "write 100ms"],
    ),
    (
        "a bare bandwidth word",
        &[
            "plan",
            "eth0",
            "--up",
            "10mbit",
            "--egress-options",
            "nat bandwidth 20000",
        ],
        &["bandwidth \"20000\"", "20000kbit (SQM's unit)", "20mbit"],
    ),
    (
        "a bare rtt word",
        &[
            "plan",
            "eth0",
            "--down",
            "10mbit",
            "--ingress-options",
            "rtt 100",
        ],
        &["rtt \"100\"", "write 100ms"],
    ),
    (
        "set-rate without a unit",
        &["set-rate", "eth0", "--down", "20000"],
        &["--down", "20000kbit (SQM's unit)", "20mbit"],
    ),
    (
        "set-rate in mbps",
        &["set-rate", "eth0", "--up", "20Mbps"],
        &["20mbit if you mean megabits", "160mbit"],
    ),
    // Rates that would cut the user off.
    (
        "below 64kbit",
        &["plan", "eth0", "--down", "50mbit", "--up", "20kbit"],
        &["--up 20kbit: below 64kbit", "cut off", "--i-mean-it"],
    ),
    (
        "below 64kbit through an option string",
        &[
            "plan",
            "eth0",
            "--up",
            "10mbit",
            "--egress-options",
            "bandwidth 8kbit",
        ],
        &["--up 8kbit: below 64kbit", "--i-mean-it"],
    ),
    (
        "over 1000 to 1",
        &["plan", "eth0", "--down", "1gbit", "--up", "900kbit"],
        &[
            "--down 1gbit is 1111 times --up 900kbit",
            "over 1000 to 1",
            "--i-mean-it",
        ],
    ),
    (
        "over 1000 to 1 the other way",
        &["plan", "eth0", "--down", "100kbit", "--up", "1gbit"],
        &["--up 1gbit is 10000 times --down 100kbit", "--i-mean-it"],
    ),
];

#[test]
fn bad_spellings_on_the_command_line_exit_2_with_the_readings() {
    for (what, args, words) in REFUSED_FLAGS {
        let out = unbloat(args);
        let msg = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: exit status:\n{msg}");
        for w in *words {
            assert!(msg.contains(w), "{what}: {w:?} missing from:\n{msg}");
        }
        assert!(!msg.contains("panicked"), "{what}: {msg}");
        assert!(
            out.stdout.is_empty(),
            "{what}: a refused plan prints no commands:\n{msg}"
        );
    }
}

/// A table of a config file, and words the refusal must contain (the file's name and line are
/// checked for every case).
const REFUSED_KEYS: &[(&str, &str, &[&str])] = &[
    (
        "a TOML integer rate",
        "down = 20000",
        &["key `down`", "20000kbit (SQM's unit)", "20mbit"],
    ),
    (
        "a TOML float rate",
        "up = 19.95",
        &["key `up`", "19.95mbit"],
    ),
    (
        "a string rate without a unit",
        "up = \"10000\"",
        &["key `up`", "10000kbit (SQM's unit)", "10mbit"],
    ),
    (
        "Mbps in a file",
        "down = \"20 Mbps\"",
        &["key `down`", "20mbit if you mean megabits", "160mbit"],
    ),
    (
        "a TOML integer rtt",
        "up = \"10mbit\"\nrtt = 100",
        &["key `rtt`", "write 100ms"],
    ),
    (
        "a TOML integer target",
        "qdisc = \"fq_codel\"\nup = \"10mbit\"\ntarget = 5",
        &["key `target`", "write 5ms"],
    ),
    (
        "a string interval without a unit",
        "qdisc = \"fq_codel\"\nup = \"10mbit\"\ninterval = \"100\"",
        &["key `interval`", "write 100ms"],
    ),
    (
        "a bare bandwidth word in a file",
        "up = \"10mbit\"\nextra-egress = \"bandwidth 20000\"",
        &["[interface.eth0]", "20000kbit (SQM's unit)"],
    ),
    (
        "below 64kbit in a file",
        "up = \"20kbit\"",
        &[
            "[interface.eth0]",
            "--up 20kbit: below 64kbit",
            "--i-mean-it",
        ],
    ),
    (
        "over 1000 to 1 in a file",
        "down = \"100mbit\"\nup = \"90kbit\"",
        &["[interface.eth0]", "1111 times", "--i-mean-it"],
    ),
];

#[test]
fn bad_spellings_in_a_config_file_exit_2_naming_file_line_and_readings() {
    let dir = Dir::new("refused");
    for (what, table, words) in REFUSED_KEYS {
        let config = dir.config(table);
        // The whole file (plan, config check) names the file and the table; one interface of
        // it (plan eth0 --config) names the file for what the file's syntax refuses.
        for (args, whole) in [
            (vec!["plan", "--config", &config], true),
            (vec!["config", "check", &config], true),
            (vec!["plan", "eth0", "--config", &config], false),
        ] {
            let out = unbloat(&args);
            let msg = text(&out);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what} ({args:?}): exit status:\n{msg}"
            );
            if whole || msg.contains("key `") {
                assert!(
                    msg.contains("units.toml:"),
                    "{what}: names the file:\n{msg}"
                );
            }
            for w in words.iter().filter(|w| whole || !w.starts_with('[')) {
                assert!(
                    msg.contains(w),
                    "{what} ({args:?}): {w:?} missing from:\n{msg}"
                );
            }
        }
    }
}

/// The rates of a plan as `plan --json` prints them, read back: (egress, ingress).
fn planned_rates(out: &Output) -> (Option<Rate>, Option<Rate>) {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("plan --json is not JSON ({e}):\n{}", text(out)));
    let rate = |b: &serde_json::Value| {
        b.as_str().map(|s| {
            s.parse::<Rate>()
                .unwrap_or_else(|e| panic!("the plan's {s:?}: {e}"))
        })
    };
    (
        rate(&v["egress"]["root"]["bandwidth"]),
        rate(&v["ingress"]["shaping"]["root"]["bandwidth"]),
    )
}

/// A spelling of `--up`, and the bit/s it means; the cases below 64kbit add `--i-mean-it`.
const ACCEPTED: &[(&str, u64)] = &[
    ("20M", 20_000_000),
    ("20m", 20_000_000),
    ("20Mbit", 20_000_000),
    ("20 Mbit/s", 20_000_000),
    ("20Mbit/s", 20_000_000),
    ("20 mbit", 20_000_000),
    ("94.1 Mbits/sec", 94_100_000),
    ("200K", 200_000),
    ("20K", 20_000),
    ("1.5G", 1_500_000_000),
    ("19950kbit", 19_950_000),
    ("19.95mbit", 19_950_000),
    ("78mbit", 78_000_000),
    ("800Kbit/s", 800_000),
    ("100kibit", 102_400),
    ("64kbit", 64_000),
];

#[test]
fn accepted_spellings_plan_the_rate_they_say() {
    for &(spelling, bps) in ACCEPTED {
        let mut args = vec!["plan", "eth0", "--json", "--up", spelling];
        if bps < 64_000 {
            args.push("--i-mean-it");
        }
        let out = unbloat(&args);
        assert_eq!(out.status.code(), Some(0), "{spelling}:\n{}", text(&out));
        let (up, down) = planned_rates(&out);
        assert_eq!(up.map(Rate::bits_per_sec), Some(bps), "--up {spelling}");
        assert_eq!(down, None, "--up only: no download shaping");
    }
    // 0 turns a direction off, as a flag and as a TOML integer.
    let out = unbloat(&["plan", "eth0", "--json", "--down", "0", "--up", "10M"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(planned_rates(&out), (Some(Rate::from_mbit(10)), None));
    // The shell script says the same rate.
    let out = unbloat(&["plan", "eth0", "--down", "20 Mbit/s", "--up", "5M"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let script = text(&out);
    assert!(
        script.contains("qdisc add dev eth0 root cake bandwidth 5mbit"),
        "{script}"
    );
    assert!(
        script.contains("qdisc add dev ifb4eth0 root cake bandwidth 20mbit"),
        "{script}"
    );
}

/// Config tables that are accepted, and the (egress, ingress) rates they plan.
const ACCEPTED_KEYS: &[(&str, Option<u64>, Option<u64>)] = &[
    (
        "down = \"20 Mbit/s\"\nup = \"20M\"",
        Some(20_000_000),
        Some(20_000_000),
    ),
    ("down = 0\nup = \"19950kbit\"", Some(19_950_000), None),
    ("down = \"78mbit\"\nup = 0", None, Some(78_000_000)),
    ("up = \"20kbit\"\ni-mean-it = true", Some(20_000), None),
    (
        "down = \"100mbit\"\nup = \"90kbit\"\ni-mean-it = true",
        Some(90_000),
        Some(100_000_000),
    ),
    (
        "up = \"1mbit\"\nextra-egress = \"bandwidth 2M\"",
        Some(2_000_000),
        None,
    ),
    (
        "up = \"10mbit\"\nrtt = \"100ms\"\ndown = \"1.5G\"",
        Some(10_000_000),
        Some(1_500_000_000),
    ),
];

#[test]
fn accepted_config_files_plan_the_rates_they_say() {
    let dir = Dir::new("accepted");
    for &(table, up, down) in ACCEPTED_KEYS {
        let config = dir.config(table);
        let out = unbloat(&["plan", "eth0", "--json", "--config", &config]);
        assert_eq!(out.status.code(), Some(0), "{table}:\n{}", text(&out));
        let (e, i) = planned_rates(&out);
        assert_eq!(
            (e.map(Rate::bits_per_sec), i.map(Rate::bits_per_sec)),
            (up, down),
            "{table}"
        );
    }
    // --i-mean-it on the command line confirms a file's rate.
    let config = dir.config("up = \"20kbit\"");
    let out = unbloat(&["plan", "eth0", "--json", "--config", &config, "--i-mean-it"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(planned_rates(&out).0, Some(Rate::from_kbit(20)));
}

#[test]
fn the_help_states_the_rule() {
    let out = unbloat(&["plan", "--help"]);
    let help = text(&out);
    assert!(help.contains("no unit or mbps is refused"), "{help}");
    assert!(help.contains("--i-mean-it"), "{help}");
    assert!(help.contains("0 turns a direction off"), "{help}");
}

/// tune's `--max-time` below what its phases need is refused before anything is touched, with
/// the floor named (with and without the framing sweep); an hour is the most; a word other than
/// `auto` is refused with the choices.
#[test]
fn a_tune_max_time_below_its_phases_is_refused_with_the_floor() {
    let base = ["tune", "eth0", "--server", "http://127.0.0.1:9/"];
    for (extra, floor) in [
        (&["--max-time", "1m"][..], "between 2m20s and 60m"),
        (
            &["--max-time", "100s", "--no-sweep"][..],
            "between 2m and 60m",
        ),
        (&["--max-time", "61m"][..], "between 2m20s and 60m"),
        (&["--max-time", "soon"][..], "or auto"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = unbloat(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(floor), "{args:?}: {said}");
    }
}
