//! Framing detection on synthetic sweeps: links whose round trip is the serialisation of each
//! echo both ways plus a base delay, with queueing noise (exponential, so only ever later),
//! occasional long waits and losses, as a real sweep sees them.

use super::*;
use unbloat_measure::sweep::{Echo, SweepPlan};
use unbloat_units::Rate;

/// How a synthetic link frames a packet of `ip` bytes: the bytes it costs on the wire.
#[derive(Clone, Copy)]
enum Wire {
    /// ATM cells: 53 bytes per 48 of (IP + overhead), at least `mpu` before rounding.
    Atm { overhead: u32, mpu: u32 },
    /// Bytes over the IP packet, at least `mpu`, times `num/den` (PTM's 65/64).
    Linear {
        overhead: u32,
        mpu: u32,
        num: u32,
        den: u32,
    },
}

impl Wire {
    fn bytes(self, ip: u32) -> f64 {
        match self {
            Wire::Atm { overhead, mpu } => f64::from((ip + overhead).max(mpu).div_ceil(48) * 53),
            Wire::Linear {
                overhead,
                mpu,
                num,
                den,
            } => f64::from((ip + overhead).max(mpu)) * f64::from(num) / f64::from(den),
        }
    }
}

struct Link {
    wire: Wire,
    up_bit: f64,
    down_bit: f64,
    base_ms: f64,
    /// Mean of the exponential queueing noise on every echo.
    jitter_ms: f64,
}

fn splitmix(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
}

/// A sweep of 64..=256 bytes, `rounds` rounds, over `link`; 2 % lost, 3 % met a 10 ms queue.
fn sweep(link: &Link, rounds: u32, seed: u64) -> SweepSamples {
    let mut rng = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let plan = SweepPlan::every_byte(64, 256, rounds, std::time::Duration::from_millis(10));
    let echoes = plan
        .schedule()
        .into_iter()
        .map(|(round, ip_bytes)| {
            let wire = link.wire.bytes(u32::from(ip_bytes)) * 8.0;
            let serial = wire / link.up_bit + wire / link.down_bit;
            let mut ms = link.base_ms + serial * 1e3;
            ms += -link.jitter_ms * (1.0 - splitmix(&mut rng)).ln();
            if splitmix(&mut rng) < 0.03 {
                ms += 10.0;
            }
            let lost = splitmix(&mut rng) < 0.02;
            Echo {
                ip_bytes,
                round,
                sent_ns: 0,
                rtt_ns: (!lost).then_some((ms * 1e6) as u64),
            }
        })
        .collect();
    SweepSamples {
        echoes,
        ..SweepSamples::default()
    }
}

fn atm(overhead: u32, down_mbit: f64, up_mbit: f64, jitter_ms: f64) -> Link {
    Link {
        wire: Wire::Atm { overhead, mpu: 0 },
        up_bit: up_mbit * 1e6,
        down_bit: down_mbit * 1e6,
        base_ms: 20.0,
        jitter_ms,
    }
}

fn linear(
    overhead: u32,
    mpu: u32,
    ptm: bool,
    down_mbit: f64,
    up_mbit: f64,
    jitter_ms: f64,
) -> Link {
    let (num, den) = if ptm { (65, 64) } else { (1, 1) };
    Link {
        wire: Wire::Linear {
            overhead,
            mpu,
            num,
            den,
        },
        up_bit: up_mbit * 1e6,
        down_bit: down_mbit * 1e6,
        base_ms: 20.0,
        jitter_ms,
    }
}

#[test]
fn every_atm_overhead_is_found_to_the_byte() {
    // 8..=55 covers every offset modulo 48 once. ADSL2+ at 16/1 Mbit/s (a cell adds 0.45 ms),
    // with 0.3 ms of mean queueing noise on every echo.
    for overhead in 8..=55 {
        let g = detect(&sweep(
            &atm(overhead, 16.0, 1.0, 0.3),
            10,
            u64::from(overhead),
        ));
        assert_eq!(g.family, Family::Atm, "overhead {overhead}: {}", g.reason);
        assert_eq!(g.overhead, Some(overhead as i32), "{}", g.reason);
        assert_eq!(g.mpu, None, "overhead {overhead}: {}", g.reason);
        assert!(g.confidence > 0.9, "{overhead}: {}", g.confidence);
        // 53 bytes each way: 0.424 ms up + 0.0265 ms down.
        assert!((g.step_ms - 0.4505).abs() < 0.03, "{}", g.step_ms);
    }
}

