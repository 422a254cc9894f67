//! The Wi-Fi network an interface is associated with, as the kernel's nl80211 says: the access
//! point's BSSID and the SSID its frames carry, from the kernel's scan results
//! (`NL80211_CMD_GET_SCAN`, the BSS marked associated), over a generic netlink socket (no `iw`
//! to parse).
//! The daemon recognises a `[network.NAME]` by them (issue 56).
//!
//! Heads up! The numbers are the kernel's: include/uapi/linux/nl80211.h, answered by
//! net/wireless/nl80211.c (`nl80211_dump_scan`, `nl80211_send_bss`: `NL80211_BSS_STATUS`,
//! `NL80211_BSS_INFORMATION_ELEMENTS`, `NL80211_BSS_PRBRESP_DATA`). The family's id is
//! not fixed: it is asked of the generic netlink controller ("nl80211", genetlink.h). Messages are
//! built and parsed by netlink-packet-generic and wl-nl80211 (the rust-netlink family's); the
//! socket is netlink-sys's, used synchronously as [`crate::rtnl`] does.
//!
//! [`WifiEvents`] wakes the daemon when a station connects, roams or disconnects (the family's
//! "mlme" multicast group): an association changes the SSID or BSSID without always changing
//! a route, and the carrier comes up before cfg80211 knows what it is associated with.
//!
//! What callers can rely on: a machine without Wi-Fi (no cfg80211 in the kernel), an interface
//! that is not Wi-Fi, and one that is not associated all read as `Ok(None)`, not as errors; an
//! error is a socket that failed or a kernel that refused for another reason. Nothing here
//! changes anything: every request is a read.

use std::io;

use netlink_packet_core::{
    NetlinkDeserializable, NetlinkMessage, NetlinkPayload, NetlinkSerializable, NLM_F_DUMP,
};
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, McastGrpAttrs};
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::GenlMessage;
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use unbloat_shaper::network::{Mac, Ssid};
use wl_nl80211::{Nl80211Attr, Nl80211BssInfo, Nl80211Command, Nl80211Message};

use crate::rtnl::events::{receive, Received};
use crate::rtnl::{request_bytes, set_receive_timeout};

/// How long the kernel may take to answer; it answers at once, so this only bounds a bug.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A managed interface's association.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Association {
    /// The network's name; `None` for one that hides it or has a name 802.11 does not allow.
    pub ssid: Option<Ssid>,
    /// The access point's MAC; `None` only if the kernel's entry for it lacks one.
    pub bssid: Option<Mac>,
}

/// A generic netlink socket that speaks nl80211.
pub struct Nl80211 {
    socket: Socket,
    family: u16,
    /// The id of the family's "mlme" multicast group (connect, roam, disconnect events).
    mlme: Option<u32>,
    seq: u32,
    buf: Vec<u8>,
}

/// A socket joined to nl80211's "mlme" group.
pub struct WifiEvents(Nl80211);

