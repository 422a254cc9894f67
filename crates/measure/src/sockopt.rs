//! The few socket options the engine needs beyond std: DSCP marking and TCP_INFO.
//!
//! DSCP is the upper six bits of the IPv4 TOS byte / IPv6 traffic class (RFC 2474 §3); the
//! lower two are ECN and are left zero here. A dual-stack IPv6 socket talking to an IPv4-mapped
//! peer sends IPv4 packets, which take their TOS from `IP_TOS`, so both options are set on IPv6
//! sockets (the IPv4 one may fail on a v6-only socket; that is not an error).

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use socket2::SockRef;

/// Marks everything the socket sends with `dscp` (0..=63).
pub fn set_dscp<S: AsFd>(sock: &S, dscp: u8, ipv6: bool) -> io::Result<()> {
    let tos = u32::from(dscp & 0x3f) << 2;
    let s = SockRef::from(sock);
    if ipv6 {
        s.set_tclass_v6(tos)?;
        // Best effort: only matters for IPv4-mapped peers on a dual-stack socket.
        let _ = s.set_tos(tos);
        Ok(())
    } else {
        s.set_tos(tos)
    }
}

/// Bytes of payload the peer's TCP has acknowledged on this socket (`tcpi_bytes_acked`, Linux
/// 4.1+): what reached the receiving host, which is what an upload's goodput means.
pub fn tcp_bytes_acked<S: AsRawFd>(sock: &S) -> io::Result<u64> {
    let (info, len) = tcp_info(sock)?;
    need(len, std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked))?;
    Ok(info.tcpi_bytes_acked)
}

/// Bytes of payload this socket's TCP has received in order (`tcpi_bytes_received`, Linux
/// 4.1+), read or not: a download's goodput, exact at any moment however the reads are batched.
pub fn tcp_bytes_received<S: AsRawFd>(sock: &S) -> io::Result<u64> {
    let (info, len) = tcp_info(sock)?;
    need(
        len,
        std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received),
    )?;
    Ok(info.tcpi_bytes_received)
}

/// Wakes a blocked read only when `bytes` are waiting (`SO_RCVLOWAT`; a read still returns
/// what there is when its timeout expires). Without it a paced stream wakes its reader for every
/// packet or two, thousands of times a second, which is what a single emulated CPU cannot carry.
pub fn set_rcvlowat<S: AsRawFd>(sock: &S, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_socket_int(sock, libc::SO_RCVLOWAT, value)
}

/// `setsockopt(SOL_SOCKET, name, value)` for the options whose value is a C int.
fn set_socket_int<S: AsRawFd>(sock: &S, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn tcp_info<S: AsRawFd>(sock: &S) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it and
    // reports how many it wrote.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info, len as usize))
}

/// Fails unless the kernel filled the 8-byte field at `offset`.
fn need(len: usize, offset: usize) -> io::Result<()> {
    if len < offset + 8 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel's TCP_INFO lacks the byte counters (needs Linux 4.1)",
        ));
    }
    Ok(())
}
