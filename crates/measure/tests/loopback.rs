//! Short real runs over loopback against an in-process server: the numbers must be sane.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{mean_goodput, plan, quantile, rtts, Running};
use unbloat_measure::{MeasureError, NoProgress, Progress, ProgressStatus};
use unbloat_report::{Direction, Phase, ProbeKind};

#[test]
fn ping_profile_over_ipv4_and_ipv6() {
    let server = Running::loopback();
    for remote in [
        format!("127.0.0.1:{}", server.addr.port()),
        format!("[::1]:{}", server.addr.port()),
    ] {
        let results =
            unbloat_measure::run_plan(&plan(&remote, "ping", None, 1.0, 1.0), &mut NoProgress)
                .expect("ping run");
        assert!(!results.metadata.partial);
        assert_eq!(results.metadata.profile, "ping");
        assert!(results.streams.is_empty());
        let udp = results
            .probes
            .iter()
            .find(|p| p.kind == ProbeKind::Udp)
            .expect("UDP series");
        // 3 s at 10 Hz: about 30 probes, all answered within a few ms on loopback.
        assert!(
            (25..=32).contains(&udp.samples.len()),
            "{} UDP probes",
            udp.samples.len()
        );
        let answered: Vec<_> = udp.samples.iter().filter_map(|s| s.rtt_ms).collect();
        assert_eq!(
            answered.len(),
            udp.samples.len(),
            "{remote}: UDP loss on loopback"
        );
        assert!(quantile(answered, 0.5) < 2.0, "{remote}: slow loopback");
        // Scheduled on absolute deadlines exactly 100 ms apart (send time minus its lag), so a
        // late probe does not delay the next; the lag itself is small on a mostly idle host.
        let deadlines: Vec<f64> = udp
            .samples
            .iter()
            .map(|s| s.t - s.send_lag_ms / 1e3)
            .collect();
        let gaps: Vec<f64> = deadlines.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|g| (g - 0.1).abs() < 1e-5),
            "{remote}: deadline gaps {gaps:?}"
        );
        let lags: Vec<f64> = udp.samples.iter().map(|s| s.send_lag_ms).collect();
        assert!(quantile(lags, 0.5) < 5.0, "{remote}: probes left late");
        // One-way delays: the clocks were related, and the two ways add up to the round trip,
        // which leaves out the time the server held the probe.
        for s in &udp.samples {
            let (up, down, rtt) = (
                s.owd_up_ms.expect("up"),
                s.owd_down_ms.expect("down"),
                s.rtt_ms.expect("rtt"),
            );
            assert!(
                (up + down - rtt).abs() < 1e-6 && up > -1.0 && down > -1.0,
                "{s:?}"
            );
        }
        // ICMP runs as root (raw or ping socket); it must be answered on loopback.
        let icmp = results
            .probes
            .iter()
            .find(|p| p.kind == ProbeKind::Icmp)
            .expect("ICMP series");
        let answered = icmp.samples.iter().filter(|s| s.rtt_ms.is_some()).count();
        assert!(
            answered + 1 >= icmp.samples.len() && answered >= 20,
            "{remote}: ICMP {icmp:?}"
        );
        assert!(!results.metadata.kernel.is_empty());
    }
}

#[test]
fn upload_and_download_measure_real_goodput() {
    let server = Running::loopback();
    let remote = format!("127.0.0.1:{}", server.addr.port());
    for (profile, direction) in [("tcp_nup", Direction::Up), ("tcp_ndown", Direction::Down)] {
        let p = plan(&remote, profile, Some(2), 0.5, 2.0);
        let results = unbloat_measure::run_plan(&p, &mut NoProgress).expect("load run");
        assert_eq!(results.streams.len(), 2);
        for s in &results.streams {
            assert_eq!(s.direction, direction);
            // 2 s of load, a sample per 200 ms.
            assert!(
                (9..=11).contains(&s.samples.len()),
                "{}: {} samples",
                s.name,
                s.samples.len()
            );
            assert!(s.samples.windows(2).all(|w| w[1].t > w[0].t));
            let sum_bits: f64 = s.samples.iter().map(|x| x.bps * 0.2).sum();
            let total_bits = s.total_bytes as f64 * 8.0;
            assert!(
                (sum_bits - total_bits).abs() < 0.1 * total_bits,
                "{}: samples {sum_bits} vs total {total_bits}",
                s.name
            );
        }
        // Loopback moves gigabits; anything under 200 Mbit/s means the engine is broken.
        let goodput = mean_goodput(&results, direction, 0.5, 2.5);
        assert!(goodput > 200e6, "{profile}: {:.1} Mbit/s", goodput / 1e6);
        let udp = rtts(&results, "UDP BE", 0.0, 10.0);
        assert!(udp.len() >= 25, "{profile}: {} UDP replies", udp.len());
    }
}

