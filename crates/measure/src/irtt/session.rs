//! One irtt session over a connected UDP socket: the open handshake, the echo requests and
//! replies that carry latency probes, and the close (conn.go `open`, `close`; sconn.go).
//!
//! What callers can rely on:
//! - [`Session::open`] returns within its timeout, with a session the server granted and this
//!   client can use, or with a [`MeasureError`] that says what went wrong in words a user can act
//!   on: nothing answered (port, and the likely causes: a firewall, not an irtt server, an HMAC
//!   key), nothing listens there, the server answered something that is not irtt, or it refused
//!   a parameter (which one, and what it allows).
//! - What the server granted and what it means for the results is in [`Session::remarks`].
//! - [`Session::reply`] accepts only this session's echo replies; anything else is ignored.
//! - [`Session::close`] sends the close request once, however often it is called.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::packet::{self, Layout, PacketError, Reply, MAX_ECHO_LEN};
use super::params::{Clock, Params, ReceivedStats, StampAt};
use crate::MeasureError;

/// version.go: `var ProtocolVersion = 1` (0.9.0 to 0.9.2).
pub const PROTOCOL_VERSION: u32 = 1;
/// The slowest probing this client accepts from a server (irtt's own client refuses a server
/// that lowers the interval below 1 s, defaults.go `minRestrictedInterval`; the other way
/// round, fewer than one probe a second cannot show a queue filling).
pub const MAX_GRANTED_INTERVAL: Duration = Duration::from_secs(1);
/// sconn.go drops requests that come faster than the server's minimum interval, beyond a
/// burst of this many (defaults.go `DefaultPacketBurst = 5`).
pub const SERVER_PACKET_BURST: u32 = 5;
/// conn.go resends the open request after 1, 2, 4 and 8 s; this client starts sooner, as an
/// open lost on a loaded link should not cost a second, but no sooner than irtt's
/// `minOpenTimeout` (200 ms).
const FIRST_RESEND: Duration = Duration::from_millis(250);
const MAX_RESEND: Duration = Duration::from_secs(2);

/// What one session asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    /// How long the probes run (the whole test); the server is asked for a margin more.
    pub session: Duration,
    pub interval: Duration,
    /// The DSCP codepoint (0..=63) the probes carry and the replies should carry.
    pub dscp: u8,
}

impl Ask {
    /// The parameters sent: both stamps on both clocks and both received stats, as irtt's
    /// client asks by default, so the packets are the size irtt's own (60 bytes of UDP).
    pub fn params(&self) -> Params {
        // The server counts its limit from the first request; replies still come in during the
        // prober's grace after the last probe.
        let margin = (self.session / 10).max(Duration::from_secs(10));
        Params {
            protocol_version: Some(PROTOCOL_VERSION),
            duration: Some(self.session.saturating_add(margin)),
            interval: Some(self.interval),
            length: None,
            received_stats: ReceivedStats::Both,
            stamp_at: StampAt::Both,
            clock: Some(Clock::Both),
            dscp: (self.dscp & 0x3f) << 2,
            server_fill: String::new(),
        }
    }
}

/// A probe's answer: which probe, and the server's receive and send stamps (ns, server clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    pub seq: u32,
    pub server: Option<(u64, u64)>,
}

/// An open session.
#[derive(Debug)]
pub struct Session {
    pub server: SocketAddr,
    pub token: u64,
    pub asked: Params,
    pub granted: Params,
    /// The interval to probe at: what was asked, or the server's minimum if that is longer.
    pub interval: Duration,
    layout: Layout,
    closed_by_server: AtomicBool,
    close_sent: AtomicBool,
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_secs_f64() * 1000.0)
}

/// Whether a server's grant is usable: the interval to probe at, or why not.
pub fn check_grant(ask: &Ask, granted: &Params) -> Result<Duration, String> {
    if granted.protocol_version != Some(PROTOCOL_VERSION) {
        return Err(format!(
            "it speaks irtt protocol version {}, unbloat speaks version {PROTOCOL_VERSION}",
            granted
                .protocol_version
                .map_or("(none)".into(), |v| v.to_string())
        ));
    }
    if let Some(d) = granted.duration.filter(|&d| d < ask.session) {
        return Err(format!(
            "it allows sessions of at most {:.0} s (irtt server -d), and the test runs {:.0} s; \
             shorten the test or use another server",
            d.as_secs_f64(),
            ask.session.as_secs_f64().ceil()
        ));
    }
    let interval = granted.interval.unwrap_or(ask.interval);
    if interval > ask.interval && interval > MAX_GRANTED_INTERVAL {
        return Err(format!(
            "it allows a probe only every {} (irtt server -i), and unbloat needs at least one a \
             second",
            ms(interval)
        ));
    }
    if interval < ask.interval && interval < MAX_GRANTED_INTERVAL {
        // client.go checkParameters: "server tried to reduce interval to < 1s".
        return Err(format!(
            "it tried to lower the probe interval from {} to {}",
            ms(ask.interval),
            ms(interval)
        ));
    }
    Ok(interval)
}

