//! A small synchronous rtnetlink client: devices (list, find by name, create an IFB, set up,
//! delete), a device's qdiscs as the kernel holds them, and cake's rate changed in place.
//!
//! Why not `ip` and `tc`: under User-Mode Linux every process costs 50-100 ms, so `start` could
//! not be ten times faster than sqm-scripts, and `set-rate` (an autorate loop calls it many times
//! a second) must take at most 5 ms. One request here is a `sendmsg` and a few `recvmsg` on a
//! socket opened once. Measured in UML 6.1 on a busy 2-core host (tests/rtnl.rs
//! `time_of_a_cake_bandwidth_change`): a cake rate change 0.1-0.4 ms with its handle, 0.3-0.9 ms
//! reading the root first; `tc qdisc change` 60-160 ms.
//!
//! Heads up! The messages are the kernel's own: include/uapi/linux/rtnetlink.h (`RTM_*`,
//! `struct tcmsg`, `TCA_*`), if_link.h (`IFLA_*`), netlink.h (acks, extended acks), pkt_sched.h
//! (`TC_H_*`, `TCA_CAKE_*`); requests are built with netlink-packet-route 0.34 and sent with
//! netlink-sys 0.9; replies are read by [`wire`]. The kernel side: net/core/rtnetlink.c (links),
//! net/sched/sch_api.c (`tc_modify_qdisc`, `qdisc_change`, `tc_dump_qdisc`), net/sched/sch_cake.c
//! (`cake_change`), net/netlink/af_netlink.c (`netlink_ack`, dumps).
//!
//! What callers can rely on:
//! - The socket belongs to the network namespace of the thread that called [`Rtnl::open`], and
//!   stays there. An [`Rtnl`] is `Send` but not `Sync`: one request at a time.
//! - Every request carries `NLM_F_ACK` and its answer is read to the end (the ack, or a dump's
//!   `NLMSG_DONE`) before the call returns, so `Ok` means the kernel did it. Replies are matched
//!   by sequence number; leftovers of an earlier, failed request are skipped.
//! - A refusal is [`RtnlError::Kernel`]: which operation on which device, the errno with its
//!   text, and the kernel's own explanation when it gives one (extended ack), e.g.
//!   `netlink: cannot create ifb4eth0: File exists (os error 17)`. No answer within
//!   [`REPLY_TIMEOUT`] is an error too, never a hang.
//! - Cake's rate is changed only on the cake that is the root: nothing is ever created or
//!   replaced, which a plain `tc qdisc change ... root cake` can do on today's kernels (see
//!   [`Rtnl::change_cake_bandwidth_with_handle`]).
//! - A dump the kernel marks as interrupted by a concurrent change (`NLM_F_DUMP_INTR`) is read
//!   again, up to [`DUMP_ATTEMPTS`] times.

pub mod events;
#[doc(hidden)]
pub mod fuzz;
#[cfg(feature = "networks")]
pub mod gateway;
mod tc_dump;
mod wire;

pub use tc_dump::{TcObjects, INGRESS_FILTERS};

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::time::Duration;

use netlink_packet_core::{
    DefaultNla, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP,
    NLM_F_ECHO, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use wire::Reply;

// The kernel's numbers, defined once in the shaper crate (re-exported: callers of `Rtnl` name
// a qdisc's parent with them).
use unbloat_shaper::qdisc::cake::attr::BASE_RATE64 as TCA_CAKE_BASE_RATE64;
pub use unbloat_shaper::qdisc::netlink::{TC_H_INGRESS, TC_H_ROOT};

/// How long to wait for the kernel's next reply datagram. The kernel always answers a request
/// that asks for an ack; this only turns a stuck socket into an error instead of a hang.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times a dump interrupted by a concurrent change is read before giving up.
pub const DUMP_ATTEMPTS: u32 = 3;
/// The receive buffer to start with: the kernel fills dump datagrams up to 32 KiB
/// (af_netlink.c `netlink_dump`, `max_recvmsg_len`).
const RECV_START: usize = 32 * 1024;
/// The largest single datagram accepted (one device with many VFs can exceed 32 KiB).
const RECV_MAX: usize = 1024 * 1024;

/// A network device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `IFLA_INFO_KIND`: "ifb", "veth", "vlan", ...; None for a device without one (a physical
    /// NIC, lo).
    pub kind: Option<String>,
    /// `IFF_UP`: administratively up.
    pub up: bool,
}

