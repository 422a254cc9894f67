//! `unbloat tune` for real, in the lab's network (issue 13's tests): the binary runs in the
//! router's namespace against `unbloat serve` in the server's, over the emulated link.
//!
//! - Ctrl-C mid-tune puts back the shaping that was there before (exit 130).
//! - A far end that vanishes mid-tune gives a clear error (exit 3) and the same.
//! - The lab's `unbloat-tuned` strategy: tune with `--apply` in the router (the sweep included),
//!   then the lab's rrul through what it left: rates within 12 % of the truth (tune's steps, its
//!   config and its page in its report), and the bloat gone in the steady state (under 50 ms at
//!   p95; unshaped it is 200-350 ms). One tune run serves both, as CI's time is short.
//! - The same on adsl-slow, a 3 Mbit/s ATM line behind a 1000-packet modem FIFO (issue 38): tune
//!   returns a rate each way with the framing right, and the lab says whether its test kept
//!   tune's bound and, when not, by how much; a missed search bound is in tune's own record.
//!
//! The two tuned runs are `alone`: no other test's guest runs beside them (`make test` runs two
//! lanes), as tune's search judges each step by its p99.

mod common;
use common::{unbloat_exe, TEST_PROFILE};

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use unbloat_lab::lab::{run_lab, LabArgs};
use unbloat_lab::profile::LinkProfile;
use unbloat_lab::strategies::Strategy;
use unbloat_lab::topology::{router_wan, Node};
use unbloat_lab::tune_lab::TuneLab;
use unbloat_shaper::invocation::{Invocation, Start, Stop, Tune};
use unbloat_shaper::options::ShapeOptions;
use unbloat_system::runner::{Cmd, SystemRunner};
use unbloat_units::Rate;

fn lab(profile: &str) -> TuneLab<'static> {
    let profile = LinkProfile::shipped(profile).expect("profile");
    let runner = Box::leak(Box::new(SystemRunner::from_env()));
    let dir = std::env::temp_dir().join(format!("unbloat-tune-test-{}", std::process::id()));
    TuneLab::build(&profile, runner, &unbloat_exe(), &dir).expect("the lab with unbloat serve")
}

