//! `unbloat test` locates the queue (issue 39), in the lab's network in a real kernel: the host
//! on the LAN runs the test against `unbloat serve`, and the gateway it probes beside the far end
//! is the router. Each case puts the bloat where the profile says (the modem, the LAN hop, both)
//! and checks the verdict the test prints in its `--json`.
//!
//! The test runs as root, so it asks the gateway for ICMP timestamps, whose stamps split its round
//! trip: each verdict names the hop and the direction.

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

/// `unbloat test --profile P` (each of `tests`) from the LAN host over `profile`'s network,
/// one lab for all; their summaries.
fn located_each(profile: &str, tests: &[&str]) -> Vec<serde_json::Value> {
    let profile = LinkProfile::load(profile).expect("profile");
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(Topology::new(&profile), &runner).expect("the lab");
    let dir = unbloat_system::sqm::workdir::WorkDir::new("locate").expect("a directory");
    let exe = unbloat_exe();
    let started = FarEndKind::Unbloat
        .start(&mut live, &dir.0, &exe)
        .expect("unbloat serve");
    let mut summaries = vec![];
    for test in tests {
        let out = dir.0.join(test).display().to_string();
        // A run that hangs is a failure with what it printed, not a stuck CI job.
        let cmd = Cmd::new("timeout")
            .args(["-s", "KILL", "60"])
            .arg(exe.display().to_string())
            .arg("test")
            .args(started.args.iter().cloned())
            .args([
                "--profile",
                test,
                "--duration",
                "10s",
                "--idle",
                "3s",
                "--probe-rate",
                "20",
            ])
            .args(["--out", &out, "--json"]);
        let ran = live.run_in(Node::Lan, &cmd).expect("unbloat test runs");
        assert_eq!(ran.status, 0, "{}\n{}", ran.stderr, ran.stdout);
        let summary: serde_json::Value = serde_json::from_str(&ran.stdout).expect("the summary");
        eprintln!("{} {test}: {}", profile.name, summary["location"]);
        summaries.push(summary);
    }
    live.stop_all();
    live.teardown().expect("teardown");
    summaries
}

/// One rrul test's summary.
fn located(profile: &str) -> serde_json::Value {
    located_each(profile, &["rrul"]).remove(0)
}

/// The places found in `way` (`down`, `up`).
fn findings(summary: &serde_json::Value, way: &str) -> Vec<String> {
    let ways = summary["location"]["ways"]
        .as_array()
        .unwrap_or_else(|| panic!("no location: {summary}"));
    let w = ways
        .iter()
        .find(|w| w["way"] == way)
        .unwrap_or_else(|| panic!("no {way}: {summary}"));
    w["findings"]
        .as_array()
        .expect("findings")
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
        for way in ["down", "up"] {
            assert_eq!(findings(&modem, way), ["beyond"], "{way}: {}", advice(&modem));
        }
        assert!(advice(&modem).contains("behind your gateway, in the download"), "{}", advice(&modem));

        // One direction loaded at a time: under rrul the bloated upload bunches the download's
        // ACKs, and the senders' bursts then queue in the modem too, for real.
        let lan = located_each(&fixture("lan-bloat"), &["download", "upload"]);
        for (summary, way) in lan.iter().zip(["down", "up"]) {
            assert_eq!(findings(summary, way), ["first-hop"], "{way}: {}", advice(summary));
            assert!(advice(summary).contains("shaping the WAN will not help"), "{}", advice(summary));
            assert!(!advice(summary).contains("behind your gateway"), "{}", advice(summary));
        }
    }
}

unbloat_system::real_kernel_test! {
    /// Download bloat in the LAN hop and upload bloat in the modem: each is found in its own
    /// direction; a router that drops ICMP yields "cannot tell the first hop" and no hop blamed.
    fn both_hops_are_found_and_a_silent_gateway_blames_none() needs ["netem", "htb", "ifb", "mirred"] {
        let split = located(&fixture("lan-down-modem-up"));
        assert_eq!(findings(&split, "down"), ["first-hop"], "{}", advice(&split));
        assert_eq!(findings(&split, "up"), ["beyond"], "{}", advice(&split));

        let silent = located(&fixture("silent-gateway"));
        assert_eq!(silent["location"]["gateway"]["state"], "silent", "{silent}");
        for way in ["down", "up"] {
            assert_eq!(findings(&silent, way), ["past-this-machine"], "{way}: {}", advice(&silent));
        }
        assert!(advice(&silent).contains("cannot tell the first hop"), "{}", advice(&silent));
        assert!(!advice(&silent).contains("behind your gateway"), "{}", advice(&silent));
    }
}