/// The bytes a device received and sent since it was created (`IFLA_STATS64`; `ip -s link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkBytes {
    pub rx: u64,
    pub tx: u64,
}

impl Link {
    /// An IFB device: the only kind of device unbloat ever deletes.
    pub fn is_ifb(&self) -> bool {
        self.kind.as_deref() == Some("ifb")
    }
}

/// One qdisc as the kernel holds it, comparable with `==` to prove "unchanged".
///
/// Configuration only: no statistics attribute is kept. The bytes are the kernel's, unaltered,
/// so one counter that the kernel puts inside an option does remain: HTB's `direct_pkts` in
/// `TCA_HTB_INIT` ([`crate::snapshot`] takes it out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQdisc {
    pub handle: u32,
    pub parent: u32,
    pub kind: String,
    /// The value of `TCA_OPTIONS` (for most kinds, nested attributes), empty when absent.
    pub options: Vec<u8>,
    /// The value of `TCA_STAB` (a nested `TCA_STAB_BASE`; the kernel does not dump the table
    /// itself), empty when the qdisc has no size table.
    pub stab: Vec<u8>,
}

/// What failed, on which device, and why.
#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    /// The kernel refused: `errno` and, when it said more, its extended ack `message`.
    #[error("netlink: cannot {what}: {}{}", io::Error::from_raw_os_error(*.errno), said(.message))]
    Kernel {
        what: String,
        errno: i32,
        message: Option<String>,
    },
    /// The socket failed (open, send, receive, no answer in time).
    #[error("netlink: cannot {what}: {error}")]
    Io { what: String, error: io::Error },
    /// The kernel's answer could not be read.
    #[error("netlink: cannot {what}: the kernel's answer does not parse: {detail}")]
    Malformed { what: String, detail: String },
    /// [`Rtnl::change_cake_bandwidth`] found another root qdisc and changed nothing.
    #[error("netlink: cannot {what}: the root qdisc is {kind} {:x}:, not cake; nothing was changed", .handle >> 16)]
    NotCake {
        what: String,
        kind: String,
        handle: u32,
    },
    /// Every dump attempt was interrupted by a concurrent change.
    #[error("netlink: cannot {what}: the list kept changing while it was read ({DUMP_ATTEMPTS} attempts)")]
    Unstable { what: String },
}

fn said(message: &Option<String>) -> String {
    message
        .as_ref()
        .map(|m| format!("; the kernel says: {m}"))
        .unwrap_or_default()
}

impl RtnlError {
    /// The errno, when the kernel refused or a socket call failed with one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RtnlError::Kernel { errno, .. } => Some(*errno),
            RtnlError::Io { error, .. } => error.raw_os_error(),
            _ => None,
        }
    }
}

/// A NETLINK_ROUTE socket in this thread's network namespace.
pub struct Rtnl {
    socket: Socket,
    /// The sequence number of the next request.
    seq: Cell<u32>,
    /// Reused for every reply datagram.
    buf: RefCell<Vec<u8>>,
}

impl fmt::Debug for Rtnl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rtnl")
            .field("seq", &self.seq.get())
            .finish()
    }
}