/// `unbloat tune wan0` in the router, without the sweep, as a child to signal.
fn tune(lab: &TuneLab) -> Child {
    let tune = Tune {
        iface: router_wan(),
        far_end: lab.far_end(),
        max_time: None,
        bound: None,
        no_sweep: true,
        apply: false,
        out: Some(lab.dir.join("tune")),
        json: true,
    };
    Command::new("ip")
        .args(["netns", "exec", &lab.live.topo.ns(Node::Router), "env"])
        .arg(format!("UNBLOAT_RUN_DIR={}", lab.dir.join("run").display()))
        .arg(&lab.exe)
        .args(Invocation::from(tune).argv().expect("tune's arguments"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tune")
}

/// The router's WAN and IFB qdiscs, with the handles the kernel picked itself masked.
fn qdiscs(lab: &TuneLab) -> String {
    let sh = "tc qdisc show dev wan0; tc qdisc show dev ifb4wan0 2>/dev/null; true";
    let out = lab
        .live
        .run_in(Node::Router, &Cmd::new("sh").args(["-c", sh]))
        .expect("tc");
    out.stdout
        .split_whitespace()
        .map(|w| {
            if w.len() == 5 && w.starts_with('8') && w.ends_with(':') {
                "8xxx:"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn finish(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().expect("wait for tune");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Waits until the tune's stderr would be in its capacity phase: `secs` after the start.
fn interrupt_after(child: &Child, secs: u64, signal: libc::c_int) {
    std::thread::sleep(Duration::from_secs(secs));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// The lab with the `unbloat-tuned` strategy alone, its report printed.
fn tuned_lab(args: &LabArgs) -> unbloat_lab::lab::LabReport {
    let report = run_lab(args, &unbloat_exe()).expect("the lab runs");
    eprint!("{}", report.render_text());
    assert_eq!(report.runs[0].row.strategy, Strategy::UnbloatTuned);
    report
}

fn rate_bps(v: &serde_json::Value) -> f64 {
    let text = v.as_str().unwrap_or_else(|| panic!("not a rate: {v}"));
    let r: unbloat_units::Rate = text.parse().expect("rate");
    r.bits_per_sec() as f64
}

unbloat_testbed::real_kernel_test! {
    /// Ctrl-C in the capacity phase and a far end killed in the search: each time the shaping
    /// unbloat had before the run is back, with exit 130 and 3 and the reason said.
    fn ctrl_c_and_a_vanishing_far_end_put_the_old_shaping_back() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred"] {
        let mut lab = lab("vdsl2");
        let rates = ShapeOptions {
            down: Some(Rate::from_mbit(50)),
            up: Some(Rate::from_mbit(10)),
            ..ShapeOptions::default()
        };
        let start = Start { iface: Some(router_wan()), options: rates, json: true, ..Start::default() };
        lab.unbloat_json(start).expect("start");
        let shaped = qdiscs(&lab);
        assert!(shaped.contains("cake"), "{shaped}");

        let child = tune(&lab);
        interrupt_after(&child, 8, libc::SIGINT);
        let (code, _, err) = finish(child);
        assert_eq!(code, 130, "{err}");
        assert!(err.contains("tune interrupted") && err.contains("back"), "{err}");
        assert_eq!(qdiscs(&lab), shaped, "Ctrl-C did not put the old shaping back: {err}");

        let child = tune(&lab);
        std::thread::sleep(Duration::from_secs(25));
        lab.live.stop_all();
        let (code, _, err) = finish(child);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("tune wan0") && err.contains("back"), "{err}");
        assert_eq!(qdiscs(&lab), shaped, "a vanished far end left the link changed: {err}");
        lab.unbloat_json(Stop { iface: Some(router_wan()), json: true }).expect("stop");
        lab.live.teardown().expect("teardown");
    }
}

unbloat_testbed::real_kernel_test! {
    /// `unbloat-lab run --strategies unbloat-tuned` on the test's 20/5 PTM link: tune's rates within 12 %
    /// of the line, set beside the truth in lab.json, and the rrul after it under 50 ms.
    fn the_tuned_strategy_measures_what_tune_found() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred"] alone {
        // The report goes with its guard, whether the assertions below pass or not.
        let dir = unbloat_system::sqm::workdir::WorkDir::new("lab-tuned").expect("a report directory");
        let out = dir.0.clone();
        let args = LabArgs {
            profile: TEST_PROFILE.into(),
            strategies: "unbloat-tuned".into(),
            duration: unbloat_units::Time::from_secs(10),
            // tune's default, 3 minutes: 4 steps each way and one both-ways check. Its floor,
            // 140 s, gives 3, a 5 % resolution: in CI once a stall of the host's CPU failed the
            // first step (95 %) and the search ended at 89 % of the line.
            tune_max_time: unbloat_tune::run::MaxTime::At(std::time::Duration::from_secs(180)),
            out: out.clone(),
            in_kernel: true,
            ..LabArgs::default()
        };
        let report = tuned_lab(&args);
        let run = &report.runs[0];
        let tuned = run.tuned.as_ref().expect("what tune found");
        assert!(report.notes.iter().any(|n| n.starts_with("unbloat-tuned: tune found")), "{:?}", report.notes);
        let json = std::fs::read_to_string(out.join("lab.json")).expect("lab.json");
        assert!(json.contains("\"tuned\"") && json.contains("\"down_found\""), "lab.json lacks tune's row");
        // tune's own report: its steps each way with their steady p99, the config it wrote, the
        // trade-off plots its page shows.
        let tune_dir = out.join("unbloat-tuned-tune/tune");
        let tj: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tune_dir.join("tune.json")).expect("tune.json"),
        )
        .expect("tune.json is JSON");
        let both = tj["both_ways"].as_array().expect("the both-ways checks");
        assert!(!both.is_empty() && both.len() <= 3, "{both:?}");
        assert!(both.iter().all(|s| s["steady_p99_ms"].is_number()), "{both:?}");
        for key in ["down", "up"] {
            let steps = tj[format!("steps_{key}")].as_array().expect("steps");
            assert!(!steps.is_empty(), "no {key} steps: {tj}");
            assert!(steps.iter().all(|s| s["steady_p99_ms"].is_number()), "{steps:?}");
            // The search alone lands within 12 % of the line: its points are 95, 90 and 85 % of
            // the *measured* line, so one noisy failure at 95 % leaves 90 % of a reading 1 % low
            // (17,811 kbit/s on the 20 Mbit/s line in a clean clone's make test on 2026-12-02) ...
            let searched = steps
                .iter()
                .filter(|s| s["pass"] == true)
                .map(|s| rate_bps(&s["rate"]))
                .fold(0.0, f64::max);
            let line = (if key == "down" { tuned.down_line } else { tuned.up_line }).bits_per_sec() as f64;
            assert!((searched - line).abs() <= line * 0.12, "{key}: the search chose {searched}, the line is {line}");
            // ... and the result is the chosen both-ways check's: the search's (less the drain
            // margin, download), or backed off at most twice by 5 %.
            let found = if key == "down" { tuned.down_found } else { tuned.up_found };
            let found = found.expect(key).bits_per_sec() as f64;
            assert_eq!(rate_bps(&tj[key]), found, "tune.json and lab.json differ");
            let kept: Vec<_> = both.iter().filter(|s| s["chosen"] == true).collect();
            assert_eq!(kept.len(), 1, "{both:?}");
            assert_eq!(rate_bps(&kept[0][key]), found, "{both:?}");
            assert!(found <= searched && found >= searched * 0.85, "{key}: {found} after {searched}");
        }
        let toml = std::fs::read_to_string(tune_dir.join("unbloat.toml")).expect("unbloat.toml");
        assert!(toml.contains("[interface.wan0]"), "{toml}");
        let html = std::fs::read_to_string(tune_dir.join("index.html")).expect("index.html");
        assert!(html.contains("tradeoff-down.svg"), "tune's page lacks its plot");
        let udp = run.row.probe("UDP BE").expect("UDP BE probes");
        let steady = udp.steady_p95_ms.expect("steady p95");
        // lab.rs's bound. Before the both-ways check, tune's per-direction rates (96-99 % of the
        // line) kept 25 ms steady p95 under rrul on vdsl2's 80/20, and this test allowed 50 ms.
        // The bloat it must remove is 200-350 ms.
        assert!(steady < 30.0, "unbloat-tuned left {steady} ms at p95 in the steady state");
    }
}

unbloat_testbed::real_kernel_test! {
    /// `unbloat-lab run --strategies unbloat-tuned` on adsl-slow with `--max-time auto`: a rate
    /// for both directions (never the unshaped modem's 4 s of queue), ATM with overhead 10 found,
    /// and every missed bound said: by tune where a search found no rate within it, by the lab
    /// where its rrul broke tune's both-ways bound.
    fn a_slow_deep_buffer_line_gets_a_rate_each_way() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred"] alone {
        let dir = unbloat_system::sqm::workdir::WorkDir::new("lab-slow").expect("a report directory");
        let out = dir.0.clone();
        let args = LabArgs {
            profile: "adsl-slow".into(),
            strategies: "unbloat-tuned".into(),
            duration: unbloat_units::Time::from_secs(10),
            out: out.clone(),
            in_kernel: true,
            ..LabArgs::default()
        };
        let report = tuned_lab(&args);
        let run = &report.runs[0];
        let tuned = run.tuned.as_ref().expect("what tune found");
        assert_eq!((tuned.family_found.as_str(), tuned.overhead_found), ("atm", Some(10)), "{tuned:?}");
        for (key, found, line) in [("down", tuned.down_found, tuned.down_line), ("up", tuned.up_found, tuned.up_line)] {
            let found = found.unwrap_or_else(|| panic!("no {key} rate: {tuned:?}")).bits_per_sec() as f64;
            let line = line.bits_per_sec() as f64;
            // At least the closest rate's floor (70 % of the measured capacity, which the
            // unshaped deep FIFO puts near the line), at most the search's ceiling.
            assert!(found >= 0.6 * line && found <= 1.05 * line, "{key}: {found} of {line}");
        }
        let tj: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("unbloat-tuned-tune/tune/tune.json")).expect("tune.json"),
        )
        .expect("tune.json is JSON");
        // tune's own record of its misses: a search with no passing step is in it, with its bound.
        for (key, phase) in [("steps_down", "download"), ("steps_up", "upload")] {
            let steps = tj[key].as_array().expect("steps");
            let none_passed = steps.iter().all(|s| s["pass"] == false);
            let said = tuned.missed.iter().any(|m| m.phase == phase && m.over_ms() > 0.0);
            assert_eq!(none_passed, said, "{phase}: {steps:?} against {:?}", tuned.missed);
        }
        let phases: Vec<&str> = tj["time"].as_array().expect("where the time went").iter().filter_map(|l| l["phase"].as_str()).collect();
        assert_eq!(&phases[..4], ["idle", "capacity", "framing", "download"], "{phases:?}");
        // The lab holds its test to tune's both-ways bound and says how it went.
        let bound = tuned.both_bound_ms.expect("tune's both-ways bound");
        let steady = run.row.probe("UDP BE").and_then(|p| p.steady_p95_ms).expect("steady p95");
        let held = report.notes.iter().find(|n| n.contains("the test's steady p95")).expect("the lab's verdict on tune's bound");
        if steady > bound {
            assert!(held.contains(&format!("over tune's {bound:.1} ms bound by {:.1} ms", steady - bound)), "{held}");
        } else {
            assert!(held.contains("within tune's"), "{held}");
        }
        // Unshaped, this line's rrul stands at seconds of queue (12,240 ms steady p95 in the lab).
        assert!(steady < 200.0, "unbloat-tuned left {steady} ms at p95 in the steady state");
    }
}
