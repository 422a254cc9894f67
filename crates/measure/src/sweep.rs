//! The framing sweep of `unbloat tune`: ICMP echoes of many sizes to one address, each size many
//! times, and the round trip of every reply. ATM's 48-byte cells show as a staircase in the
//! round trip against the packet size; `unbloat_tune::framing` reads it. This module only
//! measures.
//!
//! Heads up! This is the ping sweep of the ATM overhead detector (Sebastian Moeller's
//! `ATM_overhead_detector`, analysed offline in Octave), done in-process: one size is not swept
//! after another, every round sends every size once in an order of its own (a seeded shuffle),
//! so that a drift of the path's delay over the sweep (a neighbour's download starting, a
//! modem warming up) lands on every size alike instead of tilting the line.
//!
//! What callers can rely on:
//! - Sizes are whole IP packets, header included: 20 bytes of IPv4 or 40 of IPv6 header, 8 of
//!   ICMP, the rest payload. An echo reply carries the request's payload back, so both
//!   directions carry packets of the planned size; a reply of another size is not counted.
//! - Echoes leave on an absolute schedule (`start + k * interval`), never sleep-after-send.
//!   The interval must exceed the largest echo's time on the link's slower direction (a 256-byte
//!   packet is 7 ATM cells, 3 ms at 1 Mbit/s), or echoes queue behind each other.
//! - Every echo sent is in the result, answered or not (`rtt_ns: None` = lost), in send order.
//!   Receive times are the kernel's arrival stamps ([`unbloat_icmp::rxtime`]).
//! - `stop` (Ctrl-C) is looked at before every echo and at least every 50 ms; the sweep then
//!   returns what it has, marked [`SweepSamples::stopped`].

use crate::atomic64::AtomicU64;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_icmp::echo::{IcmpSocket, ICMP_HEADER, ICMP_PAYLOAD};

use crate::MeasureError;

/// More than 1000 echoes a second would be a flood, not a measurement.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// What to send: every size once per round, `rounds` times, one echo every `interval`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// IP packet sizes in bytes, header included.
    pub ip_bytes: Vec<u16>,
    pub rounds: u32,
    pub interval: Duration,
    /// How long to wait after the last echo for its reply.
    pub grace: Duration,
    /// Seeds the order within each round (fixed: two sweeps with one plan send alike).
    pub seed: u64,
}

impl Default for SweepPlan {
    /// 64..=256 bytes, every byte (193 sizes, four cells and more, so every offset of the cell
    /// boundary is seen at least four times), 10 rounds, 10 ms apart (a 256-byte echo is 7 cells,
    /// under 10 ms at 300 kbit/s): 19.3 s, and 1 s for the last replies.
    fn default() -> SweepPlan {
        SweepPlan::every_byte(64, 256, 10, Duration::from_millis(10))
    }
}

impl SweepPlan {
    /// Every size from `lo` to `hi` IP bytes inclusive.
    pub fn every_byte(lo: u16, hi: u16, rounds: u32, interval: Duration) -> SweepPlan {
        SweepPlan {
            ip_bytes: (lo..=hi).collect(),
            rounds,
            interval,
            grace: Duration::from_secs(1),
            seed: 0x5eed_f4a3,
        }
    }

    /// Echoes the plan sends.
    pub fn echoes(&self) -> usize {
        self.ip_bytes.len() * self.rounds as usize
    }

    /// How long the sweep takes when nothing stops it.
    pub fn duration(&self) -> Duration {
        self.interval * self.echoes() as u32 + self.grace
    }

    /// Whether the plan can be sent to an IPv4 (or IPv6) address: sizes that hold the ICMP
    /// header and the echo's id and sequence, within 1500 bytes; at least one round; not a flood.
    pub fn validate(&self, ipv6: bool) -> Result<(), MeasureError> {
        let (header, family) = if ipv6 { (40, "IPv6") } else { (20, "IPv4") };
        let lo = header + ICMP_HEADER + ICMP_PAYLOAD;
        let bad = |why: String| Err(MeasureError::InvalidArgument(why));
        if self.ip_bytes.is_empty() || self.rounds == 0 {
            return bad("a sweep needs at least one size and one round".into());
        }
        if let Some(s) = self
            .ip_bytes
            .iter()
            .find(|&&s| !(lo..=1500).contains(&usize::from(s)))
        {
            return bad(format!(
                "sweep size {s} bytes: {family} echoes are {lo}..=1500 bytes"
            ));
        }
        if self.interval < MIN_INTERVAL {
            return bad(format!(
                "sweep interval {:?}: at least {MIN_INTERVAL:?} (no floods)",
                self.interval
            ));
        }
        Ok(())
    }