/// The operations, for error messages. A device named by index is shown by name when it exists.
#[derive(Clone, Copy)]
enum Op<'a> {
    ListLinks,
    FindLink(&'a str),
    FindIndex(u32),
    CreateIfb(&'a str),
    SetUp(u32),
    Delete(u32),
    ListQdiscs(u32),
    ChangeCake(u32, u64),
    /// A dump of qdiscs, classes or filters with their statistics (see [`tc_dump`]).
    DumpTc(TcObjects, u32),
    /// A dump of something else: "the routes".
    #[cfg(feature = "networks")]
    Read(&'static str),
}

/// How a request failed, before it is told which operation it was.
enum Failure {
    Kernel { errno: i32, message: Option<String> },
    Io(io::Error),
    Malformed(String),
    Unstable,
    NotCake { kind: String, handle: u32 },
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Io(e)
    }
}

/// Takes one answer message (its type and payload) of an exchange; an `Err` is a reply that
/// does not parse.
type OnAnswer<'a> = dyn FnMut(u16, &[u8]) -> Result<(), String> + 'a;

/// What a finished exchange said besides its answers.
struct Finished {
    /// `NLM_F_DUMP_INTR` was on some part of a dump.
    interrupted: bool,
}

impl Rtnl {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> Result<Rtnl, RtnlError> {
        let io = |error| RtnlError::Io {
            what: "open a NETLINK_ROUTE socket".into(),
            error,
        };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io)?;
        socket.bind_auto().map_err(io)?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(io)?;
        // Extended acks (Linux 4.12) put the kernel's reason in the error; capped acks (4.2)
        // leave out the echoed request. Older kernels refuse the options: plain errnos then.
        let _ = socket.set_ext_ack(true);
        let _ = socket.set_cap_ack(true);
        set_receive_timeout(&socket, REPLY_TIMEOUT).map_err(io)?;
        Ok(Rtnl {
            socket,
            seq: Cell::new(1),
            buf: RefCell::new(vec![0; RECV_START]),
        })
    }

    /// Every device (`ip link show`): an `RTM_GETLINK` dump.
    pub fn links(&self) -> Result<Vec<Link>, RtnlError> {
        let op = Op::ListLinks;
        self.dump(
            op,
            || RouteNetlinkMessage::GetLink(LinkMessage::default()),
            |kind, payload, out| {
                if kind == wire::RTM_NEWLINK {
                    out.push(wire::link(payload)?);
                }
                Ok(())
            },
        )
    }

    /// The device called `name`, or None when there is none.
    pub fn link(&self, name: &str) -> Result<Option<Link>, RtnlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        self.find_link(Op::FindLink(name), msg)
    }

    /// The byte counters of the device called `name` (None when there is none): one
    /// `RTM_GETLINK`, what `unbloat autorate` reads several times a second for the achieved rates.
    pub fn link_bytes(&self, name: &str) -> Result<Option<LinkBytes>, RtnlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        self.find_link_with(Op::FindLink(name), msg, wire::link_bytes)
            .map(Option::flatten)
    }

    /// `ip link add name NAME type ifb`. Fails if the name is taken (`EEXIST`), never replaces.
    pub fn add_ifb(&self, name: &str) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Ifb)]));
        let request = RouteNetlinkMessage::NewLink(msg);
        self.act(Op::CreateIfb(name), request, NLM_F_CREATE | NLM_F_EXCL)
    }

    /// `ip link set dev DEV up`: sets `IFF_UP` and nothing else.
    pub fn set_up(&self, index: u32) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        msg.header.flags = LinkFlags::Up;
        msg.header.change_mask = LinkFlags::Up;
        self.act(Op::SetUp(index), RouteNetlinkMessage::SetLink(msg), 0)
    }

    /// `ip link del dev DEV`; its qdiscs go with it.
    pub fn delete_link(&self, index: u32) -> Result<(), RtnlError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.act(Op::Delete(index), RouteNetlinkMessage::DelLink(msg), 0)
    }

    /// The visible qdiscs of one device (root, its children, ingress/clsact), in the kernel's
    /// order. A device that exists but was never up has none (its `noop` is built in and not
    /// dumped); a missing device is an error (`ENODEV`).
    pub fn qdiscs(&self, index: u32) -> Result<Vec<RawQdisc>, RtnlError> {
        let op = Op::ListQdiscs(index);
        // tc_dump_qdisc ignores tcm_ifindex and dumps every device: the filter is ours.
        let request =
            || RouteNetlinkMessage::GetQueueDiscipline(TcMessage::with_index(index as i32));
        let qdiscs = self.dump(op, request, |kind, payload, out| {
            if kind == wire::RTM_NEWQDISC {
                let (ifindex, q) = wire::qdisc(payload)?;
                if ifindex as u32 == index {
                    out.push(q);
                }
            }
            Ok(())
        })?;
        // Nothing listed: make sure the device exists, else the caller would read "no qdiscs"
        // for a device that is gone.
        if qdiscs.is_empty() && self.link_at(index)?.is_none() {
            let gone = Failure::Kernel {
                errno: libc::ENODEV,
                message: None,
            };
            return Err(self.fail(op, gone));
        }
        Ok(qdiscs)
    }

    /// `tc qdisc change dev DEV root handle H: cake bandwidth R`, with `R` in bytes per second, for
    /// the cake that is the device's root now: reads the root (one `RTM_GETQDISC`), refuses
    /// ([`RtnlError::NotCake`]) unless it is a cake, then
    /// [`change_cake_bandwidth_with_handle`](Rtnl::change_cake_bandwidth_with_handle) with its
    /// handle. Two round trips; nothing is ever created or replaced.
    pub fn change_cake_bandwidth(&self, index: u32, bytes_per_sec: u64) -> Result<(), RtnlError> {
        let op = Op::ChangeCake(index, bytes_per_sec);
        let root = self.root_qdisc(index).map_err(|f| self.fail(op, f))?;
        if root.kind != "cake" {
            let failure = Failure::NotCake {
                kind: root.kind,
                handle: root.handle,
            };
            return Err(self.fail(op, failure));
        }
        self.change_cake_bandwidth_with_handle(index, root.handle, bytes_per_sec)
    }

    /// Changes the rate of the root cake whose handle is `handle`: an `RTM_NEWQDISC` without
    /// `NLM_F_CREATE`, `NLM_F_REPLACE` or `NLM_F_EXCL`, parent `TC_H_ROOT`, that handle,
    /// `TCA_KIND` "cake" and `TCA_OPTIONS` holding only `TCA_CAKE_BASE_RATE64`. One round trip.
    ///
    /// The handle is what keeps this a change. Since "net/sched: fix a qdisc modification with
    /// ambiguous command request" (August 2023, backported to the stable kernels: the 6.1 UML
    /// kernel here has it), a change with handle 0 whose kind differs from the root's creates a
    /// new qdisc and grafts it (sch_api.c `tc_modify_qdisc`, `req_change` -> `create_n_graft2`):
    /// plain `tc qdisc change dev X root cake ...` turns an HTB root into a default cake. With the
    /// handle the kernel refuses instead, and leaves the device as it was:
    /// - the root has another handle (replaced since it was read): `EEXIST` ("NLM_F_REPLACE
    ///   needed to override");
    /// - the root has this handle but is not cake: `EINVAL` ("Invalid qdisc name");
    /// - there is no such qdisc (only the device's default): `ENOENT`.
    ///
    /// Only the rate changes: `cake_change` (sch_cake.c) applies the attributes present, under
    /// the tree lock, and keeps the flows, queues and counters. Like `tc qdisc change` without
    /// `stab`, the request carries no `TCA_STAB`, so the kernel drops a size table the root had
    /// (sch_api.c `qdisc_change`); unbloat never gives cake one (cake counts its own overhead).
    pub fn change_cake_bandwidth_with_handle(
        &self,
        index: u32,
        handle: u32,
        bytes_per_sec: u64,
    ) -> Result<(), RtnlError> {
        let request = cake_bandwidth(index, handle, bytes_per_sec);
        self.act(Op::ChangeCake(index, bytes_per_sec), request, 0)
    }

    /// The device's root qdisc (`RTM_GETQDISC` for parent `TC_H_ROOT`, sch_api.c
    /// `tc_get_qdisc`): the default one (handle 0) when nobody set one. `NLM_F_ECHO`, because
    /// the kernel answers through `qdisc_notify`, which sends the qdisc back to the requester
    /// only when asked to echo (rtnetlink.c `rtnetlink_send`).
    fn root_qdisc(&self, index: u32) -> Result<RawQdisc, Failure> {
        let mut msg = TcMessage::with_index(index as i32);
        msg.header.parent = TcHandle::from(TC_H_ROOT);
        let mut root = None;
        let request = RouteNetlinkMessage::GetQueueDiscipline(msg);
        self.exchange(request, NLM_F_ECHO, &mut |kind, payload| {
            if kind == wire::RTM_NEWQDISC {
                root = Some(wire::qdisc(payload)?.1);
            }
            Ok(())
        })?;
        root.ok_or_else(|| Failure::Malformed("the kernel acknowledged without the qdisc".into()))
    }

    /// A request that answers with an ack only.
    fn act(&self, op: Op, request: RouteNetlinkMessage, flags: u16) -> Result<(), RtnlError> {
        self.exchange(request, flags, &mut |_, _| Ok(()))
            .map(|_| ())
            .map_err(|f| self.fail(op, f))
    }

    /// The name of the device with this index, or None when there is none.
    pub fn link_name(&self, index: u32) -> Result<Option<String>, RtnlError> {
        Ok(self.link_at(index)?.map(|l| l.name))
    }

    /// The device with this index, or None when there is none.
    fn link_at(&self, index: u32) -> Result<Option<Link>, RtnlError> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.find_link(Op::FindIndex(index), msg)
    }

    /// `RTM_GETLINK` for one device (by the name or the index in `msg`).
    fn find_link(&self, op: Op, msg: LinkMessage) -> Result<Option<Link>, RtnlError> {
        self.find_link_with(op, msg, wire::link)
    }

    /// One `RTM_GETLINK` and what `parse` reads from its answer; None when there is no such
    /// device.
    fn find_link_with<T>(
        &self,
        op: Op,
        msg: LinkMessage,
        parse: fn(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, RtnlError> {
        let mut found = None;
        let result = self.exchange(
            RouteNetlinkMessage::GetLink(msg),
            0,
            &mut |kind, payload| {
                if kind == wire::RTM_NEWLINK {
                    found = Some(parse(payload)?);
                }
                Ok(())
            },
        );
        match result {
            Ok(_) => Ok(found),
            Err(Failure::Kernel {
                errno: libc::ENODEV,
                ..
            }) => Ok(None),
            Err(f) => Err(self.fail(op, f)),
        }
    }

    /// A dump, read again while the kernel says a concurrent change interrupted it.
    fn dump<T>(
        &self,
        op: Op,
        request: impl Fn() -> RouteNetlinkMessage,
        each: impl Fn(u16, &[u8], &mut Vec<T>) -> Result<(), String>,
    ) -> Result<Vec<T>, RtnlError> {
        for _ in 0..DUMP_ATTEMPTS {
            let mut out = Vec::new();
            let finished = self
                .exchange(request(), NLM_F_DUMP, &mut |kind, payload| {
                    each(kind, payload, &mut out)
                })
                .map_err(|f| self.fail(op, f))?;
            if !finished.interrupted {
                return Ok(out);
            }
        }
        Err(self.fail(op, Failure::Unstable))
    }

    /// Sends `request` and hands each answer message (type, payload) to `each`, until the ack
    /// (or, for a dump, `NLMSG_DONE`). A refusal ends it with the kernel's errno.
    fn exchange(
        &self,
        request: RouteNetlinkMessage,
        flags: u16,
        each: &mut OnAnswer,
    ) -> Result<Finished, Failure> {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1));
        let bytes = request_bytes(request, flags, seq);
        retry_eintr(|| self.socket.send(&bytes, 0))?;

        let mut finished = Finished { interrupted: false };
        let mut buf = self.buf.borrow_mut();
        loop {
            let len = self.receive(&mut buf)?;
            for message in wire::messages(&buf[..len]) {
                let (reply_seq, reply) = message.map_err(Failure::Malformed)?;
                if reply_seq != seq {
                    continue; // the rest of an earlier request that failed half-way
                }
                match reply {
                    Reply::Answer {
                        kind,
                        interrupted,
                        payload,
                    } => {
                        finished.interrupted |= interrupted;
                        each(kind, payload).map_err(Failure::Malformed)?;
                    }
                    // A dump ends with NLMSG_DONE (a kernel that also acks a dump sends the ack
                    // after it: skipped by the next request as a leftover).
                    Reply::Ack if flags & NLM_F_DUMP != NLM_F_DUMP => return Ok(finished),
                    Reply::Done => return Ok(finished),
                    Reply::Refused { errno, message } => {
                        return Err(Failure::Kernel { errno, message })
                    }
                    Reply::Ack | Reply::Noop => {}
                }
            }
        }
    }

    /// Reads one datagram into `buf`, growing it (up to [`RECV_MAX`]) when the datagram is
    /// bigger; returns its length.
    fn receive(&self, buf: &mut Vec<u8>) -> Result<usize, Failure> {
        // MSG_PEEK | MSG_TRUNC gives the datagram's real length without consuming it.
        let len = retry_eintr(|| {
            self.socket
                .recv(&mut &mut buf[..], libc::MSG_PEEK | libc::MSG_TRUNC)
        })
        .map_err(timeout_in_words)?;
        if len > buf.len() {
            if len > RECV_MAX {
                let _ = self.socket.recv(&mut &mut buf[..], 0); // drop it
                return Err(Failure::Malformed(format!(
                    "a reply of {len} bytes, over the {RECV_MAX}-byte limit"
                )));
            }
            buf.resize(len, 0);
        }
        retry_eintr(|| self.socket.recv(&mut &mut buf[..], 0)).map_err(timeout_in_words)
    }

    /// The error for `op`, naming a device given by index by its name when it still exists.
    fn fail(&self, op: Op, failure: Failure) -> RtnlError {
        let what = self.describe(op);
        match failure {
            Failure::Kernel { errno, message } => RtnlError::Kernel {
                what,
                errno,
                message,
            },
            Failure::Io(error) => RtnlError::Io { what, error },
            Failure::Malformed(detail) => RtnlError::Malformed { what, detail },
            Failure::Unstable => RtnlError::Unstable { what },
            Failure::NotCake { kind, handle } => RtnlError::NotCake { what, kind, handle },
        }
    }

    fn describe(&self, op: Op) -> String {
        // Best effort, only on the way to an error: the index alone still says which device.
        let device = |index: u32| match self.link_at(index) {
            Ok(Some(link)) => format!("{} (index {index})", link.name),
            _ => format!("device index {index}"),
        };
        match op {
            Op::ListLinks => "list the network devices".into(),
            Op::FindLink(name) => format!("look up device {name}"),
            Op::FindIndex(index) => format!("look up device index {index}"),
            Op::CreateIfb(name) => format!("create {name}"),
            Op::SetUp(index) => format!("set {} up", device(index)),
            Op::Delete(index) => format!("delete {}", device(index)),
            Op::ListQdiscs(index) => format!("list the qdiscs of {}", device(index)),
            Op::DumpTc(what, index) => format!("read the {what} of {}", device(index)),
            #[cfg(feature = "networks")]
            Op::Read(what) => format!("read {what}"),
            Op::ChangeCake(index, rate) => format!(
                "change cake's bandwidth on {} to {rate} bytes/s",
                device(index)
            ),
        }
    }
}

