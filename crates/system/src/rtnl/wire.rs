//! The bytes of rtnetlink replies: framing, acknowledgements, and the two answers we read
//! (`RTM_NEWLINK`, `RTM_NEWQDISC`). Pure functions over byte slices, no socket.
//!
//! Heads up! Layouts and numbers from the kernel's uapi headers: include/uapi/linux/netlink.h
//! (`struct nlmsghdr`, `struct nlmsgerr`, `enum nlmsgerr_attrs`), rtnetlink.h (`struct tcmsg`,
//! `enum TCA_*`), if_link.h (`IFLA_*`); the acknowledgement's shape from net/netlink/af_netlink.c
//! (`netlink_ack`, `netlink_dump_done`). Replies are read as views over the kernel's bytes rather
//! than parsed into netlink-packet-route's typed messages: a snapshot must keep `TCA_OPTIONS`
//! byte for byte, and one attribute the crate cannot decode (a newer kernel's) must not make a
//! whole dump fail.

use netlink_packet_core::{
    ErrorBuffer, NetlinkBuffer, NlaBuffer, NlasIterator, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP,
    NLMSG_OVERRUN, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP_INTR,
};
use netlink_packet_route::link::LinkHeader;
use netlink_packet_route::tc::TcHeader;

use super::{Link, RawQdisc};

// `RTM_NEWLINK` and `RTM_NEWQDISC`: the message types of the kernel's answers to
// `RTM_GETLINK` and `RTM_GETQDISC`; `TCA_KIND`, `TCA_OPTIONS`, `TCA_STAB`.
pub(super) use unbloat_shaper::qdisc::netlink::{RTM_NEWLINK, RTM_NEWQDISC};
use unbloat_shaper::qdisc::netlink::{TCA_KIND, TCA_OPTIONS, TCA_STAB};

