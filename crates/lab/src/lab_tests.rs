//! The lab's pure parts: validation, the re-exec's arguments, the calibration verdict.

use super::*;

#[test]
fn no_arguments_mean_vdsl2_rrul_30s_none_then_unbloat() {
    let a = LabArgs::default();
    let req = validate(&a).expect("defaults are valid");
    assert_eq!(req.profile.name, "vdsl2");
    assert_eq!(req.strategies, [Strategy::None, Strategy::Unbloat]);
    assert_eq!((a.test.as_str(), a.duration), ("rrul", Time::from_secs(30)));
}

#[test]
fn bad_requests_name_the_flag() {
    let cases = [
        (
            LabArgs {
                strategies: "none,cake".into(),
                ..LabArgs::default()
            },
            "--strategies",
        ),
        (
            LabArgs {
                test: "rrul; rm".into(),
                ..LabArgs::default()
            },
            "--test",
        ),
        (
            LabArgs {
                duration: Time::from_millis(500),
                ..LabArgs::default()
            },
            "--duration",
        ),
        (
            LabArgs {
                profile: "adls".into(),
                ..LabArgs::default()
            },
            "adls",
        ),
        (
            LabArgs {
                test: "bogus".into(),
                ..LabArgs::default()
            },
            "--test \"bogus\": no such `unbloat test` profile; known profiles: rrul",
        ),
        (
            LabArgs {
                duration: Time::from_secs(3601),
                ..LabArgs::default()
            },
            "--duration",
        ),
    ];
    for (args, needle) in cases {
        let err = validate(&args).err().expect(needle);
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
}

/// A far end whose server is not installed is refused before anything is built or booted, with
/// the package to install. With an empty PATH only /usr/sbin and /sbin are searched: nginx is
/// there, irtt, iperf3 and openssl are not.
#[test]
fn a_far_end_without_its_server_program_is_refused_up_front() {
    use crate::farend::FarEndKind;
    let nowhere = std::ffi::OsStr::new("/nonexistent");
    assert_eq!(
        missing_program(FarEndKind::Unbloat, nowhere),
        None,
        "unbloat serve is this binary"
    );
    assert_eq!(
        missing_program(FarEndKind::IrttIperf3, nowhere),
        Some("irtt")
    );
    assert_eq!(missing_program(FarEndKind::Http, nowhere), Some("openssl"));
    let err = LabError::FarEndProgram {
        kind: "irtt-iperf3",
        program: "irtt",
    }
    .to_string();
    assert!(
        err.contains("scripts/install-deps") && err.contains("--far-end irtt-iperf3"),
        "{err}"
    );
    // This machine has them all (scripts/install-deps ran): validate passes.
    for far_end in [FarEndKind::Http, FarEndKind::IrttIperf3] {
        validate(&LabArgs {
            far_end,
            ..LabArgs::default()
        })
        .expect("installed");
    }
}

#[test]
fn far_end_names_are_checked() {
    for n in crate::farend::FarEndKind::NAMES {
        assert_eq!(crate::farend::FarEndKind::parse(n).map(|k| k.name()), Ok(n));
    }
    let err = crate::farend::FarEndKind::parse("ftp").expect_err("unknown");
    assert!(err.contains("unbloat, http, irtt-iperf3"), "{err}");
}

#[test]
fn a_library_callers_reexec_repeats_the_request_with_an_absolute_out_and_the_internal_flag() {
    let a = LabArgs {
        profile: "my link.toml".into(),
        json: true,
        far_end: crate::farend::FarEndKind::IrttIperf3,
        ..LabArgs::default()
    };
    let argv = reexec_argv(&a, Path::new("/tmp/r"), Path::new("/usr/bin/unbloat-lab"));
    assert_eq!(
        argv,
        [
            "/usr/bin/unbloat-lab",
            "run",
            "--profile",
            "my link.toml",
            "--strategies",
            "none,unbloat",
            "--test",
            "rrul",
            "--duration",
            "30s",
            "--far-end",
            "irtt-iperf3",
            "--tune-max-time",
            "auto",
            "--out",
            "/tmp/r",
            "--in-kernel",
            "--json"
        ]
    );
}

#[test]
fn kernel_needs_are_the_topologys_plus_each_strategys_once() {
    assert_eq!(kernel_needs(&[Strategy::None]), ["htb", "netem", "pfifo"]);
    let all = kernel_needs(&Strategy::ALL);
    for k in ["cake", "fq_codel", "sfq", "ifb", "mirred", "ingress"] {
        assert_eq!(all.iter().filter(|n| **n == k).count(), 1, "{k}");
    }
}

#[test]
fn calibration_fails_when_either_direction_falls_short() {
    let p = LinkProfile::shipped("vdsl2").expect("vdsl2");
    let full_down = p.theoretical_goodput(p.down).bits_per_sec() as f64;
    let full_up = p.theoretical_goodput(p.up).bits_per_sec() as f64;
    assert!(calibration_from(&p, Some(full_down * 0.97), Some(full_up * 0.95)).ok);
    let c = calibration_from(&p, Some(full_down * 0.60), Some(full_up));
    assert!(!c.ok);
    assert!((c.down_share.expect("share") - 0.60).abs() < 1e-9);
    assert!(!calibration_from(&p, None, Some(full_up)).ok);
    assert!(calibration_line(&c).contains("CPU-BOUND"));
}

#[test]
fn a_run_measured_the_machine_when_its_calibration_or_a_busiest_second_says_so() {
    let p = LinkProfile::shipped("vdsl2").expect("vdsl2");
    let full_down = p.theoretical_goodput(p.down).bits_per_sec() as f64;
    let full_up = p.theoretical_goodput(p.up).bits_per_sec() as f64;
    let row = |peak: f64| {
        let mut row = Row::from_results(Strategy::Unbloat, &unbloat_report::synthetic::rrul(3), &p);
        row.cpu_busy = Some(0.5);
        row.cpu_peak_busy = Some(peak);
        StrategyRun {
            row,
            commands: vec![],
            results_file: "x.json".into(),
            tuned: None,
            controller: None,
            trace_offset_s: None,
        }
    };
    let report = |calibration: Calibration, peak: f64| LabReport {
        profile: p.clone(),
        test: "rrul".into(),
        duration_s: 10.0,
        kernel: "host".into(),
        calibration,
        runs: vec![row(peak)],
        out_dir: "out".into(),
        notes: vec![],
    };
    let fine = calibration_from(&p, Some(full_down), Some(full_up));
    assert_eq!(report(fine.clone(), 0.85).machine_bound(), None);
    let busy = report(fine, 0.95).machine_bound().expect("CPU-bound");
    assert!(busy.contains("unbloat") && busy.contains("95 %"), "{busy}");
    let short = calibration_from(&p, Some(full_down * 0.77), Some(full_up));
    let why = report(short, 0.4).machine_bound().expect("calibration");
    assert!(why.contains("77 %"), "{why}");
}

/// A script given by a relative path reaches the request absolute (the re-run inside User-Mode
/// Linux starts in another directory), and so does sqm-scripts' source; the re-exec passes both.
#[test]
fn scripts_and_sqm_scripts_reach_the_request_absolute_and_the_reexec_passes_them_on() {
    use std::os::unix::fs::PermissionsExt;
    let script = std::env::temp_dir().join(format!("unbloat-lab-req-{}.sh", std::process::id()));
    std::fs::write(&script, "#!/bin/sh\n").expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let fake_sqm = std::env::temp_dir().join(format!("unbloat-lab-sqm-{}", std::process::id()));
    std::fs::create_dir_all(fake_sqm.join("src")).expect("sqm dir");
    std::fs::write(fake_sqm.join("src/start-sqm"), "").expect("start-sqm");
    let a = LabArgs {
        strategies: format!("none,script:{},sqm-scripts:simple", script.display()),
        sqm_scripts: Some(fake_sqm.clone()),
        ..LabArgs::default()
    };
    let req = validate(&a);
    std::fs::remove_file(&script).expect("cleanup");
    std::fs::remove_dir_all(&fake_sqm).expect("cleanup");
    let req = req.expect("valid");
    assert_eq!(
        req.strategies,
        [
            Strategy::None,
            Strategy::Script(script.clone()),
            Strategy::SqmScripts(crate::strategy::SqmRecipe::Simple)
        ]
    );
    assert_eq!(req.sqm_scripts.as_deref(), Some(fake_sqm.as_path()));
    let needs = kernel_needs(&req.strategies);
    assert!(
        needs.contains(&"cake") && needs.contains(&"fq_codel"),
        "{needs:?}"
    );
    let argv = reexec_argv(&a, Path::new("/tmp/r"), Path::new("/usr/bin/unbloat-lab"));
    let tail: Vec<&str> = argv
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "--in-kernel",
            "--sqm-scripts",
            fake_sqm.to_str().expect("utf-8")
        ]
    );
}
