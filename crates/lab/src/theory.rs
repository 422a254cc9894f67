//! What one direction of a lab test could carry as TCP goodput at best: the yardstick of the
//! table's "share of the theoretical".
//!
//! The goodput formula (seed 001, [`unbloat_shaper::goodput`]) assumes the link carries nothing
//! but full-size segments. In a test it also carries the test's own latency probes (a request
//! one way, the reply the other) and, when the other direction moves data too (rrul), that
//! transfer's ACKs: Linux acknowledges every second full-size segment with a 52-byte packet
//! (IPv4 20 + TCP with timestamps 32), and on a 220 kbit/s ATM uplink the ACKs of a 600 kbit/s
//! download and the probes together take about a fifth of the line. So the yardstick here is the
//! formula applied to what is left of the line rate after those packets, each costed with the
//! link's framing (overhead, mpu, ATM cells) exactly as the formula costs a data segment.
//! Without load the other way and without probes it is exactly [`LinkProfile::theoretical_goodput`].
//!
//! Heads up: an ACK filter (cake's `ack-filter`) sends fewer ACKs than one per two segments, so a
//! strategy that uses one can show a little over 100 %.

use unbloat_measure::probe::ipv4_probe_bytes;
use unbloat_report::{Direction, Phase, Results};
use unbloat_shaper::goodput::{GoodputModel, LinkFraming};
use unbloat_units::Rate;

use crate::profile::LinkProfile;

/// IPv4 + TCP with timestamps, no payload: one pure ACK.
pub const ACK_IP_BYTES: u64 = 20 + 32;
/// Full-size segments per ACK a Linux receiver sends in a bulk transfer (delayed ACKs, RFC 9293
/// §3.8.6.3: at least every second segment).
pub const SEGMENTS_PER_ACK: f64 = 2.0;

/// The best TCP goodput of direction `dir` in `results`, given the probes the test sent and the
/// other direction's measured goodput (`reverse_bps`).
pub fn theoretical_in_test(
    profile: &LinkProfile,
    results: &Results,
    dir: Direction,
    reverse_bps: Option<f64>,
) -> Rate {
    let line = match dir {
        Direction::Down => profile.down,
        Direction::Up => profile.up,
    };
    let probes = probe_rates(results);
    theoretical_with_competition(profile, line, reverse_bps.unwrap_or(0.0), &probes)
}

/// The formula applied to `line` minus the ACKs of `reverse_bps` of goodput the other way and
/// `probes` (packets per second, IP bytes each) sent this way.
pub fn theoretical_with_competition(
    profile: &LinkProfile,
    line: Rate,
    reverse_bps: f64,
    probes: &[(f64, u64)],
) -> Rate {
    let model = GoodputModel::ipv4_timestamps(LinkFraming::from(&profile.link_layer()));
    let mss = model.payload_bytes().unwrap_or(1448) as f64;
    let wire = |ip_bytes: u64| model.link.wire_bytes(ip_bytes) as f64 * 8.0;
    let acks_per_s = reverse_bps.max(0.0) / 8.0 / mss / SEGMENTS_PER_ACK;
    let taken: f64 = acks_per_s * wire(ACK_IP_BYTES)
        + probes
            .iter()
            .map(|(pps, bytes)| pps * wire(*bytes))
            .sum::<f64>();
    let left = (line.bits_per_sec() as f64 - taken).max(0.0);
    profile.theoretical_goodput(Rate::from_bits_per_sec(left as u64))
}

/// Probe packets per second during the load and their IP sizes: each probe crosses the link
/// once each way, so the same list holds for both directions. The gateway's probes stop short of
/// the access link.
fn probe_rates(results: &Results) -> Vec<(f64, u64)> {
    let load_s = results.phases.load_s;
    if load_s <= 0.0 {
        return Vec::new();
    }
    results
        .probes
        .iter()
        .filter(|p| p.hop == unbloat_report::model::Hop::FarEnd)
        .map(|p| {
            let sent = p
                .samples
                .iter()
                .filter(|s| results.phases.phase_of(s.t) == Phase::Loaded)
                .count();
            (sent as f64 / load_s, ipv4_probe_bytes(p.kind))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_report::ProbeKind;

    fn profile(name: &str) -> LinkProfile {
        LinkProfile::shipped(name).expect("shipped profile")
    }

    #[test]
    fn with_nothing_competing_it_is_the_plain_formula() {
        let p = profile("vdsl2");
        assert_eq!(
            theoretical_with_competition(&p, p.up, 0.0, &[]),
            p.theoretical_goodput(p.up)
        );
    }

    #[test]
    fn acks_of_the_other_direction_cost_their_framed_size() {
        // dsl-2002: pppoa-vcmux, overhead 10, ATM. A 52-byte ACK + 10 = 62 bytes = 2 cells =
        // 106 bytes on the line. 600 kbit/s of download = 600000/8/1448/2 = 25.9 ACK/s, so
        // 25.9 * 106 * 8 = 21961 bit/s of the 220 kbit/s uplink.
        let p = profile("dsl-2002");
        let acks = 600_000.0 / 8.0 / 1448.0 / 2.0 * 106.0 * 8.0;
        let want = p.theoretical_goodput(Rate::from_bits_per_sec((220_000.0 - acks) as u64));
        assert_eq!(theoretical_with_competition(&p, p.up, 600_000.0, &[]), want);
        assert!(want < p.theoretical_goodput(p.up));
    }

    #[test]
    fn probes_cost_their_framed_size_too() {
        // 20 UDP probes a second: 20 + 8 + 44 = 72 bytes, + 10 = 82 bytes = 2 cells = 106
        // bytes each.
        let p = profile("dsl-2002");
        assert_eq!(ipv4_probe_bytes(ProbeKind::Udp), 72);
        let want = p.theoretical_goodput(Rate::from_bits_per_sec(220_000 - 20 * 106 * 8));
        assert_eq!(
            theoretical_with_competition(&p, p.up, 0.0, &[(20.0, 72)]),
            want
        );
    }

    #[test]
    fn more_competition_than_line_leaves_nothing() {
        let p = profile("dsl-2002");
        let r = theoretical_with_competition(&p, p.up, 1e9, &[]);
        assert_eq!(r, Rate::ZERO);
    }
}
