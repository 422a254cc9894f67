//! What the two-host scenario reads back, pure: iperf3 `--bidir -J` per host, ping's output.

use serde::{Deserialize, Serialize};

/// iperf3's ramp (slow start, the first windows in the FIFO) is left out of the shares.
pub const RAMP_S: f64 = 2.0;

/// One host's goodput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRun {
    /// Mean goodput after the ramp, bit/s.
    pub up_bps: f64,
    pub down_bps: f64,
    /// (end of interval in s, bit/s) over the whole load.
    pub up: Vec<(f64, f64)>,
    pub down: Vec<(f64, f64)>,
}

/// A host's goodput from iperf3 `--bidir -J` (client side: `sum` is the upload,
/// `sum_bidir_reverse` the download).
pub fn host_run(json: &str) -> Result<HostRun, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("no JSON ({e}): {}", clip(json)))?;
    if let Some(e) = v["error"].as_str() {
        return Err(e.to_string());
    }
    let mut run = HostRun::default();
    let empty = vec![];
    for i in v["intervals"].as_array().unwrap_or(&empty) {
        for (key, series) in [("sum", &mut run.up), ("sum_bidir_reverse", &mut run.down)] {
            let end = i[key]["end"].as_f64().unwrap_or(0.0);
            let bps = i[key]["bits_per_second"].as_f64().unwrap_or(0.0);
            series.push((end, bps));
        }
    }
    // iperf3's last interval holds the streams' final flush (host b's eight once showed half
    // again their rate there): it is left out with the ramp.
    let last = v["intervals"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|i| i["sum"]["end"].as_f64())
        .unwrap_or(f64::INFINITY);
    let mean = |s: &[(f64, f64)]| {
        let after: Vec<f64> = s
            .iter()
            .filter(|(t, _)| *t > RAMP_S && *t < last - 0.01)
            .map(|(_, b)| *b)
            .collect();
        if after.is_empty() {
            0.0
        } else {
            after.iter().sum::<f64>() / after.len() as f64
        }
    };
    run.up_bps = mean(&run.up);
    run.down_bps = mean(&run.down);
    if run.up.is_empty() {
        return Err("no intervals".into());
    }
    Ok(run)
}

fn clip(s: &str) -> &str {
    &s[..s.len().min(200)]
}

/// The round trips (ms) in ping's output.
pub fn rtts(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

/// ping -q's average (`rtt min/avg/max/mdev = a/b/c/d ms`).
pub fn ping_avg(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("min/avg/max"))?;
    line.split('=')
        .nth(1)?
        .trim()
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// The `q` quantile (nearest rank) of `v`.
pub fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    Some(s[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_bidir_json_gives_both_directions_after_the_ramp() {
        let json = r#"{"intervals": [
            {"sum": {"end": 1.0, "bits_per_second": 9e6}, "sum_bidir_reverse": {"end": 1.0, "bits_per_second": 1e6}},
            {"sum": {"end": 3.0, "bits_per_second": 2e6}, "sum_bidir_reverse": {"end": 3.0, "bits_per_second": 4e6}},
            {"sum": {"end": 4.0, "bits_per_second": 4e6}, "sum_bidir_reverse": {"end": 4.0, "bits_per_second": 6e6}},
            {"sum": {"end": 4.5, "bits_per_second": 9e6}, "sum_bidir_reverse": {"end": 4.5, "bits_per_second": 9e6}}
        ]}"#;
        let r = host_run(json).unwrap();
        assert_eq!((r.up_bps, r.down_bps), (3e6, 5e6));
        assert_eq!(r.up.len(), 4);
        assert!(host_run(r#"{"error": "unable to connect"}"#)
            .unwrap_err()
            .contains("unable"));
    }

    #[test]
    fn ping_output_and_quantiles() {
        let text = "64 bytes from 10.78.4.2: icmp_seq=1 ttl=62 time=21.3 ms\n64 bytes from 10.78.4.2: icmp_seq=2 ttl=62 time=25 ms\n";
        assert_eq!(rtts(text), vec![21.3, 25.0]);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(
            ping_avg("rtt min/avg/max/mdev = 20.1/20.5/21.0/0.2 ms"),
            Some(20.5)
        );
    }
}
