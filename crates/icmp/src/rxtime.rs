//! When a datagram reached this host, rather than when a thread got round to reading it.
//!
//! A receive time read after `recv` returns also counts however long the reading thread waited
//! for a CPU. On a busy single-CPU machine (User-Mode Linux running rrul in the lab) that wait
//! reached tens of milliseconds. One such probe could set a 150-sample test's p99 on its own,
//! and the queue being measured did not cause it. So the kernel stamps each datagram as it
//! arrives (`SO_TIMESTAMPNS`, on `CLOCK_REALTIME`). [`recv`] reads the same clock when the read
//! returns and reports the difference as the wake-up lag. Callers subtract that lag from their
//! own monotonic clock, so a step of the wall clock between two datagrams does not matter.
//!
//! What callers can rely on:
//! - Without a kernel stamp (the option could not be set, or the kernel sent none) the lag is
//!   zero: the receive time is the user-space one, as it was before this module. So it is for
//!   the first datagrams after the first socket enables stamping: the kernel switches arrival
//!   stamps on from a work queue, and stamps what came before when it is read.
//! - A lag that is negative or over [`MAX_LAG`] means the wall clock stepped during the read.
//!   It is taken as zero too, never as a time in the future.

use std::io;
use std::mem::{size_of, size_of_val, zeroed};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The longest wake-up lag believed. A longer one is a wall-clock step, not a stall.
pub const MAX_LAG: Duration = Duration::from_secs(10);

/// Asks the kernel to stamp every datagram this socket receives.
pub fn enable<S: AsRawFd>(sock: &S) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: passes a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Received {
    /// Bytes written into the buffer.
    pub len: usize,
    /// The sender, when the socket family is IP.
    pub from: Option<SocketAddr>,
    /// How long the datagram waited in the socket after the kernel stamped it.
    pub lag: Duration,
}

impl Received {
    /// When the datagram arrived, as time since `epoch`: now less the lag.
    pub fn since(&self, epoch: Instant) -> Duration {
        epoch.elapsed().saturating_sub(self.lag)
    }
}

/// Reads one datagram like `recv_from`, with the wake-up lag (zero without a kernel stamp).
/// Honours the socket's read timeout, as `recv` does.
pub fn recv<S: AsRawFd>(sock: &S, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: sockaddr_storage and msghdr are plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_storage = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s keep the control buffer aligned for cmsghdr; 128 bytes hold a timespec's cmsg twice.
    let mut control = [0u64; 16];
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // size_t in glibc's msghdr, socklen_t in musl's (the static build for routers).
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: msg points at live buffers of the sizes it states, for the duration of the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let now = realtime_now();
    // SAFETY: recvmsg filled msg_control with msg_controllen bytes of cmsgs; the CMSG macros
    // walk exactly those, and the timestamp is read unaligned from its cmsg's data.
    let mut stamp = None;
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                stamp = Some(ts);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: the kernel wrote msg_namelen bytes of a socket address into addr.
    let from = unsafe { socket2::SockAddr::new(addr, msg.msg_namelen) }.as_socket();
    Ok(Received {
        len: n as usize,
        from,
        lag: stamp.map_or(Duration::ZERO, |ts| lag(now, ts)),
    })
}

/// `now - stamp`, or zero when the wall clock stepped (negative, or beyond [`MAX_LAG`]).
fn lag(now: libc::timespec, stamp: libc::timespec) -> Duration {
    let ns = |t: libc::timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
    match u64::try_from(ns(now) - ns(stamp)) {
        Ok(d) if Duration::from_nanos(d) <= MAX_LAG => Duration::from_nanos(d),
        _ => Duration::ZERO,
    }
}

fn realtime_now() -> libc::timespec {
    // SAFETY: clock_gettime writes one timespec; CLOCK_REALTIME always exists.
    let mut ts: libc::timespec = unsafe { zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn ts(sec: i64, nsec: i64) -> libc::timespec {
        libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        }
    }

    #[test]
    fn lag_is_the_difference_and_a_clock_step_is_zero() {
        assert_eq!(lag(ts(10, 5), ts(9, 999_999_990)), Duration::from_nanos(15));
        assert_eq!(lag(ts(9, 0), ts(10, 0)), Duration::ZERO, "a backward step");
        assert_eq!(lag(ts(100, 0), ts(10, 0)), Duration::ZERO, "a forward step");
        assert_eq!(lag(ts(20, 0), ts(10, 0)), MAX_LAG);
    }

    /// A datagram left unread for 80 ms reports about 80 ms of lag, and its sender.
    #[test]
    fn a_datagram_read_late_reports_how_long_it_waited() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        enable(&rx).expect("SO_TIMESTAMPNS");
        // The kernel turns arrival stamping on from a work queue (net_enable_timestamp); a
        // datagram that arrives before it runs is stamped when it is read, with no lag.
        std::thread::sleep(Duration::from_millis(100));
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.send_to(b"probe", rx.local_addr().unwrap())
            .expect("send");
        std::thread::sleep(Duration::from_millis(80));
        let mut buf = [0u8; 16];
        let got = recv(&rx, &mut buf).expect("recv");
        assert_eq!(&buf[..got.len], b"probe");
        assert_eq!(got.from, Some(tx.local_addr().unwrap()));
        assert!(
            got.lag >= Duration::from_millis(75) && got.lag < Duration::from_secs(2),
            "{:?}",
            got.lag
        );
    }

    /// Without the option there is no stamp, and the lag is zero rather than made up.
    #[test]
    fn without_the_option_the_lag_is_zero() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.send_to(b"x", rx.local_addr().unwrap()).expect("send");
        std::thread::sleep(Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let got = recv(&rx, &mut buf).expect("recv");
        assert_eq!(got.lag, Duration::ZERO);
        assert_eq!(got.len, 1);
    }
}
