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
//! Matching ([`crate::sent`]): the identifier is random per pinger, the sequence numbers start at
//! random, each echo carries 64 random bits, and a timestamp request its originate time; what
//! was sent is kept here and checked against every reply, and never read back from one. Receive
//! times are the kernel's arrival stamps ([`unbloat_icmp::rxtime`]): a loop that woke late
//! does not add its lateness to the delay.
//!
//! The clock of the one-way delays is this host's wall clock read *once*, when the pinger opens,
//! and carried on by the monotonic clock: a step of the wall clock (NTP's first sync on a router
//! without a real-time clock, a user's `date -s`) would otherwise read as seconds of delay one way
//! and minus seconds the other, until the baselines crept over it ([`crate::baseline::OneWay`]
//! guards against the reflectors' clocks, which can step too). The monotonic clock is slewed by
//! NTP like the wall clock, so the two keep the same rate; the offset to the reflectors' clocks
//! that this leaves stays put, and the baselines take it out.
//!
//! With a device ([`Pinger::open_on`]) the sockets are bound to it (`SO_BINDTODEVICE`): the
//! probes leave by the WAN whose rate they set, whatever the routing table's default, and only
//! replies that came in by it are read. The binding follows the name: when the device is made
//! again (a PPPoE reconnect), the next probe binds the sockets to the new one. The device must
//! exist when the pinger opens (the kernel binds to its index): while it does not,
//! [`Pinger::open_on`] fails with [`OpenError::NoDevice`], which a caller that waits for its
//! interface (the daemon) tries again.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, Socket, Type};
use unbloat_icmp::checksum;
use unbloat_icmp::rxtime;

// The vocabulary lives in `probe`, which the pure modules share; callers find it here too.
pub use crate::probe::{Delay, Method, Probe};
use crate::sent::{Out, Reply, Sent};

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
const TIMESTAMP_REQUEST: u8 = 13;
const TIMESTAMP_REPLY: u8 = 14;
const ECHO6_REQUEST: u8 = 128;
const ECHO6_REPLY: u8 = 129;
/// Milliseconds in a day: RFC 792's times wrap at midnight.
const DAY_MS: i64 = 86_400_000;

/// Why a pinger did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No raw socket: not root, nor CAP_NET_RAW (ping sockets cannot send timestamps).
    #[error("cannot open a raw ICMP socket ({0}): autorate needs root or CAP_NET_RAW")]
    Socket(io::Error),
    /// The device to bind to does not exist (`SO_BINDTODEVICE`: ENODEV); it may yet appear (a
    /// PPPoE link or a USB modem that comes up later).
    #[error("{0} does not exist (yet)")]
    NoDevice(String),
    /// The device exists and the socket could not be bound to it, or set up.
    #[error("cannot bind the probes' socket to {dev}: {source}")]
    Bind { dev: String, source: io::Error },
    #[error("cannot set up the probes' socket: {0}")]
    Setup(io::Error),
    #[error("no random numbers: {0}")]
    Random(getrandom::Error),
}

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
    /// The device the sockets are bound to, by name: bound again when it is made again.
    device: Option<String>,
    epoch: Instant,
    /// The wall clock at `epoch`, in milliseconds since midnight UT: the one-way delays' clock
    /// is this plus the monotonic time since (see the module's note).
    epoch_ut: f64,
    /// The probes out and the cookies to come. `send` and `recv` take `&self` (one thread uses
    /// a pinger; the lock is never contended).
    state: Mutex<State>,
}

struct State {
    out: Out,
    cookies: Vec<u64>,
}

impl State {
    /// A fresh random cookie: one `getrandom` call per 32 (a system call costs tens of µs in
    /// User-Mode Linux, and a router's probes go on for months).
    fn cookie(&mut self) -> io::Result<u64> {
        if self.cookies.is_empty() {
            let mut b = [0u8; 8 * 32];
            getrandom::getrandom(&mut b).map_err(io::Error::other)?;
            self.cookies = b
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                .collect();
        }
        Ok(self.cookies.pop().unwrap_or_default())
    }
}

