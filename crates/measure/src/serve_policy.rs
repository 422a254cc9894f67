//! Who may use how much of a public `unbloat serve`, and with which marks (issue 36 item 8).
//!
//! A far end on the internet is a machine that sends gigabits to whoever asks. Left to the
//! client, one of them could hold every test slot for ten minutes each, and choose the DSCP of
//! the traffic the server sends into its own network. So, by default:
//! - A client is an IPv4 address or an IPv6 /64 ([`client_key`]): what one host, or one home
//!   network behind one router, is given. It runs [`DEFAULT_TESTS_PER_CLIENT`] test at a time;
//!   the others wait their turn, told why.
//! - A test lasts at most [`DEFAULT_MAX_SESSION`], idle phases included: flent's RRUL length
//!   (60 s of load) with `unbloat test`'s idle phases fits, a slot is not held for long.
//! - What the server sends carries only the marks a test needs ([`DscpPolicy::Standard`]):
//!   the classes of cake's tins that measurement profiles use. Not CS6 and CS7 (network
//!   control: routing protocols, often queued strictly first) and not arbitrary values (which
//!   another network may map to anything). The operator chooses `any` or `off`.

use std::time::Duration;

use crate::profile::dscp_name;

/// Tests one client may run at once, by default.
pub const DEFAULT_TESTS_PER_CLIENT: usize = 1;
/// The longest test a client may ask for by default, idle phases included: 60 s of load (flent's
/// RRUL) with idle phases of up to 30 s each.
pub const DEFAULT_MAX_SESSION: Duration = Duration::from_secs(120);
/// The marks [`DscpPolicy::Standard`] sends: BE (CS0), LE (RFC 8622), CS1 (bulk), AF41 (video),
/// CS5 and EF (voice). RRUL uses BE, CS1, CS5 and EF; cake's diffserv3/4 put each of these in
/// a different tin, which is what a tins test checks.
pub const STANDARD_DSCPS: [u8; 6] = [0, 1, 8, 34, 40, 46];

/// Which DSCP marks the server puts on what it sends (download streams, probe replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DscpPolicy {
    /// The standard classes a test needs (BE, LE, CS1, AF41, CS5, EF); a test that asks for
    /// another is refused.
    #[default]
    Standard,
    /// Whatever the client asks for (0 to 63), CS6 and CS7 included.
    Any,
    /// No marks: everything leaves as best effort; a test that asks for a mark is refused.
    Off,
}

impl DscpPolicy {
    pub fn allows(self, dscp: u8) -> bool {
        match self {
            DscpPolicy::Standard => STANDARD_DSCPS.contains(&dscp),
            DscpPolicy::Any => dscp < 64,
            DscpPolicy::Off => dscp == 0,
        }
    }

    /// The mark a probe reply gets when its request asks for `dscp`: that mark when allowed,
    /// best effort otherwise (the reply still comes back, so the client sees no false loss).
    pub fn mark(self, dscp: u8) -> u8 {
        if self.allows(dscp) {
            dscp
        } else {
            0
        }
    }

    /// Why a test whose streams ask for `dscps` is refused, or `None`.
    pub fn refusal(self, dscps: impl IntoIterator<Item = u8>) -> Option<String> {
        let bad = dscps.into_iter().find(|&d| !self.allows(d))?;
        let why = match self {
            DscpPolicy::Off => "this server sends no DSCP marks (serve --dscp off): use a \
                                profile without marks, such as rrul_be"
                .to_string(),
            _ => {
                let names: Vec<String> = STANDARD_DSCPS.iter().map(|&d| dscp_name(d)).collect();
                format!(
                    "this server marks what it sends only with {} (its operator may allow \
                     others with serve --dscp any)",
                    names.join(", ")
                )
            }
        };
        Some(format!(
            "a stream marked {} ({bad}) asked; {why}",
            dscp_name(bad)
        ))
    }
}

/// Who a client is, in one place for every server of unbloat's ([`unbloat_system::clients`]).
pub use unbloat_system::clients::{client_key, client_name, group_key};

/// Tests one IPv6 /56 may run at once: half the server's, or one client's own allowance when
/// that is more. One customer's networks (a /56 is a home's allocation) never take every slot
/// while there are two or more.
pub fn tests_per_group(max_tests: usize, per_client: usize) -> usize {
    per_client.max(max_tests / 2).min(max_tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_56_gets_half_the_tests_or_one_clients_allowance() {
        assert_eq!(tests_per_group(4, 1), 2);
        assert_eq!(tests_per_group(1, 1), 1);
        assert_eq!(tests_per_group(5, 4), 4);
        assert_eq!(tests_per_group(8, 8), 8);
    }

    #[test]
    fn standard_marks_pass_network_control_and_odd_values_do_not() {
        let std = DscpPolicy::Standard;
        for d in [0, 1, 8, 34, 40, 46] {
            assert!(std.allows(d), "{d}");
        }
        for d in [48, 56, 63, 7] {
            assert!(!std.allows(d), "{d}");
            assert_eq!(std.mark(d), 0);
        }
        assert_eq!(std.refusal([0, 8, 46]), None);
        let why = std.refusal([0, 48]).expect("CS6");
        assert!(why.contains("CS6") && why.contains("--dscp any"), "{why}");
        assert_eq!(DscpPolicy::Any.refusal([48, 63]), None);
        assert_eq!(DscpPolicy::Off.mark(46), 0);
        assert!(DscpPolicy::Off
            .refusal([46])
            .expect("EF")
            .contains("rrul_be"));
    }
}
