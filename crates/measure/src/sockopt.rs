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
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    if (len as usize) < needed {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel's TCP_INFO has no tcpi_bytes_acked (needs Linux 4.1)",
        ));
    }
    Ok(info.tcpi_bytes_acked)
}
