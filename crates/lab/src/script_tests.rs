//! The pure parts of running a program in the router: the environment it gets on each kind of
//! link, the real sqm-scripts' additions, the invocation, and the checks made before a run.

use super::*;
use unbloat_shaper::linklayer::LinkPreset;

fn env_of(profile: &str) -> Vec<(&'static str, String)> {
    let p = LinkProfile::shipped(profile).expect("profile");
    environment(&p, &RouterDevs::new("wan0"))
}

fn get<'a>(env: &'a [(&'static str, String)], name: &str) -> &'a str {
    let found: Vec<&String> = env
        .iter()
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "{name} appears {} times", found.len());
    found[0]
}

/// The whole environment on vdsl2 (80/20 Mbit/s, bridged PTM + VLAN: 26 bytes, 64b/65b), as the
/// module's table documents it.
#[test]
fn a_script_on_vdsl2_gets_wan0_95_percent_in_kbit_and_ptm_overhead_26() {
    let got: Vec<String> = env_of("vdsl2")
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let expect = [
        "IFACE=wan0",
        "UPLINK=19000",
        "DOWNLINK=76000",
        "LINKLAYER=ethernet",
        "OVERHEAD=26",
        "STAB_MPU=0",
        "UNBLOAT_IFACE=wan0",
        "UNBLOAT_UP_KBIT=19000",
        "UNBLOAT_DOWN_KBIT=76000",
        "UNBLOAT_LINK_UP_KBIT=20000",
        "UNBLOAT_LINK_DOWN_KBIT=80000",
        "UNBLOAT_FRAMING=ptm",
        "UNBLOAT_OVERHEAD=26",
        "UNBLOAT_MPU=0",
        "UNBLOAT_CAKE_LINK=overhead 26 mpu 0 ptm",
        "UNBLOAT_PROFILE=vdsl2",
    ];
    assert_eq!(got, expect);
}

/// ATM links say so in sqm-scripts' words too; rates round down to whole kbit/s, as the other
/// strategies' do (768 kbit/s x 95 % = 729.6).
#[test]
fn an_atm_link_gives_linklayer_atm_and_rates_rounded_down() {
    let env = env_of("adsl");
    assert_eq!(get(&env, "UPLINK"), "729");
    assert_eq!(get(&env, "DOWNLINK"), "6650");
    assert_eq!(get(&env, "LINKLAYER"), "atm");
    assert_eq!(get(&env, "UNBLOAT_FRAMING"), "atm");
    assert_eq!(get(&env, "OVERHEAD"), "40");
    assert_eq!(get(&env, "UNBLOAT_CAKE_LINK"), "overhead 40 mpu 0 atm");
    let dsl = env_of("dsl-2002");
    assert_eq!((get(&dsl, "UPLINK"), get(&dsl, "DOWNLINK")), ("209", "760"));
    assert_eq!(get(&dsl, "OVERHEAD"), "10");
}

/// docsis has an mpu: a script gets it; the real sqm-scripts gets sqm's default 0, as the
/// re-created sqm strategies have it, plus its recipe and qdisc.
#[test]
fn the_real_sqm_scripts_gets_the_same_values_with_mpu_0_its_recipe_and_qdisc() {
    let p = LinkProfile::shipped("docsis").expect("docsis");
    let devs = RouterDevs::new("wan0");
    let env = environment(&p, &devs);
    assert_eq!(get(&env, "STAB_MPU"), "64");
    assert_eq!(get(&env, "UNBLOAT_MPU"), "64");
    assert_eq!(get(&env, "UNBLOAT_FRAMING"), "none");
    assert_eq!(get(&env, "UNBLOAT_CAKE_LINK"), "overhead 18 mpu 64 noatm");
    let sqm = sqm_environment(SqmRecipe::PieceOfCake, &p, &devs);
    assert_eq!(get(&sqm, "STAB_MPU"), "0");
    assert_eq!(get(&sqm, "UNBLOAT_MPU"), "64");
    assert_eq!(get(&sqm, "SCRIPT"), "piece_of_cake.qos");
    assert_eq!(get(&sqm, "QDISC"), "cake");
    assert_eq!(
        (get(&sqm, "UPLINK"), get(&sqm, "LINKLAYER")),
        ("9500", "ethernet")
    );
    assert_eq!(sqm.len(), env.len() + 2);
    let simple = sqm_environment(SqmRecipe::Simple, &p, &devs);
    assert_eq!(
        (get(&simple, "SCRIPT"), get(&simple, "QDISC")),
        ("simple.qos", "fq_codel")
    );
}

/// A raw link (Linux's own length, no compensation) is sqm-scripts' `LINKLAYER=none`.
#[test]
fn a_raw_link_is_linklayer_none() {
    let mut p = LinkProfile::shipped("fiber").expect("fiber");
    p.link.preset = LinkPreset::Raw;
    let env = environment(&p, &RouterDevs::new("wan0"));
    assert_eq!(get(&env, "LINKLAYER"), "none");
    assert_eq!(get(&env, "UNBLOAT_CAKE_LINK"), "raw overhead 0 mpu 0 noatm");
}

#[test]
fn the_invocation_clears_the_environment_and_bounds_the_time() {
    let env = [
        ("IFACE", "wan0".to_string()),
        ("UPLINK", "19000".to_string()),
    ];
    let cmd = invocation(&["/opt/my shaper.sh".to_string()], &env, "/usr/bin:/bin");
    assert_eq!(
        cmd.argv(),
        [
            "timeout",
            "--kill-after=5",
            "120",
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "IFACE=wan0",
            "UPLINK=19000",
            "/opt/my shaper.sh"
        ]
    );
    let in_router = strategies::in_netns(&cmd, "lab-rtr");
    assert!(
        in_router
            .display()
            .starts_with("ip netns exec lab-rtr timeout"),
        "{}",
        in_router.display()
    );
}

/// The system's half of the check: made absolute, and refused (naming the flag and the path)
/// when missing, a directory or not executable.
#[test]
fn scripts_are_made_absolute_and_refused_when_missing_or_not_executable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("unbloat-script-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (ok, plain) = (dir.join("ok.sh"), dir.join("plain.sh"));
    for f in [&ok, &plain] {
        std::fs::write(f, "#!/bin/sh\n").expect("write");
    }
    std::fs::set_permissions(&ok, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let check = |p: &Path| resolve(Strategy::Script(p.to_path_buf())).map_err(|e| e.to_string());
    assert_eq!(check(&ok), Ok(Strategy::Script(ok.clone())));
    let err = check(&plain).unwrap_err();
    assert!(
        err.starts_with("--strategies script:") && err.contains("not executable (chmod +x"),
        "{err}"
    );
    let err = check(&dir.join("missing.sh")).unwrap_err();
    assert!(
        err.contains("missing.sh: cannot use it: No such file"),
        "{err}"
    );
    assert!(check(&dir).unwrap_err().contains("not a file"));
    // A relative path is taken from the current directory.
    let rel = resolve(Strategy::Script("no-such-relative.sh".into()))
        .unwrap_err()
        .to_string();
    let cwd = std::env::current_dir().expect("cwd");
    assert!(
        rel.contains(&cwd.join("no-such-relative.sh").display().to_string()),
        "{rel}"
    );
    assert_eq!(
        resolve(Strategy::Unbloat).expect("unchanged"),
        Strategy::Unbloat
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn sqm_scripts_source_is_needed_only_by_its_strategies_and_a_wrong_dir_is_named() {
    let none = sqm_source(
        &[Strategy::None, Strategy::Unbloat],
        Some(Path::new("/nowhere")),
    );
    assert!(matches!(none, Ok(None)));
    let real = [Strategy::SqmScripts(SqmRecipe::Simple)];
    let err = sqm_source(&real, Some(Path::new("/nowhere")))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "--sqm-scripts /nowhere: no src/start-sqm there");
    // Not given: the vendored copy of the source tree this was built from, never one found
    // above the current directory.
    let vendored = sqm_source(&real, None).expect("third_party/sqm-scripts");
    assert_eq!(
        vendored,
        Some(unbloat_testbed::peer::vendored("sqm-scripts"))
    );
    assert!(vendored.as_deref().is_some_and(
        |d| d.ends_with("third_party/sqm-scripts") && d.join("src/start-sqm").is_file()
    ));
}

#[test]
fn a_failed_program_is_named_with_how_it_ended_and_its_last_stderr_lines() {
    let s = Strategy::Script("/opt/x.sh".into());
    let many: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let e = failed(&s, "exit status 3", &many).to_string();
    assert_eq!(
        e,
        "strategy script:/opt/x.sh failed in the router (exit status 3); stderr: line 5 | line 6 | \
         line 7 | line 8 | line 9 | line 10 | line 11 | line 12"
    );
    let e = failed(&s, "exit status 1", "\n").to_string();
    assert!(e.ends_with("(exit status 1); nothing on stderr"), "{e}");
}