#[test]
fn atm_overheads_outside_the_range_come_back_48_apart() {
    for (truth, reported) in [(0, 48), (4, 52), (60, 12), (103, 7 + 48)] {
        let g = detect(&sweep(&atm(truth, 8.0, 0.8, 0.2), 8, 3));
        assert_eq!(g.family, Family::Atm, "{}", g.reason);
        assert_eq!(g.overhead, Some(reported), "truth {truth}: {}", g.reason);
    }
}

#[test]
fn slow_and_fast_straight_lines_are_not_atm() {
    let links = [
        ("vdsl2 80/20", linear(26, 64, true, 80.0, 20.0, 0.05)),
        ("ptm 40/10", linear(22, 0, true, 40.0, 10.0, 0.05)),
        ("docsis 100/10", linear(18, 64, false, 100.0, 10.0, 0.3)),
        ("fiber 250/250", linear(38, 84, false, 250.0, 250.0, 0.05)),
        // As slow as ADSL, without cells: its slope would allow a step of 0.77 ms, none shows.
        ("ethernet 1/1", linear(38, 84, false, 1.0, 1.0, 0.3)),
    ];
    for (name, link) in links {
        for seed in 0..5 {
            let g = detect(&sweep(&link, 10, seed));
            assert_eq!(
                g.family,
                Family::Straight,
                "{name} seed {seed}: {}",
                g.reason
            );
            assert_eq!((g.overhead, g.mpu), (None, None));
            assert!(g.confidence > 0.5 && g.link_layer().is_none(), "{name}");
        }
    }
}

#[test]
fn noise_too_high_for_the_step_is_undecided_never_a_guess() {
    // Pure noise: a flat line under 3 ms of queueing on every echo.
    for seed in 0..20 {
        let flat = linear(0, 0, false, 1e6, 1e6, 3.0);
        let g = detect(&sweep(&flat, 10, seed));
        assert_eq!(
            g.family,
            Family::Undecided,
            "flat seed {seed}: {}",
            g.reason
        );
        assert!(g.confidence < 0.5, "{}", g.confidence);
        assert!(g.reason.contains("--link"), "{}", g.reason);
        assert!(g.noise_ms > 0.1, "{}", g.noise_ms);
    }
    // Fast ATM (24/3.3, a cell adds 0.15 ms) under 8 ms of noise and only 3 rounds.
    for seed in 0..10 {
        let g = detect(&sweep(&atm(40, 24.0, 3.3, 8.0), 3, seed));
        assert_eq!(g.family, Family::Undecided, "seed {seed}: {}", g.reason);
    }
}

#[test]
fn a_sawtooth_taller_than_the_slope_allows_is_not_called_atm() {
    // A flat, quiet line with a 1 ms ripple every 48 bytes: periodic, but no cells' slope.
    let mins: Vec<SizeMin> = (64..=256u16)
        .map(|x| SizeMin {
            ip_bytes: x,
            min_ms: 20.0 + fit::saw(f64::from(x), 30.0) + if x % 2 == 0 { 0.002 } else { 0.0 },
            replies: 10,
        })
        .collect();
    let g = detect_minima(&mins);
    assert_eq!(g.family, Family::Undecided, "{}", g.reason);
    assert!(g.reason.contains("repeats every 48 bytes"), "{}", g.reason);
    assert!(g.confidence < 0.5);
}

#[test]
fn a_floor_under_the_smallest_packets_is_reported_as_mpu() {
    // Overhead 10 and mpu 144: 64..=86-byte packets cost 3 cells instead of 2.
    let mut link = atm(10, 16.0, 1.0, 0.1);
    link.wire = Wire::Atm {
        overhead: 10,
        mpu: 144,
    };
    let g = detect(&sweep(&link, 10, 1));
    assert_eq!(g.family, Family::Atm, "{}", g.reason);
    assert_eq!((g.overhead, g.mpu), (Some(10), Some(144)), "{}", g.reason);
    let l = g.link_layer().expect("atm");
    assert_eq!((l.overhead, l.mpu, l.framing), (10, 144, Framing::Atm));
    assert!(g.reason.contains("mpu 144"), "{}", g.reason);
}

#[test]
fn short_or_empty_sweeps_say_so() {
    let g = detect(&SweepSamples::default());
    assert_eq!((g.family, g.sizes, g.model), (Family::Undecided, 0, None));
    assert!(g.reason.contains("0 sizes"), "{}", g.reason);
    let mut few = sweep(&atm(40, 8.0, 0.8, 0.1), 3, 1);
    few.echoes.retain(|e| e.ip_bytes < 120);
    let g = detect(&few);
    assert_eq!(g.family, Family::Undecided, "{}", g.reason);
    assert!(g.reason.contains("two cells"), "{}", g.reason);
}