impl Session {
    /// Opens a session on `sock` (connected to `server`): sends the open request, resends it
    /// with growing gaps, and takes the first open reply within `timeout`.
    pub fn open(
        sock: &UdpSocket,
        server: SocketAddr,
        ask: &Ask,
        timeout: Duration,
    ) -> Result<Session, MeasureError> {
        let asked = ask.params();
        let request = packet::open_request(&asked);
        let old_timeout = sock.read_timeout().ok().flatten();
        let reply = open_handshake(sock, server, &request, timeout);
        let _ = sock.set_read_timeout(old_timeout);
        let reply = reply?;
        let granted = reply.params;
        let refused = |why: String| MeasureError::far_end(irtt_at(server), why);
        if reply.closed {
            return Err(refused(match check_grant(ask, &granted) {
                Err(why) => format!("the server closed the session at once: {why}"),
                Ok(_) => "the server closed the session as soon as it opened it".into(),
            }));
        }
        let interval = check_grant(ask, &granted).map_err(refused)?;
        Ok(Session {
            server,
            token: reply.token,
            layout: Layout::of(&granted),
            asked,
            granted,
            interval,
            closed_by_server: AtomicBool::new(false),
            close_sent: AtomicBool::new(false),
        })
    }

    /// Echo request `seq` into `buf`; returns its length.
    pub fn request(&self, seq: u32, buf: &mut [u8; MAX_ECHO_LEN]) -> usize {
        packet::echo_request(self.token, seq, &self.layout, buf)
    }

    /// Reads a datagram from the server: this session's echo reply, or `None`. A late answer
    /// to a resent open request opened a second session on the server: it is closed at once.
    pub fn reply(&self, data: &[u8], sock: &UdpSocket) -> Option<Echo> {
        match packet::parse_reply(data, &self.layout) {
            Ok(Reply::Echo(e)) if e.token == self.token => {
                if e.closed {
                    // sconn.go: "closing connection due to duration limit exceeded" (but the
                    // reply still counts).
                    self.closed_by_server.store(true, Ordering::Relaxed);
                }
                Some(Echo {
                    seq: e.seq,
                    server: e.stamps.receive_send_ns(),
                })
            }
            Ok(Reply::Open(o)) if o.token != self.token && o.token != 0 && !o.closed => {
                let _ = sock.send(&packet::close_request(o.token));
                None
            }
            _ => None,
        }
    }

    /// Whether the server ended the session before it was closed (its duration limit).
    pub fn closed_by_server(&self) -> bool {
        self.closed_by_server.load(Ordering::Relaxed)
    }

    /// A note when the server ended the session before the test did, for class `name`.
    pub fn early_end(&self, name: &str) -> Option<String> {
        self.closed_by_server().then(|| {
            format!(
                "{name}: the irtt server ended its session before the test did (its -d limit); \
                 later probes went unanswered"
            )
        })
    }

    /// Sends the close request (once; the server does not answer it).
    pub fn close(&self, sock: &UdpSocket) {
        if !self.close_sent.swap(true, Ordering::Relaxed) {
            let _ = sock.send(&packet::close_request(self.token));
        }
    }

    /// What the server granted, for the results' notes.
    pub fn remarks(&self) -> Vec<String> {
        let mut out = vec![format!(
            "probes every {}{}",
            ms(self.interval),
            if self.interval > self.asked.interval.unwrap_or_default() {
                format!(
                    " (the server's minimum, irtt server -i; asked {})",
                    ms(self.asked.interval.unwrap_or_default())
                )
            } else {
                String::new()
            }
        )];
        let (asked, granted) = (self.asked.dscp, self.granted.dscp);
        out.push(match (asked, granted) {
            (0, _) => "DSCP 0 (nothing to allow)".into(),
            (a, g) if a == g => format!("DSCP {} allowed (replies marked alike)", a >> 2),
            (_, 0) => "DSCP not allowed: replies come back unmarked (irtt server \
                       --no-dscp, or it cannot set it)"
                .into(),
            (_, g) => format!("DSCP granted as TOS {g:#04x} instead"),
        });
        out.push(match self.granted.stamp_at {
            StampAt::Both => format!(
                "server stamps receive and send ({} clock): its holding time is left out",
                self.granted.clock.map_or("no", Clock::name)
            ),
            StampAt::Midpoint => "server stamps only the midpoint (irtt server \
                                  --allow-stamp=single): round trips include its holding time"
                .into(),
            other => format!(
                "server stamps {} (irtt server --allow-stamp): round trips include its holding \
                 time, no one-way delays",
                other.name()
            ),
        });
        out
    }
}