impl Pinger {
    /// Raw ICMP sockets for the families `reflectors` use (root, or CAP_NET_RAW: ping sockets
    /// cannot send timestamps), not bound to a device: the probes go where the routing table
    /// sends them. A controller of one WAN wants [`Pinger::open_on`].
    pub fn open(reflectors: &[IpAddr]) -> Result<Pinger, OpenError> {
        Pinger::open_on(reflectors, None)
    }

    /// [`Pinger::open`], with the sockets bound to `device` when given (`SO_BINDTODEVICE`): on
    /// a router with two WANs, each controller measures its own.
    pub fn open_on(reflectors: &[IpAddr], device: Option<&str>) -> Result<Pinger, OpenError> {
        let open = |domain, proto| -> Result<Socket, OpenError> {
            let s = Socket::new(domain, Type::RAW, Some(proto)).map_err(OpenError::Socket)?;
            if let Some(dev) = device {
                s.bind_device(Some(dev.as_bytes())).map_err(|e| {
                    if e.raw_os_error() == Some(libc::ENODEV) {
                        OpenError::NoDevice(dev.to_string())
                    } else {
                        OpenError::Bind {
                            dev: dev.to_string(),
                            source: e,
                        }
                    }
                })?;
            }
            s.set_nonblocking(true).map_err(OpenError::Setup)?;
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
        let mut r = [0u8; 4];
        getrandom::getrandom(&mut r).map_err(OpenError::Random)?;
        Ok(Pinger {
            v4,
            v6,
            ident: u16::from_ne_bytes([r[0], r[1]]),
            device: device.map(String::from),
            epoch: Instant::now(),
            epoch_ut: ut_ms(SystemTime::now()),
            state: Mutex::new(State {
                out: Out::new(u16::from_ne_bytes([r[2], r[3]])),
                cookies: Vec::new(),
            }),
        })
    }

    /// The identifier of this pinger's probes (random): what a forger must guess first.
    pub fn ident(&self) -> u16 {
        self.ident
    }

    /// Replies with this pinger's identifier that answered no probe of its own (forged,
    /// duplicated, or later than [`crate::sent::LATE_LIMIT`]), dropped.
    pub fn unmatched(&self) -> u64 {
        self.state().out.unmatched()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Poisoned only by a panic while it was held; each entry goes in or out whole, so the
        // table is still sound and probing goes on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The one-way delays' clock at `since` the epoch: ms since midnight UT, never stepping.
    fn ut_at(&self, since: Duration) -> f64 {
        (self.epoch_ut + since.as_secs_f64() * 1e3).rem_euclid(DAY_MS as f64)
    }

    /// Sends a probe to `to`; its sequence number, for the answer's.
    pub fn send(&self, to: IpAddr, method: Method) -> io::Result<u16> {
        let at = self.epoch.elapsed();
        let ut = self.ut_at(at);
        let mut state = self.state();
        let (sock, cookie) = match to {
            IpAddr::V4(_) if method == Method::Timestamp => (&self.v4, ut as u64),
            IpAddr::V4(_) => (&self.v4, state.cookie()?),
            IpAddr::V6(_) => (&self.v6, state.cookie()?),
        };
        let sock = sock
            .as_ref()
            .ok_or_else(|| io::Error::other("no socket for this family"))?;
        // IPv6 reflectors get echo, whatever was asked (ICMPv6 has no timestamp).
        let method = if to.is_ipv6() { Method::Echo } else { method };
        let seq = state.out.add(Sent {
            to,
            method,
            cookie,
            at,
            ut_ms: ut,
        });
        let pkt = match (to, method) {
            (IpAddr::V4(_), Method::Timestamp) => timestamp_request(self.ident, seq, cookie as u32),
            (IpAddr::V4(_), _) => echo_request(ECHO_REQUEST, self.ident, seq, cookie, true),
            (IpAddr::V6(_), _) => echo_request(ECHO6_REQUEST, self.ident, seq, cookie, false),
        };
        let dest = SocketAddr::new(to, 0).into();
        match (sock.send_to(&pkt, &dest), &self.device) {
            // The kernel binds to the device's index, which dies with it: a PPPoE reconnect
            // makes a new device of the same name, and every probe would fail from then on.
            (Err(e), Some(dev)) if e.raw_os_error() == Some(libc::ENODEV) => {
                sock.bind_device(Some(dev.as_bytes()))?;
                sock.send_to(&pkt, &dest).map(|_| seq)
            }
            (sent, _) => sent.map(|_| seq),
        }
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

    /// Reads one datagram: an answer of ours, or None (a stranger's ICMP, a reply that matches
    /// no probe of ours, or nothing after all).
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
        let mut state = self.state();
        let got = answer(
            icmp,
            self.ident,
            from,
            &mut state.out,
            arrived,
            self.ut_at(arrived),
        );
        Ok(got.map(|(seq, delay)| Answer { from, seq, delay }))
    }
}

/// One datagram's `icmp` from `from`, arrived at `arrived` (`now_ut` on the UT clock): the
/// sequence and measure of the probe of ours it answers, taken out of `out`; None for anything
/// else (counted by `out` when it bore our identifier).
fn answer(
    icmp: &[u8],
    ident: u16,
    from: IpAddr,
    out: &mut Out,
    arrived: Duration,
    now_ut: f64,
) -> Option<(u16, Delay)> {
    let (reply, times) = parse_reply(icmp, ident)?;
    let sent = out.take(from, reply)?;
    Some((reply.seq(), measure(&sent, times, arrived, now_ut)?))
}

/// Milliseconds since midnight UT, with the fraction: RFC 792's clock.
fn ut_ms(t: SystemTime) -> f64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() % 86_400) as f64 * 1e3 + f64::from(d.subsec_nanos()) / 1e6
}

