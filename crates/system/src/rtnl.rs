//! A small synchronous rtnetlink client: links (list, create an IFB, set up, delete), a device's
//! qdiscs as raw configuration, and cake's rate changed in place.
//!
//! Why not `ip` and `tc`: in User-Mode Linux every process costs 50-100 ms, and `set-rate` (which
//! autorate calls several times a second) must take a few milliseconds. The messages are the
//! kernel's own (include/uapi/linux/rtnetlink.h, if_link.h, pkt_sched.h), built and parsed with
//! the rust-netlink crates (netlink-packet-route 0.34, netlink-sys 0.9); the socket lives in
//! this process's network namespace.
//!
//! What callers can rely on: every request asks for an acknowledgement (`NLM_F_ACK`) and waits
//! for it, so `Ok` means the kernel did it; an error names the operation, the device and the
//! kernel's errno ([`RtnlError`]).

use netlink_packet_core::{
    DefaultNla, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE,
    NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::cell::Cell;

/// `TCA_CAKE_BASE_RATE64` (include/uapi/linux/pkt_sched.h, `enum { TCA_CAKE_UNSPEC,
/// TCA_CAKE_PAD, TCA_CAKE_BASE_RATE64, ... }`): cake's rate in bytes per second, a u64.
const TCA_CAKE_BASE_RATE64: u16 = 2;
/// `TC_H_ROOT` (pkt_sched.h): the parent of a root qdisc.
const TC_H_ROOT: u32 = 0xFFFF_FFFF;

/// A network device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `IFLA_INFO_KIND`: "ifb", "veth", "vlan", ...; None for a physical device.
    pub kind: Option<String>,
    /// `IFF_UP`.
    pub up: bool,
}

/// One qdisc as the kernel holds it: configuration only (no statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQdisc {
    pub handle: u32,
    pub parent: u32,
    pub kind: String,
    /// `TCA_OPTIONS` as the kernel sent it (its attributes, header included).
    pub options: Vec<u8>,
    /// `TCA_STAB`.
    pub stab: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    #[error("netlink: cannot open a route socket: {0}")]
    Open(#[source] std::io::Error),
    #[error("netlink: cannot {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("netlink: cannot {what}: {message}")]
    Protocol { what: String, message: String },
}

/// A NETLINK_ROUTE socket in this process's network namespace.
pub struct Rtnl {
    socket: Socket,
    seq: Cell<u32>,
}

