//! Responsiveness in round trips per minute (RPM), from a web-server run's probes.
//!
//! Heads up! This is the aggregation of draft-ietf-ippm-responsiveness (revisions 04-08),
//! section "Aggregating the Measurements": for each kind of probe (foreign TCP handshake,
//! foreign TLS handshake, foreign HTTP GET, self HTTP GET) take the trimmed mean of its round
//! trips under working conditions, dropping the highest 5 % ("95th percentile trimmed mean"),
//! then
//!
//! ```text
//! Responsiveness = 60000 / (1/6*(TM(tcp_f) + TM(tls_f) + TM(http_f)) + 1/2*TM(http_s))
//! ```
//!
//! i.e. foreign and self probes weigh half each, the three foreign kinds a third of their half.
//!
//! What callers can rely on:
//! - Only answered probes sent during the load phase count (working conditions); lost probes
//!   and the idle phases do not.
//! - A kind that has no such probe is left out and the rest keep their weights relative to each
//!   other: over plain http:// (no TLS) the foreign half is the mean of TCP and HTTP; over
//!   HTTP/1.1 (no self probes) the foreign probes are the whole figure. [`Rpm::complete`] says
//!   whether all four kinds were there, which is what the draft's figure needs.
//! - Pure: no I/O; `None` when no foreign or self probe was answered under load.

use crate::model::{Phase, ProbeKind, Results};

/// The fraction of highest round trips the trimmed mean drops (the draft's 95th percentile).
pub const TRIM_TOP: f64 = 0.05;

/// The responsiveness of a run, with the parts it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rpm {
    /// Round trips per minute.
    pub rpm: f64,
    /// The foreign half: the mean of the foreign kinds' trimmed means, ms.
    pub foreign_ms: Option<f64>,
    /// The self half: the self probes' trimmed mean, ms.
    pub self_ms: Option<f64>,
    /// Each kind that took part.
    pub parts: Vec<RpmPart>,
    /// Whether all four kinds of the draft were there.
    pub complete: bool,
}

/// One kind of probe's share.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmPart {
    pub kind: ProbeKind,
    /// Answered probes under load.
    pub samples: usize,
    /// Of those, how many the trim kept.
    pub kept: usize,
    pub trimmed_mean_ms: f64,
}

const FOREIGN: [ProbeKind; 3] = [
    ProbeKind::TcpConnect,
    ProbeKind::TlsHandshake,
    ProbeKind::HttpNew,
];

/// The draft's responsiveness over `results` (see the module doc).
pub fn responsiveness(results: &Results) -> Option<Rpm> {
    let part = |kind: ProbeKind| -> Option<RpmPart> {
        let mut rtts: Vec<f64> = results
            .probes
            .iter()
            .filter(|p| p.kind == kind)
            .flat_map(|p| &p.samples)
            .filter(|s| results.phases.phase_of(s.t) == Phase::Loaded)
            .filter_map(|s| s.rtt_ms)
            .filter(|r| r.is_finite())
            .collect();
        let (samples, mean, kept) = trimmed_mean(&mut rtts)?;
        Some(RpmPart {
            kind,
            samples,
            kept,
            trimmed_mean_ms: mean,
        })
    };
    let foreign: Vec<RpmPart> = FOREIGN.into_iter().filter_map(part).collect();
    let own = part(ProbeKind::HttpLoaded);
    let foreign_ms = (!foreign.is_empty())
        .then(|| foreign.iter().map(|p| p.trimmed_mean_ms).sum::<f64>() / foreign.len() as f64);
    let self_ms = own.as_ref().map(|p| p.trimmed_mean_ms);
    let delay_ms = match (foreign_ms, self_ms) {
        (Some(f), Some(s)) => 0.5 * f + 0.5 * s,
        (Some(only), None) | (None, Some(only)) => only,
        (None, None) => return None,
    };
    if delay_ms <= 0.0 {
        return None;
    }
    let complete = foreign.len() == FOREIGN.len() && own.is_some();
    let mut parts = foreign;
    parts.extend(own);
    Some(Rpm {
        rpm: 60_000.0 / delay_ms,
        foreign_ms,
        self_ms,
        parts,
        complete,
    })
}