/// The `RTM_NEWQDISC` of `tc qdisc change dev DEV root handle H cake bandwidth R` (R in
/// bytes/s).
fn cake_bandwidth(index: u32, handle: u32, bytes_per_sec: u64) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(index as i32);
    msg.header.parent = TcHandle::from(TC_H_ROOT);
    msg.header.handle = TcHandle::from(handle);
    msg.attributes.push(TcAttribute::Kind("cake".into()));
    let rate = DefaultNla::new(TCA_CAKE_BASE_RATE64, bytes_per_sec.to_ne_bytes().to_vec());
    msg.attributes
        .push(TcAttribute::Options(vec![TcOption::Other(rate)]));
    RouteNetlinkMessage::NewQueueDiscipline(msg)
}

/// A request's bytes: the netlink header (`NLM_F_REQUEST | NLM_F_ACK | flags`, `seq`) and the
/// message (rtnetlink's here, nl80211's in [`crate::wifi`]).
pub(crate) fn request_bytes<T: netlink_packet_core::NetlinkSerializable + std::fmt::Debug>(
    request: T,
    flags: u16,
    seq: u32,
) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    header.sequence_number = seq;
    let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request));
    packet.finalize();
    let mut bytes = vec![0; packet.buffer_len()];
    packet.serialize(&mut bytes);
    bytes
}

