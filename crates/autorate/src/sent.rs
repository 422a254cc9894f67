//! The probes still out, and the test an answer must pass to be one of them (issue 36 item 6).
//!
//! Anyone who can send this host an ICMP packet can send it a reply. So nothing an answer says
//! about *our* side is believed: when a probe left, on either clock, is kept here, keyed by its
//! sequence number, and only the reflector's own fields (its receive and transmit times) are read
//! from the reply. An answer is one of ours when it comes from the address the probe went to, is
//! the kind of reply the probe asks for, and carries back the probe's cookie: 64 random bits in
//! an echo's payload, or the originate time of a timestamp request (RFC 792 has the reflector
//! copy it; its payload is not echoed). Anything else with our identifier (a forgery, a second
//! copy, an answer older than [`LATE_LIMIT`]) is dropped and counted, so a run's summary shows it.
//!
//! What a forger off the path must guess: the identifier (16 random bits per pinger), the
//! sequence (16 bits, from a random start) and, for an echo, the cookie (64 bits); for a
//! timestamp, the originate time to the millisecond instead of the cookie. One on the path sees
//! every probe and can forge or delay anything: no probe can defend against that.
//!
//! Pure: times are passed in; the random numbers too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use crate::probe::Method;
pub use crate::reflectors::LATE_LIMIT;

/// At 20 probes a second, [`LATE_LIMIT`] holds 200: a bound that only a caller which never
/// receives could reach, kept so that memory stays bounded whatever happens.
const MAX_OUT: usize = 4096;

/// One probe as it left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    pub to: IpAddr,
    pub method: Method,
    /// An echo's payload, or a timestamp's originate time (in its low 32 bits).
    pub cookie: u64,
    /// When it left, on the pinger's monotonic clock.
    pub at: Duration,
    /// When it left in milliseconds since midnight UT, as the pinger's clock reads it (the
    /// fraction kept; the originate field has whole milliseconds).
    pub ut_ms: f64,
}

/// What a reply said, before it is matched ([`Out::take`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Echo { seq: u16, cookie: u64 },
    Timestamp { seq: u16, originate: u32 },
}

impl Reply {
    pub fn seq(&self) -> u16 {
        match self {
            Reply::Echo { seq, .. } | Reply::Timestamp { seq, .. } => *seq,
        }
    }
}

/// The probes out, numbered from a random start.
#[derive(Debug, Clone)]
pub struct Out {
    next: u16,
    out: HashMap<u16, Sent>,
    unmatched: u64,
}

impl Out {
    pub fn new(first_seq: u16) -> Out {
        Out {
            next: first_seq,
            out: HashMap::new(),
            unmatched: 0,
        }
    }

    /// Records a probe about to leave; its sequence number. Probes out longer than
    /// [`LATE_LIMIT`] are forgotten first: 2^16 numbers last 50 minutes at 20 a second, so a
    /// number is never out twice.
    pub fn add(&mut self, sent: Sent) -> u16 {
        self.out
            .retain(|_, s| sent.at.saturating_sub(s.at) <= LATE_LIMIT);
        if self.out.len() >= MAX_OUT {
            if let Some(oldest) = self.out.iter().min_by_key(|(_, s)| s.at).map(|(k, _)| *k) {
                self.out.remove(&oldest);
            }
        }
        let seq = self.next;
        self.next = self.next.wrapping_add(1);
        self.out.insert(seq, sent);
        seq
    }

    /// The probe `reply` from `from` answers, taken out (a second copy matches nothing); None,
    /// counted, when it answers none.
    pub fn take(&mut self, from: IpAddr, reply: Reply) -> Option<Sent> {
        let seq = reply.seq();
        let ours = self.out.get(&seq).is_some_and(|s| {
            s.to == from
                && match reply {
                    Reply::Echo { cookie, .. } => s.method == Method::Echo && s.cookie == cookie,
                    Reply::Timestamp { originate, .. } => {
                        s.method == Method::Timestamp && s.cookie == u64::from(originate)
                    }
                }
        });
        if !ours {
            self.unmatched += 1;
            return None;
        }
        self.out.remove(&seq)
    }

    /// Replies with our identifier that matched no probe out.
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn echo(to: IpAddr, cookie: u64, at_ms: u64) -> Sent {
        Sent {
            to,
            method: Method::Echo,
            cookie,
            at: Duration::from_millis(at_ms),
            ut_ms: 0.0,
        }
    }

    #[test]
    fn only_the_right_cookie_from_the_right_host_matches_and_only_once() {
        let mut out = Out::new(65_535);
        let s = echo(A, 0xdead_beef_0bad_f00d, 0);
        let seq = out.add(s);
        assert_eq!(seq, 65_535);
        assert_eq!(out.add(echo(B, 1, 0)), 0, "the numbers wrap");
        let forged = [
            (A, Reply::Echo { seq, cookie: 0 }),
            (
                B,
                Reply::Echo {
                    seq,
                    cookie: s.cookie,
                },
            ),
            (
                A,
                Reply::Timestamp {
                    seq,
                    originate: s.cookie as u32,
                },
            ),
            (
                A,
                Reply::Echo {
                    seq: 7,
                    cookie: s.cookie,
                },
            ),
        ];
        for (from, r) in forged {
            assert_eq!(out.take(from, r), None, "{from} {r:?}");
        }
        assert_eq!(out.unmatched(), 4);
        let genuine = Reply::Echo {
            seq,
            cookie: s.cookie,
        };
        assert_eq!(out.take(A, genuine), Some(s));
        assert_eq!(out.take(A, genuine), None, "a second copy");
        assert_eq!(out.unmatched(), 5);
    }

    #[test]
    fn a_timestamp_matches_on_its_originate_time() {
        let mut out = Out::new(1);
        let s = Sent {
            method: Method::Timestamp,
            cookie: 43_200_123,
            ..echo(A, 0, 0)
        };
        let seq = out.add(s);
        let r = |originate| Reply::Timestamp { seq, originate };
        assert_eq!(out.take(A, r(0)), None);
        assert_eq!(out.take(A, r(43_200_123)), Some(s));
    }

    #[test]
    fn a_probe_out_longer_than_the_late_limit_is_forgotten() {
        let mut out = Out::new(1);
        let old = out.add(echo(A, 5, 0));
        out.add(echo(A, 6, 10_001));
        assert_eq!(
            out.take(
                A,
                Reply::Echo {
                    seq: old,
                    cookie: 5
                }
            ),
            None
        );
    }
}