    /// The send order: (round, IP bytes) for every echo, each round a shuffle of its own of
    /// every size (Fisher-Yates on splitmix64, seeded by the plan's seed and the round).
    pub fn schedule(&self) -> Vec<(u32, u16)> {
        let mut order = Vec::with_capacity(self.echoes());
        for round in 0..self.rounds {
            let mut sizes = self.ip_bytes.clone();
            let mut state = self.seed ^ u64::from(round).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for i in (1..sizes.len()).rev() {
                let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
                sizes.swap(i, j);
            }
            order.extend(sizes.into_iter().map(|s| (round, s)));
        }
        order
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): a tiny, good-enough generator for a send order.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One echo as sent, and its round trip if answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// The IP packet's size, header included, each way.
    pub ip_bytes: u16,
    pub round: u32,
    /// When it left, since the sweep started.
    pub sent_ns: u64,
    /// `None`: lost (or answered after the grace time, or not at all sendable).
    pub rtt_ns: Option<u64>,
}

/// What a sweep measured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SweepSamples {
    pub target: Option<IpAddr>,
    pub ipv6: bool,
    /// Every echo sent, in send order.
    pub echoes: Vec<Echo>,
    /// Ended early by the stop flag.
    pub stopped: bool,
    /// Remarks for the report (a raw socket was used, sends failed).
    pub notes: Vec<String>,
}

impl SweepSamples {
    pub fn answered(&self) -> usize {
        self.echoes.iter().filter(|e| e.rtt_ns.is_some()).count()
    }

    pub fn lost(&self) -> usize {
        self.echoes.len() - self.answered()
    }
}

/// Where a sweep is, after each echo sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepProgress {
    pub sent: usize,
    pub answered: usize,
    pub total: usize,
}

