//! A variable link for real (issue 16): the modem's downlink follows a step trace (20 Mbit/s for
//! 6 s, then 5 Mbit/s for 6 s) while iperf3 downloads through it, and iperf3's one-second
//! intervals show the step. Runs where netem and htb are (User-Mode Linux when the host lacks them).

use std::process::Stdio;
use std::time::Duration;

use unbloat_lab::profile::LinkProfile;
use unbloat_lab::topology::{LiveTopology, Node, Topology};
use unbloat_lab::trace::RateTrace;
use unbloat_lab::trace_player::{TracePlayer, Traces};
use unbloat_system::runner::{Cmd, SystemRunner};
use unbloat_units::Rate;

unbloat_testbed::real_kernel_test! {
    fn the_modem_follows_a_step_trace() needs ["htb", "netem", "pfifo"] {
        let (high, low) = (Rate::from_mbit(20), Rate::from_mbit(5));
        let step = RateTrace::steps(
            Duration::from_millis(100),
            &[(high, Duration::from_secs(6)), (low, Duration::from_secs(6))],
        );
        // As a profile with `down_trace` has it: the modem is built for the trace.
        let mut profile = LinkProfile::shipped("vdsl2-novlan").expect("profile");
        profile.traces = Traces { down: Some(step), up: None };
        let runner = SystemRunner::from_env();
        let mut live = LiveTopology::build(Topology::new(&profile), &runner).expect("build");
        let server = live.topo.server_addr().to_string();
        live.spawn(Node::Server, &["iperf3".into(), "-s".into(), "-B".into(), server.clone()], Stdio::null(), Stdio::null())
            .expect("iperf3 -s");
        std::thread::sleep(Duration::from_millis(500));
        let player = TracePlayer::start(&live, &profile, profile.traces.clone())
            .expect("the player starts");
        let out = live
            .run_in(Node::Lan, &Cmd::new("iperf3").args(["-c", &server, "-R", "-t", "12", "-i", "1", "-J"]))
            .expect("iperf3 -c");
        let changes = player.stop().expect("tc took every change");
        let v: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("iperf3 printed no JSON ({e}): {}{}", out.stdout, out.stderr));
        let per_second: Vec<f64> = v["intervals"]
            .as_array()
            .expect("intervals")
            .iter()
            .map(|i| i["sum"]["bits_per_second"].as_f64().expect("bits_per_second"))
            .collect();
        eprintln!("{changes} changes; Mbit/s per second: {:?}", per_second.iter().map(|b| (b / 1e5).round() / 10.0).collect::<Vec<_>>());
        assert!(changes >= 2, "the step was sent: {changes}");
        // Seconds 2-5 are inside the high step, 8-11 inside the low one (iperf3 starts a little
        // after the player, and slow start takes the first second).
        let mean = |r: std::ops::Range<usize>| per_second[r.clone()].iter().sum::<f64>() / r.len() as f64;
        let (got_high, got_low) = (mean(2..5), mean(8..11));
        for (got, line) in [(got_high, high), (got_low, low)] {
            let theory = profile.theoretical_goodput(line).bits_per_sec() as f64;
            let share = got / theory;
            eprintln!("{line}: {:.2} Mbit/s = {:.0} % of the theoretical {:.2}", got / 1e6, share * 100.0, theory / 1e6);
            assert!((0.80..=1.05).contains(&share), "{line}: {got} is {:.0} % of {theory}", share * 100.0);
        }
        live.teardown().expect("teardown");
    }
}
