//! The strategies that run a program in the router (issue 13 §4), in a real kernel: a user's own
//! shaping script (`script:PATH`) sees the link's values and its shaping cures the bloat, and so
//! does the real sqm-scripts' piece_of_cake, both in one lab run (`lab.rs` shows the bloat
//! without shaping on the same link, and a lab of its own for each cost a boot, a calibration
//! and an unshaped run); a script that fails is named with its stderr and leaves nothing. Cured
//! is judged as `lab.rs` judges it: induced UDP BE p95 under 30 ms in the steady state (the load
//! after its first 3 s).
//!
//! Like `lab.rs` they need the `unbloat` binary (see `common::unbloat_exe`), and the real
//! sqm-scripts' vendored copy, `third_party/sqm-scripts` of this repository (the lab's default).

mod common;
use common::unbloat_exe;
#[path = "common/lab_run.rs"]
mod lab_run;
use lab_run::{a_valid_run, p95_after_the_start, START_S};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use unbloat_lab::cleanup::list_netns;
use unbloat_lab::lab::{LabReport, StrategyRun};
use unbloat_lab::profile::LinkProfile;
use unbloat_lab::script;
use unbloat_lab::strategies::{SqmRecipe, Strategy};
use unbloat_lab::topology::{LiveTopology, Topology};
use unbloat_system::runner::SystemRunner;
use unbloat_system::sqm::workdir::WorkDir;

/// A fresh directory for a test's files, removed when the guard goes (pass or fail).
fn scratch(name: &str) -> WorkDir {
    WorkDir::new(name).expect("scratch dir")
}

/// An executable shell script at `dir/name`.
fn script_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write the script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn run<'a>(report: &'a LabReport, s: &Strategy) -> &'a StrategyRun {
    report
        .runs
        .iter()
        .find(|r| &r.row.strategy == s)
        .unwrap_or_else(|| panic!("no run of {s}"))
}

/// What a user with cake would write: cake each way through an IFB (one tin; ingress mode on the
/// download, as unbloat has it), at the rates and with the compensation the lab hands it. It
/// also keeps what it was given.
fn users_script(seen: &Path) -> String {
    format!(
        r#"set -eu
env | sort > {seen}
tc qdisc replace dev "$IFACE" root cake bandwidth "${{UPLINK}}kbit" besteffort $UNBLOAT_CAKE_LINK
ip link add name "ifb4$IFACE" type ifb
ip link set "ifb4$IFACE" up
tc qdisc add dev "$IFACE" handle ffff: ingress
tc qdisc add dev "ifb4$IFACE" root cake bandwidth "${{DOWNLINK}}kbit" besteffort ingress $UNBLOAT_CAKE_LINK
tc filter add dev "$IFACE" parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev "ifb4$IFACE"
"#,
        seen = seen.display()
    )
}

/// The variables the script saw, minus those any shell sets by itself.
fn seen_env(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).expect("the script wrote its environment");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !["PWD", "OLDPWD", "SHLVL", "_"].contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