/// Sends `plan` to `target` and returns every echo with its round trip. `progress` is called
/// after every echo sent (on the caller's thread). Errors: an invalid plan, no ICMP socket
/// (neither unprivileged ICMP nor root), every send refused, or every echo lost.
pub fn run(
    plan: &SweepPlan,
    target: IpAddr,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&SweepProgress),
) -> Result<SweepSamples, MeasureError> {
    let sock = IcmpSocket::open(target, 0).map_err(|why| {
        MeasureError::io(
            format!("sending ICMP echoes to {target}"),
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
        )
    })?;
    plan.validate(sock.is_ipv6())?;
    let mut samples = SweepSamples {
        target: Some(target),
        ipv6: sock.is_ipv6(),
        ..SweepSamples::default()
    };
    if sock.raw {
        samples
            .notes
            .push("unprivileged ICMP sockets are not allowed here; used a raw socket".into());
    }
    let schedule = plan.schedule();
    // Receive time + 1 per echo (0: none yet), written by the receiver, read at the end.
    let received: Arc<Vec<AtomicU64>> =
        Arc::new((0..schedule.len()).map(|_| AtomicU64::new(0)).collect());
    let answered = Arc::new(AtomicU64::new(0));
    let sock = Arc::new(sock);
    let done = Arc::new(AtomicBool::new(false));
    let test_id = echo_id();
    let epoch = Instant::now();
    let receiver = {
        let (sock, received, answered, done) = (
            sock.clone(),
            received.clone(),
            answered.clone(),
            done.clone(),
        );
        let expect: Vec<usize> = schedule
            .iter()
            .map(|&(_, s)| usize::from(s) - sock.ip_header_bytes())
            .collect();
        thread::Builder::new()
            .name("unbloat-sweep-rx".into())
            .spawn(move || receive(&sock, test_id, epoch, &expect, &received, &answered, &done))
            .map_err(|e| MeasureError::io("starting the sweep's receiver", e))?
    };
    let sent = send_all(
        &sock,
        &schedule,
        plan.interval,
        test_id,
        epoch,
        stop,
        &answered,
        progress,
    );
    if !stop.load(Ordering::Relaxed) {
        // The last replies: until all are in, or the grace time is over.
        let until = Instant::now() + plan.grace;
        while Instant::now() < until
            && (answered.load(Ordering::Relaxed) as usize) < sent.len()
            && !stop.load(Ordering::Relaxed)
        {
            thread::sleep(Duration::from_millis(10));
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = receiver.join();
    samples.stopped = sent.len() < schedule.len() || stop.load(Ordering::Relaxed);
    let failed = sent.iter().filter(|s| s.is_none()).count();
    for (i, (&(round, ip_bytes), sent_ns)) in schedule.iter().zip(&sent).enumerate() {
        let recv = received[i].load(Ordering::Relaxed);
        samples.echoes.push(Echo {
            ip_bytes,
            round,
            sent_ns: sent_ns.unwrap_or(0),
            rtt_ns: match (sent_ns, recv) {
                (Some(s), r) if r > 0 => Some((r - 1).saturating_sub(*s)),
                _ => None,
            },
        });
    }
    if failed > 0 {
        samples.notes.push(format!(
            "{failed} echoes could not be sent (no route at the time?)"
        ));
    }
    if !samples.echoes.is_empty() && samples.answered() == 0 && !samples.stopped {
        return Err(MeasureError::ProbesLost {
            kind: "ICMP echo",
            sent: samples.echoes.len(),
            target: target.to_string(),
        });
    }
    Ok(samples)
}

/// Sends the schedule on its absolute deadlines until done or stopped; the send time of each
/// echo sent (`None`: the kernel refused it), as many as were sent.
#[allow(clippy::too_many_arguments)]
fn send_all(
    sock: &IcmpSocket,
    schedule: &[(u32, u16)],
    interval: Duration,
    test_id: u64,
    epoch: Instant,
    stop: &AtomicBool,
    answered: &AtomicU64,
    progress: &mut dyn FnMut(&SweepProgress),
) -> Vec<Option<u64>> {
    let mut sent = Vec::with_capacity(schedule.len());
    for (seq, &(_, ip_bytes)) in schedule.iter().enumerate() {
        let deadline = interval * seq as u32;
        loop {
            let now = epoch.elapsed();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                break;
            }
            thread::sleep((deadline - now).min(Duration::from_millis(50)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let payload = usize::from(ip_bytes) - sock.ip_header_bytes() - ICMP_HEADER;
        let at = epoch.elapsed().as_nanos() as u64;
        let ok = sock.send_echo_sized(test_id, seq as u32, payload).is_ok();
        sent.push(ok.then_some(at));
        progress(&SweepProgress {
            sent: sent.len(),
            answered: answered.load(Ordering::Relaxed) as usize,
            total: schedule.len(),
        });
    }
    sent
}

/// Reads replies until `done`: a reply to echo `seq` counts when its ICMP length is the one sent.
fn receive(
    sock: &IcmpSocket,
    test_id: u64,
    epoch: Instant,
    expect_icmp_len: &[usize],
    received: &[AtomicU64],
    answered: &AtomicU64,
    done: &AtomicBool,
) {
    let mut buf = [0u8; 2048];
    while !done.load(Ordering::Relaxed) {
        let Ok(got) = sock.recv(&mut buf) else {
            continue; // the read timeout (100 ms): look at `done` again
        };
        let at = got.since(epoch).as_nanos() as u64;
        let Some((seq, len)) = sock.parse_reply(&buf[..got.len], test_id) else {
            continue;
        };
        let seq = seq as usize;
        if expect_icmp_len.get(seq) != Some(&len) {
            continue; // not ours, or truncated on the way: not the size the sweep measures
        }
        if received[seq]
            .compare_exchange(0, at + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            answered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// An id for this sweep's echoes, unlikely to be another run's on this host.
fn echo_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40) ^ 0x5357_4545_5000_0000
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