#[test]
fn server_gone_mid_test_returns_partial_results() {
    let mut server = Running::loopback();
    let remote = format!("127.0.0.1:{}", server.addr.port());
    let run = std::thread::spawn(move || {
        unbloat_measure::run_plan(
            &plan(&remote, "tcp_ndown", Some(2), 0.5, 5.0),
            &mut NoProgress,
        )
    });
    std::thread::sleep(Duration::from_millis(1500));
    server.stop();
    let err = run.join().expect("client thread").expect_err("must fail");
    // The streams failing or the control connection closing, whichever the client sees first.
    assert!(
        matches!(
            err.error,
            MeasureError::StreamBroke(_) | MeasureError::ServerGone { .. }
        ),
        "{err}"
    );
    let partial = err.partial.expect("partial results");
    assert!(partial.metadata.partial);
    assert!(partial.metadata.partial_reason.is_some());
    let measured: usize = partial.streams.iter().map(|s| s.samples.len()).sum();
    assert!(measured >= 2, "nothing kept of the load before the failure");
    assert!(partial.probes[0].samples.iter().any(|s| s.rtt_ms.is_some()));
}

/// Stops the server when the idle tail begins.
struct StopInTheTail(Option<Running>);

impl Progress for StopInTheTail {
    fn update(&mut self, status: &ProgressStatus) {
        if status.phase == Phase::IdleAfter {
            if let Some(mut server) = self.0.take() {
                server.stop();
            }
        }
    }
}

/// Bug: a server that died in the idle tail (after the load) went unnoticed: the tail's probes
/// were lost, the missing final report became a note, and `unbloat test` exited 0 as if the run
/// were complete. Now the client sees the control connection close and fails with partial
/// results (which the CLI saves, exit status 3).
#[test]
fn server_gone_in_the_idle_tail_is_a_partial_run() {
    let server = Running::loopback();
    let remote = format!("127.0.0.1:{}", server.addr.port());
    let p = plan(&remote, "upload", Some(1), 1.0, 1.0);
    let mut progress = StopInTheTail(Some(server));
    let err = unbloat_measure::run_plan(&p, &mut progress).expect_err("the server went away");
    assert!(progress.0.is_none(), "the tail was never reached");
    assert!(
        matches!(
            err.error,
            MeasureError::ServerGone {
                phase: "the idle tail",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("idle tail"), "{err}");
    let partial = err.partial.expect("partial results");
    assert!(partial.metadata.partial);
    assert!(
        partial
            .metadata
            .partial_reason
            .as_deref()
            .is_some_and(|r| r.contains("the server went away during the idle tail")),
        "{:?}",
        partial.metadata.partial_reason
    );
    assert!(partial.streams[0].total_bytes > 0, "the load was kept");
}

#[test]
fn rrul_marks_streams_and_probes() {
    let server = Running::loopback();
    let remote = SocketAddr::from(([127, 0, 0, 1], server.addr.port())).to_string();
    let results =
        unbloat_measure::run_plan(&plan(&remote, "rrul", None, 0.5, 1.0), &mut NoProgress)
            .expect("rrul run");
    let names: Vec<&str> = results.probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["UDP BE", "UDP EF", "UDP BK", "ICMP"]);
    assert_eq!(results.streams.len(), 8);
    let dscps: Vec<u8> = results.streams.iter().map(|s| s.dscp).collect();
    assert_eq!(dscps, [0, 8, 40, 46, 0, 8, 40, 46]);
    assert!(
        results.streams.iter().all(|s| s.total_bytes > 0),
        "a stream moved nothing"
    );
    for p in &results.probes[..3] {
        assert!(
            p.samples.iter().filter(|s| s.rtt_ms.is_some()).count() >= 10,
            "{}",
            p.name
        );
    }
}