/// (samples, mean of the lowest 95 %, how many kept); `None` when empty.
fn trimmed_mean(values: &mut [f64]) -> Option<(usize, f64, usize)> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let keep = ((values.len() as f64) * (1.0 - TRIM_TOP)).ceil() as usize;
    let keep = keep.clamp(1, values.len());
    let mean = values[..keep].iter().sum::<f64>() / keep as f64;
    Some((values.len(), mean, keep))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Phases, ProbeSample, ProbeSeries};
    use crate::synthetic;

    fn series(name: &str, kind: ProbeKind, rtts: &[f64]) -> ProbeSeries {
        // The first sample falls in the idle baseline (t = 1 s) and must not count.
        let mut samples = vec![ProbeSample {
            t: 1.0,
            rtt_ms: Some(0.001),
            owd_up_ms: None,
            owd_down_ms: None,
            send_lag_ms: 0.0,
        }];
        samples.extend(rtts.iter().enumerate().map(|(i, &r)| ProbeSample {
            t: 5.0 + i as f64 * 0.2,
            rtt_ms: Some(r),
            owd_up_ms: None,
            owd_down_ms: None,
            send_lag_ms: 0.0,
        }));
        // A lost probe under load does not count either.
        samples.push(ProbeSample {
            rtt_ms: None,
            ..samples[1]
        });
        ProbeSeries {
            name: name.into(),
            kind,
            dscp: 0,
            interval_ms: 200.0,
            hop: Default::default(),
            samples,
        }
    }

    fn results(probes: Vec<ProbeSeries>) -> Results {
        let mut r = synthetic::rrul(1);
        r.phases = Phases {
            idle_before_s: 5.0,
            load_s: 10.0,
            idle_after_s: 5.0,
        };
        r.probes = probes;
        r
    }

    /// 20 TCP connects: 19 of 10 ms and one of 1000 ms; the top 5 % (one sample) is trimmed,
    /// so TM(tcp_f) = 10. TM(tls_f) = 20, TM(http_f) = 30, TM(http_s) = 100 (20 samples each).
    /// 1/6*(10 + 20 + 30) + 1/2*100 = 10 + 50 = 60 ms, and 60000 / 60 = 1000 RPM.
    #[test]
    fn the_drafts_formula_by_hand() {
        let mut tcp = vec![10.0; 19];
        tcp.push(1000.0);
        let r = results(vec![
            series("TCP connect", ProbeKind::TcpConnect, &tcp),
            series("TLS handshake", ProbeKind::TlsHandshake, &[20.0; 20]),
            series("HTTP GET new", ProbeKind::HttpNew, &[30.0; 20]),
            series("HTTP GET loaded", ProbeKind::HttpLoaded, &[100.0; 20]),
        ]);
        let rpm = responsiveness(&r).expect("rpm");
        assert!((rpm.rpm - 1000.0).abs() < 1e-9, "{rpm:?}");
        assert_eq!(rpm.foreign_ms, Some(20.0));
        assert_eq!(rpm.self_ms, Some(100.0));
        assert!(rpm.complete);
        assert_eq!((rpm.parts[0].samples, rpm.parts[0].kept), (20, 19));
        assert_eq!(rpm.parts[0].trimmed_mean_ms, 10.0);
    }

    /// HTTP/1.1 over http://: no TLS, no self probes. Foreign = (10 + 30) / 2 = 20 ms: 3000 RPM.
    #[test]
    fn missing_kinds_leave_the_rest_weighted_alike() {
        let r = results(vec![
            series("TCP connect", ProbeKind::TcpConnect, &[10.0; 20]),
            series("HTTP GET new", ProbeKind::HttpNew, &[30.0; 20]),
        ]);
        let rpm = responsiveness(&r).expect("rpm");
        assert!((rpm.rpm - 3000.0).abs() < 1e-9, "{rpm:?}");
        assert!(!rpm.complete);
        assert_eq!(rpm.self_ms, None);
    }

    #[test]
    fn no_probe_under_load_is_no_figure() {
        assert_eq!(responsiveness(&results(vec![])), None);
        let udp_only = synthetic::rrul(1);
        assert_eq!(responsiveness(&udp_only), None);
    }
}