unbloat_testbed::real_kernel_test! {
    /// The test profile (vdsl2's framing at 20/5 Mbit/s), the user's script then sqm-scripts'
    /// piece_of_cake, 10 s of rrul each. Alone: its 10 s runs judge a 30 ms steady p95, and beside
    /// the other lane's guests booting (kernel_shaping) the script's run once measured 45 ms for
    /// the same cake that sqm-scripts' run a minute later kept at 11.
    fn a_users_script_sees_the_links_values_and_it_and_the_real_sqm_scripts_cure_the_bloat() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] alone {
        let work = scratch("script-lab");
        let dir = &work.0;
        let seen = dir.join("seen.env");
        let path = script_file(dir, "my-shaper.sh", &users_script(&seen));
        let strategy = Strategy::Script(path.clone());
        let sqm = Strategy::SqmScripts(SqmRecipe::PieceOfCake);
        let (report, out) = a_valid_run(&format!("{strategy},{}", sqm.name()), &unbloat_exe());
        let out = &out.0;

        let env = seen_env(&seen);
        let expect = [
            ("IFACE", "wan0"), ("UPLINK", "4750"), ("DOWNLINK", "19000"),
            ("LINKLAYER", "ethernet"), ("OVERHEAD", "26"), ("STAB_MPU", "0"),
            ("UNBLOAT_IFACE", "wan0"), ("UNBLOAT_UP_KBIT", "4750"), ("UNBLOAT_DOWN_KBIT", "19000"),
            ("UNBLOAT_LINK_UP_KBIT", "5000"), ("UNBLOAT_LINK_DOWN_KBIT", "20000"),
            ("UNBLOAT_FRAMING", "ptm"), ("UNBLOAT_OVERHEAD", "26"), ("UNBLOAT_MPU", "0"),
            ("UNBLOAT_CAKE_LINK", "overhead 26 mpu 0 ptm"), ("UNBLOAT_PROFILE", "vdsl2-20"),
        ];
        for (k, v) in expect {
            assert_eq!(env.get(k).map(String::as_str), Some(v), "{k} in {env:?}");
        }
        let extra: Vec<&String> = env.keys().filter(|k| *k != "PATH" && !expect.iter().any(|(e, _)| e == k)).collect();
        assert!(extra.is_empty(), "the lab's own environment leaked into the script: {extra:?}");

        let mine = run(&report, &strategy);
        let cured = p95_after_the_start(out, mine);
        assert!(cured < 30.0, "the script left induced p95 at {cured} ms after the first {START_S} s");

        // The report shows the invocation and what the script built, under the script's name.
        let shown = mine.commands.join("\n");
        assert!(shown.contains("env -i PATH=") && shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains("# qdisc cake") && shown.contains("bandwidth 4750Kbit") && shown.contains("bandwidth 19Mbit"), "{shown}");
        assert!(mine.results_file.starts_with("script-my-shaper.sh/"), "{}", mine.results_file);
        let json = std::fs::read_to_string(out.join("lab.json")).expect("lab.json");
        assert!(json.contains(&format!("\"strategy\": \"script:{}\"", path.display())), "lab.json names the script");

        // The real sqm-scripts, piece_of_cake.qos (OpenWrt's default), after it.
        let real = run(&report, &sqm);
        let cured = p95_after_the_start(out, real);
        assert!(cured < 30.0, "sqm-scripts left induced p95 at {cured} ms after the first {START_S} s");
        // What start-sqm built: cake each way at the lab's rates, besteffort, washing ingress.
        let shown = real.commands.join("\n");
        let wan = shown.lines().find(|l| l.contains("qdisc cake") && l.contains("dev wan0 root")).unwrap_or_else(|| panic!("{shown}"));
        let ifb = shown.lines().find(|l| l.contains("qdisc cake") && l.contains("dev ifb4wan0 root")).unwrap_or_else(|| panic!("{shown}"));
        assert!(wan.contains("bandwidth 4750Kbit") && wan.contains("besteffort") && wan.contains("overhead 26"), "{wan}");
        assert!(ifb.contains("bandwidth 19Mbit") && ifb.contains(" wash"), "{ifb}");
        assert!(real.results_file.starts_with("sqm-scripts-piece_of_cake/"), "{}", real.results_file);
    }

    /// A script that fails: the error names it, how it ended and its stderr, and the network the
    /// lab built for it goes away. This drives the step of the lab that runs it
    /// (`script::set_up`, which `unbloat-lab run` calls on a fresh network per strategy and whose error
    /// drops that network the same way), without the lab's calibration before it.
    fn a_failing_script_is_named_with_its_stderr_and_leaves_nothing() needs ["htb", "netem", "pfifo"] {
        let work = scratch("script-fail");
        let dir = &work.0;
        let path = script_file(dir, "broken.sh", "echo 'shaping...'\necho \"no cake for $IFACE here\" >&2\nexit 3\n");
        let strategy = Strategy::Script(path.clone());
        let profile = LinkProfile::shipped("vdsl2").expect("vdsl2");
        let runner = SystemRunner::from_env();
        let live = LiveTopology::build(Topology::new(&profile), &runner).expect("build");
        let prefix = live.topo.prefix.clone();
        let err = script::set_up(&live, &strategy, &profile, None).expect_err("the script fails").to_string();
        drop(live);
        assert_eq!(
            err,
            format!("strategy script:{} failed in the router (exit status 3); stderr: no cake for wan0 here", path.display())
        );
        let left: Vec<String> = list_netns(&runner).into_iter().filter(|n| n.starts_with(&format!("{prefix}-"))).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
