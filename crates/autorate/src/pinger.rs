//! The probes: ICMP echo (a round trip) or ICMP timestamp (one-way delays), to many reflectors
//! through one raw socket per address family, with no process per probe.
//!
//! Heads up! RFC 792 (pages 14-16): a timestamp request (type 13) carries the sender's
//! *originate* time; the reply (type 14) adds the reflector's *receive* and *transmit* times, each
//! in milliseconds since midnight UT. So `receive - originate` is the way up and `now - transmit`
//! the way down, each plus or minus the offset between the two clocks, which stays put and which
//! each reflector's baseline absorbs ([`crate::baseline`]). A time with its high bit set is not
//! UT (RFC 792: "nonstandard"), and such an answer is dropped. ICMPv6 has no timestamp (RFC
//! 4443): an IPv6 reflector is probed with echo. Linux answers timestamps itself
//! (net/ipv4/icmp.c `icmp_timestamp`), as do most routers; many public anycast resolvers do not.
//!
//! Matching: the identifier is this process's; the 16-bit sequence is the probe's (the caller
//! numbers them modulo 2^16, and a probe is out for a second at most). An echo carries its send
//! time in its payload, so nothing is kept per probe here. Receive times are the kernel's arrival
//! stamps ([`unbloat_measure::rxtime`]): a loop that woke late does not add its lateness to the
//! delay.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, Socket, Type};
use unbloat_measure::icmp::checksum;
use unbloat_measure::rxtime;

// The vocabulary lives in `probe`, which the pure modules share; callers find it here too.
pub use crate::probe::{Delay, Method, Probe};

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
const TIMESTAMP_REQUEST: u8 = 13;
const TIMESTAMP_REPLY: u8 = 14;
const ECHO6_REQUEST: u8 = 128;
const ECHO6_REPLY: u8 = 129;
/// Milliseconds in a day: RFC 792's times wrap at midnight.
const DAY_MS: i64 = 86_400_000;

/// One answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    pub from: IpAddr,
    pub seq: u16,
    pub delay: Delay,
}

pub struct Pinger {
    v4: Option<Socket>,
    v6: Option<Socket>,
    ident: u16,
    epoch: Instant,
}

impl Pinger {
    /// Raw ICMP sockets for the families `reflectors` use (root, or CAP_NET_RAW: ping sockets
    /// cannot send timestamps).
    pub fn open(reflectors: &[IpAddr]) -> Result<Pinger, String> {
        let open = |domain, proto| -> Result<Socket, String> {
            let s = Socket::new(domain, Type::RAW, Some(proto)).map_err(|e| {
                format!("cannot open a raw ICMP socket ({e}): autorate needs root or CAP_NET_RAW")
            })?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            // Without kernel stamps the receive times are user space's (rxtime says how).
            let _ = rxtime::enable(&s);
            Ok(s)
        };
        let v4 = reflectors
            .iter()
            .any(IpAddr::is_ipv4)
            .then(|| open(Domain::IPV4, Protocol::ICMPV4))
            .transpose()?;
        let v6 = reflectors
            .iter()
            .any(IpAddr::is_ipv6)
            .then(|| open(Domain::IPV6, Protocol::ICMPV6))
            .transpose()?;
        Ok(Pinger {
            v4,
            v6,
            ident: (std::process::id() as u16) ^ 0xa5a5,
            epoch: Instant::now(),
        })
    }

    /// Sends probe `seq` to `to`.
    pub fn send(&self, to: IpAddr, seq: u16, method: Method) -> io::Result<()> {
        let since = self.epoch.elapsed().as_nanos() as u64;
        let (sock, pkt) = match to {
            IpAddr::V4(_) if method == Method::Timestamp => (
                &self.v4,
                timestamp_request(self.ident, seq, ut_ms(SystemTime::now())),
            ),
            IpAddr::V4(_) => (
                &self.v4,
                echo_request(ECHO_REQUEST, self.ident, seq, since, true),
            ),
            IpAddr::V6(_) => (
                &self.v6,
                echo_request(ECHO6_REQUEST, self.ident, seq, since, false),
            ),
        };
        let sock = sock
            .as_ref()
            .ok_or_else(|| io::Error::other("no socket for this family"))?;
        sock.send_to(&pkt, &SocketAddr::new(to, 0).into())
            .map(|_| ())
    }

    /// The next answer, waiting at most `timeout`; None when none came (or a signal came).
    /// One `poll`, then one read from each socket it found readable: no read is made just to
    /// learn that nothing is there (in User-Mode Linux each system call costs tens of µs).
    pub fn recv(&self, timeout: Duration) -> io::Result<Option<Answer>> {
        let socks: Vec<&Socket> = [&self.v4, &self.v6].into_iter().flatten().collect();
        let mut fds: Vec<libc::pollfd> = socks
            .iter()
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: fds is a live array of the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            // A signal: let the caller look at its stop flag.
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        for (s, fd) in socks.iter().zip(&fds) {
            if fd.revents & libc::POLLIN != 0 {
                if let Some(a) = self.read(s)? {
                    return Ok(Some(a));
                }
            }
        }
        Ok(None)
    }