impl Rtnl {
    pub fn open() -> Result<Rtnl, RtnlError> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(RtnlError::Open)?;
        socket.bind_auto().map_err(RtnlError::Open)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(RtnlError::Open)?;
        Ok(Rtnl {
            socket,
            seq: Cell::new(1),
        })
    }

    /// Sends one request and collects the replies until the acknowledgement (or, for a dump,
    /// `NLMSG_DONE`). An error reply becomes [`RtnlError::Io`] with the kernel's errno.
    fn request(
        &self,
        what: &str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, RtnlError> {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1));
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        let io = |source| RtnlError::Io {
            what: what.to_string(),
            source,
        };
        self.socket.send(&buf, 0).map_err(io)?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut out = vec![];
        loop {
            let (data, _) = self.socket.recv_from_full().map_err(io)?;
            let mut at = 0;
            while at + 16 <= data.len() {
                let len = u32::from_ne_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
                if len < 16 || at + len > data.len() {
                    break;
                }
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data[at..at + len])
                    .map_err(|e| RtnlError::Protocol {
                        what: what.to_string(),
                        message: e.to_string(),
                    })?;
                at += (len + 3) & !3;
                if reply.header.sequence_number != seq {
                    continue; // a late reply to an earlier request
                }
                match reply.payload {
                    NetlinkPayload::Error(e) => match e.code {
                        Some(code) => return Err(io(std::io::Error::from_raw_os_error(-code.get()))),
                        None if !dump => return Ok(out),
                        None => {}
                    },
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::InnerMessage(m) => out.push(m),
                    _ => {}
                }
            }
        }
    }

    pub fn links(&self) -> Result<Vec<Link>, RtnlError> {
        let replies = self.request(
            "list the network devices",
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            NLM_F_DUMP,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link_of(l)),
                _ => None,
            })
            .collect())
    }

    /// The device called `name`, if there is one.
    pub fn link(&self, name: &str) -> Result<Option<Link>, RtnlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        match self.request(
            &format!("look up {name}"),
            RouteNetlinkMessage::GetLink(msg),
            0,
        ) {
            Ok(replies) => Ok(replies.into_iter().find_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link_of(l)),
                _ => None,
            })),
            Err(RtnlError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENODEV) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `ip link add name NAME type ifb`; fails if the name is taken.
    pub fn add_ifb(&self, name: &str) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Ifb)]));
        self.request(
            &format!("create the IFB {name}"),
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )
        .map(|_| ())
    }

    /// `ip link set dev DEV up`.
    pub fn set_up(&self, index: u32) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        msg.header.flags = LinkFlags::Up;
        msg.header.change_mask = LinkFlags::Up;
        self.request(
            &format!("set device {index} up"),
            RouteNetlinkMessage::SetLink(msg),
            0,
        )
        .map(|_| ())
    }

    /// `ip link del dev DEV` (its qdiscs go with it).
    pub fn delete_link(&self, index: u32) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.request(
            &format!("delete device {index}"),
            RouteNetlinkMessage::DelLink(msg),
            0,
        )
        .map(|_| ())
    }

    /// The qdiscs of one device (root, children, ingress), configuration only.
    pub fn qdiscs(&self, index: u32) -> Result<Vec<RawQdisc>, RtnlError> {
        let replies = self.request(
            &format!("list the qdiscs of device {index}"),
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::with_index(index as i32)),
            NLM_F_DUMP,
        )?;
        let mut out = vec![];
        for m in replies {
            let RouteNetlinkMessage::NewQueueDiscipline(q) = m else {
                continue;
            };
            if q.header.index != index as i32 {
                continue;
            }
            let mut raw = RawQdisc {
                handle: u32::from(q.header.handle),
                parent: u32::from(q.header.parent),
                kind: String::new(),
                options: vec![],
                stab: vec![],
            };
            for attr in &q.attributes {
                match attr {
                    TcAttribute::Kind(k) => raw.kind = k.clone(),
                    TcAttribute::Options(o) => raw.options = emit_all(o),
                    TcAttribute::Stab(s) => raw.stab = s.clone(),
                    _ => {}
                }
            }
            out.push(raw);
        }
        Ok(out)
    }

    /// `tc qdisc change dev DEV root cake bandwidth R`: only the rate changes; cake keeps its
    /// queues and counters (net/sched/sch_cake.c `cake_change` applies the attributes present).
    pub fn change_cake_bandwidth(&self, index: u32, bytes_per_sec: u64) -> Result<(), RtnlError> {
        let mut msg = TcMessage::with_index(index as i32);
        msg.header.parent = TcHandle::from(TC_H_ROOT);
        msg.attributes.push(TcAttribute::Kind("cake".into()));
        msg.attributes.push(TcAttribute::Options(vec![TcOption::Other(DefaultNla::new(
            TCA_CAKE_BASE_RATE64,
            bytes_per_sec.to_ne_bytes().to_vec(),
        ))]));
        // No CREATE, REPLACE or EXCL: a change of the qdisc that is there (sch_api.c tc_modify_qdisc).
        self.request(
            &format!("change cake's bandwidth on device {index}"),
            RouteNetlinkMessage::NewQueueDiscipline(msg),
            0,
        )
        .map(|_| ())
    }
}

fn link_of(l: LinkMessage) -> Link {
    let mut link = Link {
        index: l.header.index,
        name: String::new(),
        kind: None,
        up: l.header.flags.contains(LinkFlags::Up),
    };
    for attr in l.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n,
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        link.kind = Some(k.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    link
}

/// The attributes as the kernel's bytes (each with its header, padded).
fn emit_all(attrs: &[TcOption]) -> Vec<u8> {
    use netlink_packet_core::Emitable;
    let mut buf = vec![0; attrs.buffer_len()];
    attrs.emit(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a network namespace of this thread's own (gone when the thread ends).
    fn in_private_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(move || {
            // SAFETY: unshare changes only this thread's namespace membership.
            let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "unshare(CLONE_NEWNET) needs root: `make test` runs as root");
            f()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn an_ifb_is_created_set_up_listed_and_deleted() {
        in_private_netns(|| {
            let rtnl = Rtnl::open().unwrap();
            assert!(rtnl.links().unwrap().iter().any(|l| l.name == "lo"));
            assert_eq!(rtnl.link("ifb4test0").unwrap(), None);
            rtnl.add_ifb("ifb4test0").unwrap();
            let err = rtnl.add_ifb("ifb4test0").unwrap_err().to_string();
            assert!(err.contains("ifb4test0") && err.contains("exists"), "{err}");
            let link = rtnl.link("ifb4test0").unwrap().unwrap();
            assert_eq!(link.kind.as_deref(), Some("ifb"));
            assert!(!link.up);
            rtnl.set_up(link.index).unwrap();
            assert!(rtnl.link("ifb4test0").unwrap().unwrap().up);
            let qdiscs = rtnl.qdiscs(link.index).unwrap();
            assert_eq!(qdiscs.len(), 1, "{qdiscs:?}");
            assert_eq!(qdiscs[0].parent, TC_H_ROOT);
            rtnl.delete_link(link.index).unwrap();
            assert_eq!(rtnl.link("ifb4test0").unwrap(), None);
            assert!(rtnl.delete_link(link.index).is_err());
        });
    }
}
