//! `unbloat test` locates the queue (issue 39), in the lab's network in a real kernel: the host
//! on the LAN runs the test against `unbloat serve`, and the gateway it probes beside the far end
//! is the router. Each case is one of `bench locate`'s scenarios (crates/lab/locate), run once at
//! a short duration: the verdict the test prints in its `--json`, each way, against the places
//! the emulation's own queues (their qdiscs' backlogs, read beside the test) say hold the delay.
//!
//! The test runs as root, so it asks the gateway for ICMP timestamps, whose stamps split its round
//! trip: each verdict names the hop and the direction.

mod common;
use common::unbloat_exe;

use unbloat_lab::bench_locate::{run_scenario, LocateRun, RunPlan, Scenario};
use unbloat_report::locate::{Gateway, Place, Way};

/// One run of each of `scenario`'s tests; each run's verdicts must be the truth's.
fn located(scenario: &str) -> Vec<LocateRun> {
    let scenario = Scenario::by_name(scenario).expect("a scenario");
    let dir = unbloat_system::sqm::workdir::WorkDir::new("locate").expect("a directory");
    let plan = RunPlan {
        exe: &unbloat_exe(),
        dir: &dir.0,
        duration_s: 10,
        rounds: vec![(1, true)],
    };
    let runs = run_scenario(scenario, &plan).expect("the scenario runs");
    for r in &runs {
        eprintln!("{}", unbloat_lab::bench_locate::run_line(r));
        assert!(r.right(), "{}: {:#?}", scenario.name, r.ways);
    }
    runs
}

/// The places the test named in `way`.
fn named(run: &LocateRun, way: Way) -> Vec<Place> {
    let w = run.ways.iter().find(|w| w.way == way);
    w.unwrap_or_else(|| panic!("no {way:?}: {:?}", run.ways))
        .named
        .clone()
}

fn advice(run: &LocateRun) -> String {
    run.advice.join(" / ")
}

unbloat_testbed::real_kernel_test! {
    /// The bloat behind the router (the modem's FIFO), then in the LAN hop: two different
    /// answers from the same command, each naming the right hop and never the other.
    fn a_bloated_modem_and_a_bloated_access_point_get_different_right_answers() needs ["netem", "htb", "ifb", "mirred"] {
        let modem = located("modem-bloat").remove(0);
        assert_eq!(modem.gateway, Some(Gateway::Answered), "{modem:?}");
        for way in [Way::Down, Way::Up] {
            assert_eq!(named(&modem, way), [Place::Beyond], "{way:?}: {}", advice(&modem));
        }
        assert!(advice(&modem).contains("behind your gateway, in the download"), "{}", advice(&modem));

        // One direction loaded at a time (the scenario's tests: download, then upload).
        let lan = located("lan-bloat");
        for (run, way) in lan.iter().zip([Way::Down, Way::Up]) {
            assert_eq!(named(run, way), [Place::FirstHop], "{way:?}: {}", advice(run));
            assert!(advice(run).contains("shaping the WAN will not help"), "{}", advice(run));
            assert!(!advice(run).contains("behind your gateway"), "{}", advice(run));
        }
    }
}

unbloat_testbed::real_kernel_test! {
    /// Download bloat in the LAN hop and upload bloat in the modem: each is found in its own
    /// direction. A router that drops ICMP yields "cannot tell the first hop", one that answers
    /// late under load is named slow to answer, and neither gets a hop blamed.
    fn both_hops_are_found_and_an_unreadable_gateway_blames_none() needs ["netem", "htb", "ifb", "mirred"] {
        let split = located("lan-down-modem-up").remove(0);
        assert_eq!(named(&split, Way::Down), [Place::FirstHop], "{}", advice(&split));
        assert_eq!(named(&split, Way::Up), [Place::Beyond], "{}", advice(&split));

        let silent = located("silent-gateway").remove(0);
        assert!(matches!(silent.gateway, Some(Gateway::Silent { .. })), "{silent:?}");
        let slow = located("slow-gateway").remove(0);
        assert!(matches!(slow.gateway, Some(Gateway::SlowToAnswer { .. })), "{slow:?}");
        for run in [&silent, &slow] {
            for way in [Way::Down, Way::Up] {
                assert_eq!(named(run, way), [Place::PastThisMachine], "{way:?}: {}", advice(run));
            }
            assert!(advice(run).contains("cannot tell the first hop"), "{}", advice(run));
            assert!(!advice(run).contains("behind your gateway"), "{}", advice(run));
        }
    }
}