fn echo_request(kind: u8, ident: u16, seq: u16, cookie: u64, v4: bool) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[0] = kind;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..16].copy_from_slice(&cookie.to_be_bytes());
    if v4 {
        // The kernel fills the ICMPv6 checksum itself (it needs the pseudo-header).
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

fn timestamp_request(ident: u16, seq: u16, originate_ms: u32) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = TIMESTAMP_REQUEST;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&originate_ms.to_be_bytes());
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

/// A timestamp reply's receive and transmit times: the reflector's, the only times a reply is
/// believed about.
type Times = Option<(u32, u32)>;

/// A reply with our identifier: what it claims to answer (matched against what was sent by
/// [`crate::sent::Out::take`]), and a timestamp's times. None for anything else. Public for the
/// fuzz targets (fuzz/).
#[doc(hidden)]
pub fn parse_reply(icmp: &[u8], ident: u16) -> Option<(Reply, Times)> {
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
            let cookie = u64::from_be_bytes(icmp.get(8..16)?.try_into().ok()?);
            Some((Reply::Echo { seq, cookie }, None))
        }
        TIMESTAMP_REPLY => {
            let (originate, recv, xmit) = (word(8)?, word(12)?, word(16)?);
            Some((Reply::Timestamp { seq, originate }, Some((recv, xmit))))
        }
        _ => None,
    }
}