fn retry_eintr<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `SO_RCVTIMEO` expiring shows as EAGAIN: say what it means.
fn timeout_in_words(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::WouldBlock {
        Failure::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no answer from the kernel within {} s",
                REPLY_TIMEOUT.as_secs()
            ),
        ))
    } else {
        Failure::Io(e)
    }
}

pub(crate) fn set_receive_timeout(socket: &Socket, timeout: Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // The fields' own types (`as _`): the libc crate deprecates naming time_t and suseconds_t
    // on musl (the static build), whose widths it has yet to change.
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as _,
        tv_usec: timeout.subsec_micros() as _,
    };
    // SAFETY: a valid socket descriptor and a timeval that outlives the call, with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_operation_the_errno_and_the_kernels_reason() {
        let err = RtnlError::Kernel {
            what: "create ifb4eth0".into(),
            errno: libc::EEXIST,
            message: None,
        };
        assert_eq!(
            err.to_string(),
            "netlink: cannot create ifb4eth0: File exists (os error 17)"
        );
        assert_eq!(err.errno(), Some(libc::EEXIST));
        let err = RtnlError::Kernel {
            what: "change cake's bandwidth on eth0 (index 2) to 2500000 bytes/s".into(),
            errno: libc::EINVAL,
            message: Some("Invalid qdisc name".into()),
        };
        assert_eq!(
            err.to_string(),
            "netlink: cannot change cake's bandwidth on eth0 (index 2) to 2500000 bytes/s: \
             Invalid argument (os error 22); the kernel says: Invalid qdisc name"
        );
    }

    #[test]
    fn an_rtnl_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Rtnl>();
    }

    #[test]
    fn a_root_that_is_not_cake_is_named_with_its_handle() {
        let err = RtnlError::NotCake {
            what: "change cake's bandwidth on eth0 (index 2) to 2500000 bytes/s".into(),
            kind: "htb".into(),
            handle: 0x1_0000,
        };
        assert_eq!(
            err.to_string(),
            "netlink: cannot change cake's bandwidth on eth0 (index 2) to 2500000 bytes/s: the \
             root qdisc is htb 1:, not cake; nothing was changed"
        );
        assert_eq!(err.errno(), None);
    }

    #[test]
    fn the_request_is_the_one_tc_sends_for_a_cake_bandwidth_change() {
        // What `tc qdisc change dev <3> root handle 8001: cake bandwidth 20mbit` sends:
        // TCA_KIND "cake", TCA_OPTIONS { TCA_CAKE_BASE_RATE64 = 2 500 000 }.
        let bytes = request_bytes(cake_bandwidth(3, 0x8001_0000, 2_500_000), 0, 7);
        let mut expected = vec![];
        expected.extend(64u32.to_ne_bytes()); // nlmsg_len: header 16, tcmsg 20, kind 12, options 16
        expected.extend(36u16.to_ne_bytes()); // RTM_NEWQDISC
        expected.extend((NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        expected.extend(7u32.to_ne_bytes()); // seq
        expected.extend(0u32.to_ne_bytes()); // port: the kernel fills it in
        expected.extend([0; 4]); // family, padding
        expected.extend(3i32.to_ne_bytes());
        expected.extend(0x8001_0000u32.to_ne_bytes()); // handle
        expected.extend(TC_H_ROOT.to_ne_bytes());
        expected.extend(0u32.to_ne_bytes()); // info
        expected.extend([9, 0, 1, 0]);
        expected.extend(b"cake\0\0\0\0");
        expected.extend([16, 0, 2, 0, 12, 0, 2, 0]);
        expected.extend(2_500_000u64.to_ne_bytes());
        assert_eq!(bytes, expected);
    }
}