/// `NLMSG_HDRLEN`: `struct nlmsghdr` (netlink.h), 16 bytes.
const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct ifinfomsg)` and `sizeof(struct tcmsg)` (rtnetlink.h), both already multiples
/// of 4: the attributes start right after them.
const IFINFOMSG_LEN: usize = 16;
const TCMSG_LEN: usize = 20;

/// `IFLA_IFNAME`, `IFLA_LINKINFO` (if_link.h `enum { IFLA_UNSPEC, IFLA_ADDRESS, ... }`) and,
/// nested in the latter, `IFLA_INFO_KIND` (`enum { IFLA_INFO_UNSPEC, IFLA_INFO_KIND, ... }`).
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
/// `IFLA_STATS64`: `struct rtnl_link_stats64` (if_link.h), whose first four u64s are rx_packets,
/// tx_packets, rx_bytes, tx_bytes.
const IFLA_STATS64: u16 = 23;
const IFLA_INFO_KIND: u16 = 1;

/// `NLMSGERR_ATTR_MSG` (netlink.h `enum nlmsgerr_attrs`): the extended ack's text, e.g.
/// "Invalid qdisc name".
const NLMSGERR_ATTR_MSG: u16 = 1;

/// `IFF_UP` (include/uapi/linux/if.h).
const IFF_UP: u32 = 1;

/// One netlink message of a reply datagram, as far as a request-and-answer client cares.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply<'a> {
    /// Part of the answer: its type (`RTM_NEWLINK`, ...) and payload. `interrupted` is
    /// `NLM_F_DUMP_INTR`: the list changed while the kernel was dumping it.
    Answer {
        kind: u16,
        interrupted: bool,
        payload: &'a [u8],
    },
    /// `NLMSG_ERROR` with error 0: the request was carried out.
    Ack,
    /// `NLMSG_DONE`: the end of a dump, carried out.
    Done,
    /// `NLMSG_ERROR` (or a `NLMSG_DONE` that ends a dump early) with a negative errno; `message`
    /// is the kernel's extended ack text when it gave one.
    Refused { errno: i32, message: Option<String> },
    /// `NLMSG_NOOP`: nothing.
    Noop,
}

/// A netlink message of one datagram: its sequence number and what it says.
pub(super) type Message<'a> = (u32, Reply<'a>);

/// The messages of one datagram, in order. Stops at the first malformed one.
pub(super) fn messages(datagram: &[u8]) -> Messages<'_> {
    Messages { rest: datagram }
}

pub(super) struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let parsed = message(self.rest);
        match &parsed {
            Ok((len, _)) => self.rest = &self.rest[align4(*len).min(self.rest.len())..],
            Err(_) => self.rest = &[],
        }
        Some(parsed.map(|(_, m)| m))
    }
}

/// The errno of an error `code` the kernel sends negated. i32::MIN has no negation (and is no
/// errno): an error, where negating it would panic (or wrap to a negative errno).
fn errno_of(code: i32, what: &str) -> Result<i32, String> {
    code.checked_neg()
        .ok_or_else(|| format!("{what}: the error code {code} is no errno"))
}

/// The first message of `bytes` and its length (`nlmsg_len`).
fn message(bytes: &[u8]) -> Result<(usize, Message<'_>), String> {
    let buf = NetlinkBuffer::new_checked(bytes).map_err(|e| e.to_string())?;
    let (len, flags, seq) = (buf.length() as usize, buf.flags(), buf.sequence_number());
    let payload = buf.payload();
    let reply = match buf.message_type() {
        NLMSG_ERROR => {
            let code = ErrorBuffer::new_checked(payload)
                .map_err(|e| format!("NLMSG_ERROR: {e}"))?
                .code();
            match code {
                None => Reply::Ack,
                Some(code) => Reply::Refused {
                    errno: errno_of(code.get(), "NLMSG_ERROR")?,
                    message: ack_message(flags, error_tlvs(flags, payload)),
                },
            }
        }
        NLMSG_DONE => {
            // The kernel may send an empty NLMSG_DONE; otherwise it starts with an int, the
            // dump's error (netlink_dump_done).
            let errno = payload
                .get(..4)
                .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            if errno < 0 {
                Reply::Refused {
                    errno: errno_of(errno, "NLMSG_DONE")?,
                    message: ack_message(flags, payload.get(4..).unwrap_or(&[])),
                }
            } else {
                Reply::Done
            }
        }
        NLMSG_NOOP => Reply::Noop,
        NLMSG_OVERRUN => return Err("NLMSG_OVERRUN: the kernel lost data".into()),
        kind => Reply::Answer {
            kind,
            interrupted: flags & NLM_F_DUMP_INTR != 0,
            payload,
        },
    };
    Ok((len, (seq, reply)))
}

/// Where an `NLMSG_ERROR`'s attributes start: after the errno and the request it answers,
/// which is only its header when `NLM_F_CAPPED` says so (af_netlink.c `netlink_ack`).
fn error_tlvs(flags: u16, payload: &[u8]) -> &[u8] {
    let request = &payload[payload.len().min(4)..];
    let request_len = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        request
            .get(..4)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    request.get(align4(request_len)..).unwrap_or(&[])
}

/// The extended ack's message among `tlvs`, present only with `NLM_F_ACK_TLVS`.
fn ack_message(flags: u16, tlvs: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    NlasIterator::new(tlvs)
        .map_while(Result::ok)
        .find(|nla| nla.kind() == NLMSGERR_ATTR_MSG)
        .map(|nla| c_string(nla.value()))
        .filter(|m| !m.is_empty())
}

/// A device's byte counters from an `RTM_NEWLINK` payload, when it carries `IFLA_STATS64`.
pub(super) fn link_bytes(payload: &[u8]) -> Result<Option<super::LinkBytes>, String> {
    for nla in attributes(payload, IFINFOMSG_LEN, "RTM_NEWLINK")? {
        if nla.kind() == IFLA_STATS64 {
            let v = nla.value();
            let word = |i: usize| {
                v.get(i * 8..i * 8 + 8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
                    .ok_or_else(|| format!("IFLA_STATS64 of {} bytes", v.len()))
            };
            return Ok(Some(super::LinkBytes {
                rx: word(2)?,
                tx: word(3)?,
            }));
        }
    }
    Ok(None)
}

/// A device from an `RTM_NEWLINK` payload (`struct ifinfomsg` and its attributes).
pub(super) fn link(payload: &[u8]) -> Result<Link, String> {
    let header = LinkHeader::parse(payload).map_err(|e| format!("RTM_NEWLINK: {e}"))?;
    let mut link = Link {
        index: header.index,
        name: String::new(),
        kind: None,
        up: header.flags.bits() & IFF_UP != 0,
    };
    for nla in attributes(payload, IFINFOMSG_LEN, "RTM_NEWLINK")? {
        match nla.kind() {
            IFLA_IFNAME => link.name = c_string(nla.value()),
            IFLA_LINKINFO => {
                for info in NlasIterator::new(nla.value()) {
                    let info = info.map_err(|e| format!("IFLA_LINKINFO: {e}"))?;
                    if info.kind() == IFLA_INFO_KIND {
                        link.kind = Some(c_string(info.value()));
                    }
                }
            }
            _ => {}
        }
    }
    if link.name.is_empty() {
        return Err(format!(
            "RTM_NEWLINK for index {} has no IFLA_IFNAME",
            link.index
        ));
    }
    Ok(link)
}

/// A qdisc from an `RTM_NEWQDISC` payload (`struct tcmsg` and its attributes), with its device's
/// index.
pub(super) fn qdisc(payload: &[u8]) -> Result<(i32, RawQdisc), String> {
    let header = TcHeader::parse(payload).map_err(|e| format!("RTM_NEWQDISC: {e}"))?;
    let mut q = RawQdisc {
        handle: header.handle.into(),
        parent: header.parent.into(),
        kind: String::new(),
        options: Vec::new(),
        stab: Vec::new(),
    };
    for nla in attributes(payload, TCMSG_LEN, "RTM_NEWQDISC")? {
        match nla.kind() {
            TCA_KIND => q.kind = c_string(nla.value()),
            TCA_OPTIONS => q.options = nla.value().to_vec(),
            TCA_STAB => q.stab = nla.value().to_vec(),
            _ => {}
        }
    }
    if q.kind.is_empty() {
        return Err(format!(
            "RTM_NEWQDISC {:x} on index {} has no TCA_KIND",
            q.handle, header.index
        ));
    }
    Ok((header.index, q))
}

/// The attributes after a fixed header of `header_len` bytes, all checked.
fn attributes<'a>(
    payload: &'a [u8],
    header_len: usize,
    what: &str,
) -> Result<Vec<NlaBuffer<&'a [u8]>>, String> {
    let Some(rest) = payload.get(header_len..) else {
        return Err(format!(
            "{what}: {} bytes, shorter than its header",
            payload.len()
        ));
    };
    NlasIterator::new(rest)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: {e}"))
}

/// A NUL-terminated string attribute (device names are bytes to the kernel: shown lossily).
fn c_string(value: &[u8]) -> String {
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

/// `NLMSG_ALIGN` / `NLA_ALIGN`: netlink pads everything to 4 bytes.
fn align4(len: usize) -> usize {
    (len + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message: header (type, flags, seq, port 0) and payload.
    fn msg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut m = Vec::new();
        m.extend((len as u32).to_ne_bytes());
        m.extend(kind.to_ne_bytes());
        m.extend(flags.to_ne_bytes());
        m.extend(seq.to_ne_bytes());
        m.extend(0u32.to_ne_bytes());
        m.extend(payload);
        m.resize(align4(m.len()), 0);
        m
    }

    /// An attribute, padded.
    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(((4 + value.len()) as u16).to_ne_bytes());
        a.extend(kind.to_ne_bytes());
        a.extend(value);
        a.resize(align4(a.len()), 0);
        a
    }

    fn all(datagram: &[u8]) -> Vec<Message<'_>> {
        messages(datagram).collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn an_ack_and_a_refusal_with_the_kernels_message_are_told_apart() {
        let request_header = msg(36, 0x5, 7, &[])[..16].to_vec();
        let ack = msg(
            NLMSG_ERROR,
            NLM_F_CAPPED,
            7,
            &[&0i32.to_ne_bytes()[..], &request_header].concat(),
        );
        let text = nla(NLMSGERR_ATTR_MSG, b"Invalid qdisc name\0");
        let refused = msg(
            NLMSG_ERROR,
            NLM_F_CAPPED | NLM_F_ACK_TLVS,
            8,
            &[&(-22i32).to_ne_bytes()[..], &request_header, &text].concat(),
        );
        let datagram = [ack, refused].concat();
        assert_eq!(
            all(&datagram),
            vec![
                (7, Reply::Ack),
                (
                    8,
                    Reply::Refused {
                        errno: 22,
                        message: Some("Invalid qdisc name".into())
                    }
                )
            ]
        );
    }

    #[test]
    fn an_uncapped_refusal_skips_the_whole_request_to_find_the_message() {
        // The request echoed in full: header + 20-byte tcmsg + 8-byte attribute = 44 bytes.
        let request = msg(36, 0x5, 3, &[&[0u8; 20][..], &nla(1, b"cak")].concat());
        let text = nla(NLMSGERR_ATTR_MSG, b"Qdisc not found\0");
        let refused = msg(
            NLMSG_ERROR,
            NLM_F_ACK_TLVS,
            3,
            &[&(-2i32).to_ne_bytes()[..], &request, &text].concat(),
        );
        let expected = Reply::Refused {
            errno: 2,
            message: Some("Qdisc not found".into()),
        };
        assert_eq!(all(&refused), vec![(3, expected)]);
    }

    #[test]
    fn done_ends_a_dump_or_carries_its_error() {
        assert_eq!(
            all(&msg(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes())),
            vec![(1, Reply::Done)]
        );
        assert_eq!(all(&msg(NLMSG_DONE, 2, 1, &[])), vec![(1, Reply::Done)]);
        assert_eq!(
            all(&msg(NLMSG_DONE, 2, 1, &(-90i32).to_ne_bytes())),
            vec![(
                1,
                Reply::Refused {
                    errno: 90,
                    message: None
                }
            )]
        );
    }

    /// Found by fuzzing (fuzz/corpus/netlink): `-errno` of i32::MIN overflowed, a panic with
    /// overflow checks and a negative errno without.
    #[test]
    fn an_error_code_of_i32_min_is_an_error_not_a_panic() {
        let done = msg(NLMSG_DONE, 0, 1, &i32::MIN.to_ne_bytes());
        let err = messages(&done).next().unwrap().unwrap_err();
        assert!(
            err.contains("NLMSG_DONE: the error code -2147483648 is no errno"),
            "{err}"
        );
        let request_header = msg(36, 0x5, 7, &[])[..16].to_vec();
        let refusal = msg(
            NLMSG_ERROR,
            0,
            7,
            &[&i32::MIN.to_ne_bytes()[..], &request_header].concat(),
        );
        let err = messages(&refusal).next().unwrap().unwrap_err();
        assert!(
            err.contains("NLMSG_ERROR: the error code -2147483648 is no errno"),
            "{err}"
        );
    }

    #[test]
    fn a_truncated_message_is_an_error_not_a_panic() {
        let mut m = msg(RTM_NEWLINK, 0, 1, &[0u8; 16]);
        m.truncate(20);
        assert!(messages(&m).next().unwrap().is_err());
        assert!(messages(&[1, 2, 3]).next().unwrap().is_err());
    }

    #[test]
    fn a_link_has_its_index_name_kind_and_up_flag() {
        let mut header = vec![0u8; IFINFOMSG_LEN];
        header[4..8].copy_from_slice(&7u32.to_ne_bytes());
        header[8..12].copy_from_slice(&(IFF_UP | 0x40).to_ne_bytes());
        let payload = [
            header,
            nla(IFLA_IFNAME, b"ifb4eth0\0"),
            nla(IFLA_LINKINFO, &nla(IFLA_INFO_KIND, b"ifb\0")),
        ]
        .concat();
        assert_eq!(
            link(&payload).unwrap(),
            Link {
                index: 7,
                name: "ifb4eth0".into(),
                kind: Some("ifb".into()),
                up: true
            }
        );
        assert!(link(&payload[..10]).is_err());
    }

    #[test]
    fn a_qdisc_keeps_its_options_and_stab_bytes_and_drops_statistics() {
        let mut header = vec![0u8; TCMSG_LEN];
        header[4..8].copy_from_slice(&3i32.to_ne_bytes());
        header[8..12].copy_from_slice(&0x1_0000u32.to_ne_bytes());
        header[12..16].copy_from_slice(&0xFFFF_FFFFu32.to_ne_bytes());
        let options = nla(2, &[1, 2, 3, 4]);
        let payload = [
            header,
            nla(TCA_KIND, b"htb\0"),
            nla(TCA_OPTIONS, &options),
            nla(7, &[9; 8]), // TCA_STATS2: traffic, not configuration
        ]
        .concat();
        let (index, q) = qdisc(&payload).unwrap();
        assert_eq!(index, 3);
        assert_eq!(
            q,
            RawQdisc {
                handle: 0x1_0000,
                parent: 0xFFFF_FFFF,
                kind: "htb".into(),
                options,
                stab: vec![]
            }
        );
    }
}