/// The results' notes on an irtt far end: what each class's session granted, and the interval
/// every class ran at when a server raised it from `asked`.
pub fn notes(
    server: SocketAddr,
    classes: &[(&str, &Session)],
    asked: Duration,
    interval: Duration,
) -> Vec<String> {
    let classes: Vec<String> = classes
        .iter()
        .map(|(name, s)| format!("{name}: {}", s.remarks().join(", ")))
        .collect();
    let mut notes = vec![format!(
        "UDP far end: irtt server {server} (irtt protocol {PROTOCOL_VERSION}); {}",
        classes.join("; ")
    )];
    if interval > asked {
        notes.push(format!(
            "every probe class ran at {}, not {}: the slowest interval the irtt server granted",
            ms(interval),
            ms(asked)
        ));
    }
    notes
}

fn irtt_at(server: SocketAddr) -> String {
    format!("irtt server {server}")
}

fn is_unreachable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable
    ) || matches!(
        e.raw_os_error(),
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH)
    )
}

/// Sends the open request until an open reply comes or `timeout` passes.
fn open_handshake(
    sock: &UdpSocket,
    server: SocketAddr,
    request: &[u8],
    timeout: Duration,
) -> Result<packet::OpenReply, MeasureError> {
    let port = server.port();
    let io_error = |e: std::io::Error| {
        if e.kind() == ErrorKind::ConnectionRefused {
            MeasureError::far_end(
                irtt_at(server),
                format!(
                    "nothing listens on UDP port {port} (the host answered \"port \
                     unreachable\"); is `irtt server` running there?"
                ),
            )
        } else if is_unreachable(&e) {
            MeasureError::Unreachable {
                addr: server,
                source: e,
            }
        } else {
            MeasureError::io(format!("irtt open request to {server}"), e)
        }
    };
    let start = Instant::now();
    let deadline = start + timeout;
    let mut next_send = start;
    let mut gap = FIRST_RESEND;
    let mut buf = [0u8; 2048];
    // The open reply's layout does not depend on the session's parameters.
    let layout = Layout::of(&Params::default());
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(MeasureError::far_end(
                irtt_at(server),
                format!(
                    "nothing answered irtt's open request on UDP port {port} within {:.1} s: a \
                     firewall drops it, nothing there speaks irtt, or the server wants an HMAC \
                     key (irtt server --hmac), which unbloat does not support",
                    timeout.as_secs_f64()
                ),
            ));
        }
        if now >= next_send {
            sock.send(request).map_err(io_error)?;
            next_send = now + gap;
            gap = (gap * 2).min(MAX_RESEND);
        }
        let wait = next_send
            .min(deadline)
            .saturating_duration_since(Instant::now());
        sock.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(|e| MeasureError::io("irtt socket", e))?;
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(e)),
        };
        match packet::parse_reply(&buf[..n], &layout) {
            Ok(Reply::Open(reply)) => return Ok(reply),
            // Not ours to read: an echo reply can only be stale here.
            Ok(Reply::Echo(_)) => continue,
            Err(e @ PacketError::Hmac) => {
                return Err(MeasureError::far_end(irtt_at(server), e.to_string()))
            }
            Err(e) => {
                return Err(MeasureError::far_end(
                    irtt_at(server),
                    format!(
                        "it answered irtt's open request on UDP port {port} with something that \
                         is not irtt ({n} bytes: {e})"
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> Ask {
        Ask {
            session: Duration::from_secs(30),
            interval: Duration::from_millis(10),
            dscp: 46,
        }
    }

    #[test]
    fn asks_for_more_than_the_test_and_marks_the_tos_byte() {
        let p = ask().params();
        assert_eq!(p.duration, Some(Duration::from_secs(40)));
        assert_eq!(p.dscp, 0xb8, "EF is TOS 0xb8, as irtt's --dscp takes it");
        assert_eq!(p.stamp_at, StampAt::Both);
    }

    #[test]
    fn a_grant_is_checked_parameter_by_parameter() {
        let a = ask();
        let ok = a.params();
        assert_eq!(check_grant(&a, &ok), Ok(Duration::from_millis(10)));
        // A server with -i 50ms raises the interval: probes go every 50 ms.
        let slower = Params {
            interval: Some(Duration::from_millis(50)),
            ..ok.clone()
        };
        assert_eq!(check_grant(&a, &slower), Ok(Duration::from_millis(50)));
        let too_slow = Params {
            interval: Some(Duration::from_secs(2)),
            ..ok.clone()
        };
        let why = check_grant(&a, &too_slow).expect_err("refused");
        assert!(why.contains("2000 ms (irtt server -i)"), "{why}");
        // A server with -d 20s cannot hold a 30 s test.
        let short = Params {
            duration: Some(Duration::from_secs(20)),
            ..ok.clone()
        };
        let why = check_grant(&a, &short).expect_err("refused");
        assert!(why.contains("at most 20 s (irtt server -d)"), "{why}");
        // Lowered, but still longer than the test: fine.
        let lowered = Params {
            duration: Some(Duration::from_secs(31)),
            ..ok.clone()
        };
        assert!(check_grant(&a, &lowered).is_ok());
        let v2 = Params {
            protocol_version: Some(2),
            ..ok
        };
        assert!(check_grant(&a, &v2)
            .expect_err("refused")
            .contains("version 2"));
    }
}