#[test]
fn the_guess_serialises_with_its_family_in_words() {
    let g = detect(&sweep(&atm(40, 7.0, 0.768, 0.1), 4, 9));
    let v = serde_json::to_value(&g).expect("json");
    assert_eq!(v["family"], "atm");
    assert_eq!(v["overhead"], 40);
    let back: FramingGuess = serde_json::from_value(v).expect("back");
    assert_eq!(back, g);
}

#[test]
fn the_plot_shows_every_size_and_the_model() {
    let s = sweep(&atm(40, 7.0, 0.768, 0.1), 4, 2);
    let mins = per_size_min(s.echoes.iter().map(|e| (e.ip_bytes, e.rtt_ns)));
    let g = detect_minima(&mins);
    let svg = plot::render_svg(&mins, &g, None);
    assert_eq!(svg.matches("<circle").count(), mins.len());
    assert!(svg.contains("data-series=\"model\""), "the model line");
    assert!(svg.contains("ATM, overhead 40"), "the verdict");
    let empty = plot::render_svg(&[], &detect_minima(&[]), Some("pppoe-llcsnap"));
    assert!(
        svg.contains("residual") && svg.contains("fitted step"),
        "the evidence"
    );
    assert!(empty.contains("no replies") && empty.ends_with("</svg>\n"));
    assert!(
        empty.contains("searched with pppoe-llcsnap"),
        "the fallback"
    );
}

/// A sweep recorded in the lab (`fixtures/NAME.txt`: `size:ms` a line, `#` comments).
fn recorded(name: &str) -> Vec<SizeMin> {
    let text = match name {
        "adsl-rural-atm" => include_str!("fixtures/adsl-rural-atm.txt"),
        _ => include_str!("fixtures/adsl-rural-hidden.txt"),
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (size, ms) = l.split_once(':').expect("size:ms");
            SizeMin {
                ip_bytes: size.parse().expect("size"),
                min_ms: ms.parse().expect("ms"),
                replies: 4,
            }
        })
        .collect()
}

/// Issue 55's rural ADSL line: 1.5 Mbit/s down, 256 kbit/s up, PPPoE over LLC/SNAP (overhead 40).
fn rural() -> Option<(Rate, Rate)> {
    Some((Rate::from_kbit(1_500), Rate::from_kbit(256)))
}

#[test]
fn issue_55_a_flat_sweep_on_a_line_as_slow_as_adsl_is_not_straight() {
    // The lab's bytes FIFO before the fix let a lone echo through at once: 0.001 ms per 48
    // bytes where the rates put 1.756 ms. Without the rates it reads as a quiet straight line.
    let mins = recorded("adsl-rural-hidden");
    assert_eq!(detect_minima(&mins).family, Family::Straight);
    let g = detect_minima_on(&mins, rural());
    assert_eq!(g.family, Family::Undecided, "{}", g.reason);
    assert!(g.reason.contains("did not see the line"), "{}", g.reason);
    assert!(g.confidence < 0.5 && g.link_layer().is_none());
    assert!((g.line_step_ms.expect("rates") - 1.756).abs() < 0.01);
    // On a fast line the same flat sweep is no contradiction: 48 bytes at 100/40 Mbit/s take
    // 0.013 ms, under what the slope's noise can tell.
    let fast = detect_minima_on(&mins, Some((Rate::from_mbit(100), Rate::from_mbit(40))));
    assert_eq!(fast.family, Family::Straight, "{}", fast.reason);
}

#[test]
fn issue_55_the_rural_line_s_cells_and_overhead_from_its_recorded_sweep() {
    let g = detect_minima_on(&recorded("adsl-rural-atm"), rural());
    assert_eq!(g.family, Family::Atm, "{}", g.reason);
    assert!((g.overhead.expect("atm") - 40).abs() <= 4, "{}", g.reason);
    assert!(g.confidence > 0.9, "{}", g.confidence);
    // 53 bytes at 256 kbit/s and at 1.5 Mbit/s: 1.94 ms; the sawtooth as tall.
    assert!((g.fitted_step_ms - 1.94).abs() < 0.1, "{}", g.evidence());
    assert!(g.evidence().contains("residual"), "{}", g.evidence());
}

#[test]
fn a_synthetic_straight_line_at_its_rates_stays_straight() {
    // Ethernet as slow as ADSL, its serialisation in the round trip: the rates agree.
    let link = linear(38, 84, false, 1.0, 1.0, 0.3);
    for seed in 0..5 {
        let s = sweep(&link, 10, seed);
        let mins = per_size_min(s.echoes.iter().map(|e| (e.ip_bytes, e.rtt_ns)));
        let g = detect_minima_on(&mins, Some((Rate::from_mbit(1), Rate::from_mbit(1))));
        assert_eq!(g.family, Family::Straight, "seed {seed}: {}", g.reason);
    }
}
