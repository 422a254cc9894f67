//! Link events as the kernel announces them: a NETLINK_ROUTE socket joined to the
//! `RTNLGRP_LINK` multicast group, which receives an `RTM_NEWLINK` when a device appears or its
//! flags change (up, down, carrier) and an `RTM_DELLINK` when it goes away. The daemon re-applies
//! from these within a second of a PPPoE reconnect, a USB modem re-plug or a re-created veth.
//!
//! With the feature `networks`, route and neighbour changes come too, as [`LinkEvent::Network`]:
//! the default gateway of an interface, or its MAC, may have changed.
//!
//! Heads up! `RTNLGRP_LINK` is group 1 (include/uapi/linux/rtnetlink.h `enum rtnetlink_groups`),
//! joined here through the legacy bind mask `RTMGRP_LINK` (= 1 << (1 - 1)). The kernel sends the
//! events from net/core/rtnetlink.c (`rtmsg_ifinfo`, `rtnl_dellink`). A socket whose buffer
//! overflows loses events and gets `ENOBUFS` on its next read: that is not an error here but
//! [`LinkEvent::Lost`], after which the reader must look at every device again.

use std::io;
use std::time::Duration;

use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::{set_receive_timeout, wire, Link};

use unbloat_shaper::qdisc::netlink::RTM_DELLINK;
/// `RTMGRP_LINK` (rtnetlink.h): the bind mask of the link group.
const RTMGRP_LINK: u32 = 1;
/// With networks, the groups that say the network behind an interface may have changed:
/// `RTMGRP_NEIGH` (group 3, `RTNLGRP_NEIGH`), `RTMGRP_IPV4_ROUTE` (7), `RTMGRP_IPV6_ROUTE` (11).
#[cfg(feature = "networks")]
const GROUPS: u32 = RTMGRP_LINK | 0x4 | 0x40 | 0x400;
#[cfg(not(feature = "networks"))]
const GROUPS: u32 = RTMGRP_LINK;
/// A receive buffer large enough for a burst of a few hundred link messages (a re-plug of a
/// modem with its VLANs and a bridge), so that none are lost while the daemon applies.
const EVENT_BUFFER: usize = 1 << 20;

/// What the kernel said about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// It appeared, or its flags changed; `link.up` says whether it is up now.
    Changed(Link),
    /// It went away.
    Removed(Link),
    /// Events were lost (the socket's buffer overflowed): every device may have changed.
    Lost,
    /// A route or a neighbour entry changed: the network behind an interface may have.
    #[cfg(feature = "networks")]
    Network,
}

/// A socket that receives link events in the calling thread's network namespace.
pub struct LinkEvents {
    socket: Socket,
    buf: Vec<u8>,
}

impl LinkEvents {
    /// Joins the link group. Events that happen from here on are received, none before.
    pub fn open() -> io::Result<LinkEvents> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind(&SocketAddr::new(0, GROUPS))?;
        let _ = socket.set_rx_buf_sz(EVENT_BUFFER);
        Ok(LinkEvents {
            socket,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The events of the next datagram, waiting at most `timeout` (an empty list when none
    /// came).
    pub fn next(&mut self, timeout: Duration) -> io::Result<Vec<LinkEvent>> {
        Ok(match receive(&self.socket, &mut self.buf, timeout)? {
            Received::Datagram(n) => parse(&self.buf[..n]),
            Received::Lost => vec![LinkEvent::Lost],
            Received::Nothing => vec![],
        })
    }
}

/// What a multicast socket's next read gave.
pub(crate) enum Received {
    /// A datagram of this many bytes.
    Datagram(usize),
    /// The socket's buffer overflowed (`ENOBUFS`): events were lost.
    Lost,
    /// Nothing within the timeout, or a signal interrupted the wait.
    Nothing,
}

/// The next datagram of an event socket into `buf`, waiting at most `timeout`.
pub(crate) fn receive(socket: &Socket, buf: &mut [u8], timeout: Duration) -> io::Result<Received> {
    set_receive_timeout(socket, timeout)?;
    match socket.recv(&mut &mut buf[..], 0) {
        Ok(n) => Ok(Received::Datagram(n)),
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(Received::Lost),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(Received::Nothing)
        }
        Err(e) => Err(e),
    }
}

/// The link events of one datagram; messages that do not parse are skipped (a newer kernel's
/// attribute must not stop the daemon), other message types are ignored.
pub(super) fn parse(datagram: &[u8]) -> Vec<LinkEvent> {
    wire::messages(datagram)
        .filter_map(Result::ok)
        .filter_map(|(_, reply)| match reply {
            wire::Reply::Answer { kind, payload, .. } => match kind {
                wire::RTM_NEWLINK => wire::link(payload).ok().map(LinkEvent::Changed),
                RTM_DELLINK => wire::link(payload).ok().map(LinkEvent::Removed),
                #[cfg(feature = "networks")]
                super::gateway::RTM_NEWROUTE
                | super::gateway::RTM_DELROUTE
                | super::gateway::RTM_NEWNEIGH
                | super::gateway::RTM_DELNEIGH => Some(LinkEvent::Network),
                _ => None,
            },
            _ => None,
        })
        .collect()
}