/// What a matched answer measured: the round trip on our monotonic clock (`arrived` less the
/// send time kept in `sent`), and with a timestamp's `times` the one-way delays on our never-
/// stepping UT clock (`now_ut`, the same moment as `arrived`).
fn measure(sent: &Sent, times: Times, arrived: Duration, now_ut: f64) -> Option<Delay> {
    let rtt = arrived.checked_sub(sent.at)?.as_secs_f64() * 1e3;
    let Some((recv, xmit)) = times else {
        return Some(Delay::Rtt(rtt));
    };
    if [recv, xmit].iter().any(|t| t & 0x8000_0000 != 0) {
        return None;
    }
    let up = wrap(f64::from(recv) - sent.ut_ms);
    let down = wrap(now_ut - f64::from(xmit));
    Some(Delay::OneWay { down, up, rtt })
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn sent(method: Method, cookie: u64, at: Duration, ut_ms: f64) -> Sent {
        Sent {
            to: R,
            method,
            cookie,
            at,
            ut_ms,
        }
    }

    #[test]
    fn a_timestamp_reply_gives_both_one_way_delays_across_midnight() {
        let mut out = Out::new(42);
        let s = sent(Method::Timestamp, 86_399_990, MS(1_000), 86_399_990.25);
        let seq = out.add(s);
        let mut reply = timestamp_request(7, seq, 86_399_990);
        reply[0] = TIMESTAMP_REPLY;
        // Received 30 ms after it left (past midnight), sent back 1 ms later.
        reply[12..16].copy_from_slice(&20u32.to_be_bytes());
        reply[16..20].copy_from_slice(&21u32.to_be_bytes());
        // Not ours: another identifier; or a nonstandard time.
        assert_eq!(answer(&reply, 8, R, &mut out, MS(1_046), 36.5), None);
        let mut odd = reply.clone();
        odd[16..20].copy_from_slice(&0x8000_0001u32.to_be_bytes());
        let mut o2 = out.clone();
        assert_eq!(answer(&odd, 7, R, &mut o2, MS(1_046), 36.5), None);
        let got = answer(&reply, 7, R, &mut out, MS(1_046), 36.5);
        assert_eq!(
            got,
            Some((
                42,
                Delay::OneWay {
                    down: 15.5,
                    up: 29.75,
                    rtt: 46.0
                }
            ))
        );
    }

    #[test]
    fn an_echo_reply_gives_the_round_trip_from_the_time_kept_here() {
        let mut out = Out::new(3);
        let seq = out.add(sent(Method::Echo, 99, MS(1), 0.0));
        // A request (our own, seen on a raw socket) is not an answer.
        let req = echo_request(ECHO_REQUEST, 7, seq, 99, true);
        assert_eq!(answer(&req, 7, R, &mut out, MS(21), 0.0), None);
        let mut reply = req.clone();
        reply[0] = ECHO_REPLY;
        assert_eq!(
            answer(&reply, 7, R, &mut out, MS(21), 0.0),
            Some((3, Delay::Rtt(20.0)))
        );
    }

    /// Issue 36 item 6: an echo reply forged with our identifier and sequence must not become a
    /// round trip: its payload (once the send time, read back as the run's age, which cut to the
    /// minimum) is checked against the cookie sent, and a timestamp's originate field against
    /// the time sent. Each is dropped and counted.
    #[test]
    fn a_forged_echo_reply_with_send_time_zero_is_no_sample() {
        let mut out = Out::new(3);
        let seq = out.add(sent(Method::Echo, 0x5eed, MS(599_990), 0.0));
        let mut forged = echo_request(ECHO_REQUEST, 7, seq, 0, true);
        forged[0] = ECHO_REPLY;
        let got = answer(&forged, 7, R, &mut out, MS(600_000), 0.0);
        assert_eq!(got, None, "a forged reply was taken as a sample");
        let ts = out.add(sent(Method::Timestamp, 1_000, MS(599_990), 1_000.0));
        let mut forged = timestamp_request(7, ts, 0);
        forged[0] = TIMESTAMP_REPLY;
        assert_eq!(answer(&forged, 7, R, &mut out, MS(600_000), 0.0), None);
        assert_eq!(out.unmatched(), 2);
        // The genuine ones still count.
        forged[8..12].copy_from_slice(&1_000u32.to_be_bytes());
        assert!(answer(&forged, 7, R, &mut out, MS(600_000), 1_010.0).is_some());
    }

    #[test]
    fn requests_carry_a_valid_checksum() {
        for p in [
            timestamp_request(1, 2, 3),
            echo_request(ECHO_REQUEST, 1, 2, 3, true),
        ] {
            assert_eq!(checksum(&p), 0, "{p:?}");
        }
    }
}
