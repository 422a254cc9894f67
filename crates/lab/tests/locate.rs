//! `unbloat test` locates the queue (issue 39), in the lab's network in a real kernel: the host
//! on the LAN runs the test against `unbloat serve`, and the gateway it probes beside the far end
//! is the router. Each case puts the bloat where the profile says (the modem, the LAN hop, both)
//! and checks the verdict the test prints in its `--json`.
//!
//! The gateway answers ICMP echo, which has no one-way stamps: the verdicts here are of the round
//! trip, which tells the hop, not the direction.

mod common;
use common::{unbloat_exe, TEST_PROFILE};

use unbloat_lab::farend::FarEndKind;
use unbloat_lab::profile::LinkProfile;
use unbloat_lab::topology::{LiveTopology, Node, Topology};
use unbloat_system::runner::{Cmd, SystemRunner};

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/profiles/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `unbloat test --profile rrul` from the LAN host over `profile`'s network; its summary.
fn located(profile: &str) -> serde_json::Value {
    let profile = LinkProfile::load(profile).expect("profile");
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(Topology::new(&profile), &runner).expect("the lab");
    let dir = unbloat_system::sqm::workdir::WorkDir::new("locate").expect("a directory");
    let exe = unbloat_exe();
    let started = FarEndKind::Unbloat
        .start(&mut live, &dir.0, &exe)
        .expect("unbloat serve");
    let out = dir.0.join("test").display().to_string();
    let cmd = Cmd::new(exe.display().to_string())
        .arg("test")
        .args(started.args.iter().cloned())
        .args([
            "--profile",
            "rrul",
            "--duration",
            "10s",
            "--idle",
            "3s",
            "--probe-rate",
            "20",
        ])
        .args(["--out", &out, "--json"]);
    let ran = live.run_in(Node::Lan, &cmd).expect("unbloat test runs");
    live.stop_all();
    live.teardown().expect("teardown");
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    let summary: serde_json::Value = serde_json::from_str(&ran.stdout).expect("the summary");
    eprintln!("{}: {}", profile.name, summary["location"]);
    summary
}

fn findings(summary: &serde_json::Value) -> Vec<String> {
    summary["location"]["ways"][0]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings: {summary}"))
        .iter()
        .map(|f| f.as_str().unwrap_or_default().to_string())
        .collect()
}

fn advice(summary: &serde_json::Value) -> String {
    summary["location"]["advice"].to_string()
}

unbloat_system::real_kernel_test! {
    /// The bloat behind the router (the modem's 1000-packet FIFO), then in the LAN hop: two
    /// different answers from the same command, each naming the right hop and never the other.
    fn a_bloated_modem_and_a_bloated_access_point_get_different_right_answers() needs ["netem", "htb", "ifb", "mirred"] {
        let modem = located(TEST_PROFILE);
        assert_eq!(modem["location"]["gateway"]["state"], "answered", "{modem}");
        assert_eq!(findings(&modem), ["beyond"], "{}", advice(&modem));
        assert!(advice(&modem).contains("behind your gateway"), "{}", advice(&modem));

        let lan = located(&fixture("lan-bloat"));
        assert_eq!(findings(&lan), ["first-hop"], "{}", advice(&lan));
        assert!(advice(&lan).contains("shaping the WAN will not help"), "{}", advice(&lan));
        assert!(!advice(&lan).contains("behind your gateway"), "{}", advice(&lan));
    }
}

unbloat_system::real_kernel_test! {
    /// Download bloat in the LAN hop and upload bloat in the modem: both hops are found; a router
    /// that ignores pings yields "cannot tell the first hop" and no hop blamed.
    fn both_hops_are_found_and_a_silent_gateway_blames_none() needs ["netem", "htb", "ifb", "mirred"] {
        let split = located(&fixture("lan-down-modem-up"));
        let mut found = findings(&split);
        found.sort();
        assert_eq!(found, ["beyond", "first-hop"], "{}", advice(&split));

        let silent = located(&fixture("silent-gateway"));
        assert_eq!(silent["location"]["gateway"]["state"], "silent", "{silent}");
        assert_eq!(findings(&silent), ["past-this-machine"], "{}", advice(&silent));
        assert!(advice(&silent).contains("cannot tell the first hop"), "{}", advice(&silent));
        assert!(!advice(&silent).contains("behind your gateway"), "{}", advice(&silent));
    }
}