    /// Reads one datagram: an answer of ours, or None (a stranger's ICMP, or nothing after all).
    fn read(&self, sock: &Socket) -> io::Result<Option<Answer>> {
        let mut buf = [0u8; 1500];
        let got = match rxtime::recv(sock, &mut buf) {
            Ok(g) => g,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(from) = got.from.map(|a| a.ip()) else {
            return Ok(None);
        };
        let arrived = self.epoch.elapsed().saturating_sub(got.lag);
        let data = &buf[..got.len];
        let icmp = if from.is_ipv4() {
            // Raw IPv4 sockets deliver the IP header first.
            let ihl = usize::from(*data.first().unwrap_or(&0) & 0x0f) * 4;
            data.get(ihl..).unwrap_or(&[])
        } else {
            data
        };
        // The wall clock only for timestamps: a system call less per echo.
        let now_ut = || ut_ms(SystemTime::now() - got.lag);
        Ok(
            parse_reply(icmp, self.ident, arrived, now_ut).map(|(seq, delay)| Answer {
                from,
                seq,
                delay,
            }),
        )
    }
}

/// Milliseconds since midnight UT, with the fraction: RFC 792's clock.
fn ut_ms(t: SystemTime) -> f64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() % 86_400) as f64 * 1e3 + f64::from(d.subsec_nanos()) / 1e6
}

fn echo_request(kind: u8, ident: u16, seq: u16, sent_ns: u64, v4: bool) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[0] = kind;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..16].copy_from_slice(&sent_ns.to_be_bytes());
    if v4 {
        // The kernel fills the ICMPv6 checksum itself (it needs the pseudo-header).
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

fn timestamp_request(ident: u16, seq: u16, originate_ms: f64) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = TIMESTAMP_REQUEST;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&(originate_ms as u32).to_be_bytes());
    let sum = checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// `b - a` in milliseconds across midnight: the difference nearest to zero.
fn wrap(d: f64) -> f64 {
    let day = DAY_MS as f64;
    let r = d.rem_euclid(day);
    if r > day / 2.0 {
        r - day
    } else {
        r
    }
}

/// One of our answers: its sequence and what it measured. `arrived` is when it came on the
/// pinger's monotonic clock, `now_ut` the same moment on the wall clock (ms since midnight UT).
fn parse_reply(
    icmp: &[u8],
    ident: u16,
    arrived: Duration,
    now_ut: impl Fn() -> f64,
) -> Option<(u16, Delay)> {
    if icmp.len() < 8 || u16::from_be_bytes([icmp[4], icmp[5]]) != ident {
        return None;
    }
    let seq = u16::from_be_bytes([icmp[6], icmp[7]]);
    let word = |i: usize| {
        icmp.get(i..i + 4)
            .map(|b| u32::from_be_bytes(b.try_into().unwrap_or([0; 4])))
    };
    match icmp[0] {
        ECHO_REPLY | ECHO6_REPLY => {
            let sent = u64::from_be_bytes(icmp.get(8..16)?.try_into().ok()?);
            let rtt = arrived.checked_sub(Duration::from_nanos(sent))?;
            Some((seq, Delay::Rtt(rtt.as_secs_f64() * 1e3)))
        }
        TIMESTAMP_REPLY => {
            let (orig, recv, xmit) = (word(8)?, word(12)?, word(16)?);
            if [orig, recv, xmit].iter().any(|t| t & 0x8000_0000 != 0) {
                return None;
            }
            let up = wrap(f64::from(recv) - f64::from(orig));
            let down = wrap(now_ut() - f64::from(xmit));
            Some((seq, Delay::OneWay { down, up }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_reply_gives_both_one_way_delays_across_midnight() {
        let mut reply = timestamp_request(7, 42, 86_399_990.0);
        reply[0] = TIMESTAMP_REPLY;
        // Received 30 ms after it left (past midnight), sent back 1 ms later.
        reply[12..16].copy_from_slice(&20u32.to_be_bytes());
        reply[16..20].copy_from_slice(&21u32.to_be_bytes());
        let got = parse_reply(&reply, 7, Duration::ZERO, || 36.5);
        assert_eq!(
            got,
            Some((
                42,
                Delay::OneWay {
                    down: 15.5,
                    up: 30.0
                }
            ))
        );
        // Not ours, or a nonstandard time: dropped.
        assert_eq!(parse_reply(&reply, 8, Duration::ZERO, || 36.5), None);
        reply[16..20].copy_from_slice(&0x8000_0001u32.to_be_bytes());
        assert_eq!(parse_reply(&reply, 7, Duration::ZERO, || 36.5), None);
    }

    #[test]
    fn an_echo_reply_gives_the_round_trip_from_its_own_payload() {
        let mut reply = echo_request(ECHO_REQUEST, 7, 3, 1_000_000, true);
        reply[0] = ECHO_REPLY;
        let got = parse_reply(&reply, 7, Duration::from_millis(21), || 0.0);
        assert_eq!(got, Some((3, Delay::Rtt(20.0))));
        // A request (our own, seen on a raw socket) is not an answer.
        let req = echo_request(ECHO_REQUEST, 7, 3, 0, true);
        assert_eq!(
            parse_reply(&req, 7, Duration::from_millis(21), || 0.0),
            None
        );
    }

    #[test]
    fn requests_carry_a_valid_checksum() {
        for p in [
            timestamp_request(1, 2, 3.0),
            echo_request(ECHO_REQUEST, 1, 2, 3, true),
        ] {
            assert_eq!(checksum(&p), 0, "{p:?}");
        }
    }
}