impl Nl80211 {
    /// `Ok(None)`: this kernel has no nl80211 (built without cfg80211): no Wi-Fi at all.
    pub fn open() -> io::Result<Option<Nl80211>> {
        let mut socket = Socket::new(NETLINK_GENERIC)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        set_receive_timeout(&socket, REPLY_TIMEOUT)?;
        let mut me = Nl80211 {
            socket,
            family: 0,
            mlme: None,
            seq: 0,
            buf: vec![0; 64 * 1024],
        };
        let ask = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName("nl80211".into())],
        });
        let attrs: Vec<GenlCtrlAttrs> = match me.exchange(ask, 0) {
            Ok(answers) => answers.into_iter().flat_map(|a| a.payload.nlas).collect(),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        for a in attrs {
            match a {
                GenlCtrlAttrs::FamilyId(id) => me.family = id,
                GenlCtrlAttrs::McastGroups(groups) => {
                    me.mlme = groups.iter().find_map(|g| {
                        let named = g
                            .iter()
                            .any(|n| matches!(n, McastGrpAttrs::Name(s) if s == "mlme"));
                        g.iter().find_map(|n| match n {
                            McastGrpAttrs::Id(id) if named => Some(*id),
                            _ => None,
                        })
                    })
                }
                _ => {}
            }
        }
        Ok((me.family != 0).then_some(me))
    }

    /// This socket, joined to the "mlme" group; `None` when the kernel names no such group.
    pub fn events(self) -> io::Result<Option<WifiEvents>> {
        let Some(group) = self.mlme else {
            return Ok(None);
        };
        self.socket.add_membership(group)?;
        Ok(Some(WifiEvents(self)))
    }

    /// What the interface with this index is associated with; `None`: not a Wi-Fi station, or
    /// not associated now. Read from the kernel's scan results, as `iw dev IFACE link` does:
    /// the BSS whose status is "associated" gives the BSSID, and its elements the SSID (from a
    /// probe response first: a network that hides its name beacons an empty one). Linux 6.1's
    /// `NL80211_ATTR_SSID` of the interface is not enough: with the SME in wpa_supplicant it is
    /// set only when the access point sends a country element (net/wireless/sme.c,
    /// `__cfg80211_connect_result` returns before it without one), so it is the fallback here.
    pub fn association(&mut self, index: u32) -> io::Result<Option<Association>> {
        let scan = match self.ask(Nl80211Command::GetScan, index, NLM_F_DUMP) {
            Ok(s) => s,
            // Not a wireless device (net/wireless/nl80211.c: `__cfg80211_wdev_from_attrs`).
            Err(e) if not_wifi(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let bss = scan
            .into_iter()
            .flat_map(|m| m.attributes)
            .find_map(|a| match a {
                Nl80211Attr::Bss(info)
                    if info.contains(&Nl80211BssInfo::Status(BSS_ASSOCIATED)) =>
                {
                    Some(info)
                }
                _ => None,
            });
        let Some(bss) = bss else {
            return Ok(None);
        };
        let bssid = bss.iter().find_map(|i| match i {
            Nl80211BssInfo::Bssid(m) => Some(Mac(*m)),
            _ => None,
        });
        let elements = |want: fn(&Nl80211BssInfo) -> Option<&Vec<u8>>| {
            bss.iter().find_map(want).and_then(|ies| ssid_element(ies))
        };
        let ssid = elements(|i| match i {
            Nl80211BssInfo::RawProbeResponseInformationElements(v) => Some(v),
            _ => None,
        })
        .or_else(|| {
            elements(|i| match i {
                Nl80211BssInfo::RawInformationElements(v) => Some(v),
                _ => None,
            })
        });
        let ssid = match ssid {
            Some(s) => Some(s),
            None => self.interface_ssid(index)?,
        };
        Ok(Some(Association { ssid, bssid }))
    }

    /// The SSID the interface itself reports (`NL80211_CMD_GET_INTERFACE`), if any.
    fn interface_ssid(&mut self, index: u32) -> io::Result<Option<Ssid>> {
        let answers = match self.ask(Nl80211Command::GetInterface, index, 0) {
            Ok(a) => a,
            Err(e) if not_wifi(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(answers
            .into_iter()
            .flat_map(|m| m.attributes)
            .find_map(|a| match a {
                Nl80211Attr::SsidRaw(octets) => Ssid::from_octets(&octets),
                _ => None,
            }))
    }

    fn ask(
        &mut self,
        cmd: Nl80211Command,
        index: u32,
        flags: u16,
    ) -> io::Result<Vec<Nl80211Message>> {
        let mut msg = GenlMessage::from_payload(Nl80211Message {
            cmd,
            attributes: vec![Nl80211Attr::IfIndex(index)],
        });
        msg.set_resolved_family_id(self.family);
        Ok(self
            .exchange(msg, flags)?
            .into_iter()
            .map(|g| g.payload)
            .collect())
    }

    /// Sends `request` and reads its answers to the ack (or a dump's end); a refusal is the
    /// kernel's errno.
    fn exchange<F>(
        &mut self,
        request: GenlMessage<F>,
        flags: u16,
    ) -> io::Result<Vec<GenlMessage<F>>>
    where
        GenlMessage<F>: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug,
    {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = request_bytes(request, flags, seq);
        self.socket.send(&bytes, 0)?;
        let mut out = vec![];
        loop {
            let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
            let mut at = 0;
            while at < n {
                let reply = NetlinkMessage::<GenlMessage<F>>::deserialize(&self.buf[at..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = reply.header.length as usize;
                if len == 0 {
                    break;
                }
                at += (len + 3) & !3;
                if reply.header.sequence_number != seq {
                    continue; // a leftover of an earlier request that timed out
                }
                match reply.payload {
                    NetlinkPayload::InnerMessage(m) => out.push(m),
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(out), // the ack
                            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                        };
                    }
                    _ => {}
                }
            }
        }
    }
}

impl WifiEvents {
    /// Whether an association may have changed: a connect, roam or disconnect (or its parts)
    /// came within `timeout`, or events were lost. The group's other events (signal quality
    /// reports, channel switches) are not a new network.
    pub fn next(&mut self, timeout: std::time::Duration) -> io::Result<bool> {
        let events = &mut self.0;
        Ok(match receive(&events.socket, &mut events.buf, timeout)? {
            Received::Datagram(n) => changes_association(&events.buf[..n]),
            Received::Lost => true,
            Received::Nothing => false,
        })
    }
}

/// Whether a datagram of the "mlme" group holds an event that changes what a station is
/// associated with; one that does not parse counts (a newer kernel's attribute must not hide
/// a roam).
fn changes_association(datagram: &[u8]) -> bool {
    use Nl80211Command::*;
    match NetlinkMessage::<GenlMessage<Nl80211Message>>::deserialize(datagram) {
        Ok(m) => match m.payload {
            NetlinkPayload::InnerMessage(g) => matches!(
                g.payload.cmd,
                Associate
                    | Deauthenticate
                    | Disassociate
                    | Connect
                    | Roam
                    | Disconnect
                    | PortAuthorized
            ),
            _ => false,
        },
        Err(_) => true,
    }
}

/// `NL80211_BSS_STATUS_ASSOCIATED` (nl80211.h `enum nl80211_bss_status`).
const BSS_ASSOCIATED: u32 = 1;

/// The SSID element (ID 0, IEEE 802.11-2020 9.4.2.2) of a frame's elements, when it names one:
/// each element is an ID octet, a length octet and that many octets. A truncated list ends the
/// walk; an empty SSID (a hidden network's beacon) is none.
fn ssid_element(elements: &[u8]) -> Option<Ssid> {
    let mut rest = elements;
    while let [id, len, tail @ ..] = rest {
        let len = *len as usize;
        let body = tail.get(..len)?;
        if *id == 0 {
            return Ssid::from_octets(body);
        }
        rest = &tail[len..];
    }
    None
}

/// The errnos of a device that is not Wi-Fi, or gone.
fn not_wifi(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENOENT)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssid_element_is_found_among_others_and_a_broken_list_names_none() {
        // Supported rates (ID 1), then the SSID "Home" (ID 0), then a DS parameter (ID 3).
        let ies = [1, 2, 0x82, 0x84, 0, 4, b'H', b'o', b'm', b'e', 3, 1, 6];
        assert_eq!(ssid_element(&ies), "Home".parse().ok());
        // A hidden network's beacon: an empty SSID.
        assert_eq!(ssid_element(&[0, 0, 3, 1, 6]), None);
        // Truncated: the SSID claims 9 octets and has 4.
        assert_eq!(ssid_element(&[0, 9, b'H', b'o', b'm', b'e']), None);
        assert_eq!(ssid_element(&[1]), None);
        assert_eq!(ssid_element(&[]), None);
    }
}
