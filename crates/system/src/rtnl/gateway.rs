//! The network behind an interface as the machine sees it: the gateway its default route goes
//! through (main table, IPv4 and IPv6) and that gateway's MAC from the neighbour table, over
//! rtnetlink (two dumps; no `ip` to parse). The daemon recognises a `[network.NAME]` by it.
//!
//! Heads up! The layouts are the kernel's: include/uapi/linux/rtnetlink.h (`struct rtmsg`,
//! `enum rtattr_type_t`: `RTA_OIF` 4, `RTA_GATEWAY` 5, `RTA_PRIORITY` 6, `RTA_TABLE`
//! 15; `RT_TABLE_MAIN` 254, `RTN_UNICAST` 1), neighbour.h (`struct ndmsg`, `NDA_DST` 1,
//! `NDA_LLADDR` 2, `NUD_*`). The kernel answers from net/ipv4/fib_frontend.c
//! (`inet_dump_fib`), net/ipv6/route.c (`inet6_dump_fib`) and net/core/neighbour.c
//! (`neigh_dump_info`).
//!
//! What callers can rely on: only routes out of the interface itself count, so a VPN's default
//! route on `tun0` (or its `0.0.0.0/1` + `128.0.0.0/1` pair) leaves what `wlan0`'s network is
//! unchanged. When the interface has no default route of its own (a VPN client that deleted it
//! keeps a host route to its server through the real gateway), any route of the main table that
//! goes through a gateway on the interface stands in for it. The MAC is `None` until the kernel
//! has resolved the gateway (an entry that is incomplete or failed says nothing).

use std::net::IpAddr;

use netlink_packet_core::NlasIterator;
use netlink_packet_route::neighbour::NeighbourMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use unbloat_shaper::network::Mac;

use super::{Op, Rtnl, RtnlError};

/// `RTM_NEWROUTE`, `RTM_NEWNEIGH` (rtnetlink.h): the answers to the dumps, and events.
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_NEWNEIGH: u16 = 28;
pub const RTM_DELNEIGH: u16 = 29;
/// `sizeof(struct rtmsg)`, `sizeof(struct ndmsg)`: 12 bytes each.
const RTMSG_LEN: usize = 12;
const NDMSG_LEN: usize = 12;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_TABLE: u16 = 15;
const RT_TABLE_MAIN: u32 = 254;
const RTN_UNICAST: u8 = 1;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NUD_INCOMPLETE | NUD_FAILED`: an entry whose address is not (or no longer) known.
const NUD_UNKNOWN: u16 = 0x01 | 0x20;

/// An interface's gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gateway {
    pub addr: IpAddr,
    /// From the neighbour table; `None` until the kernel has resolved it.
    pub mac: Option<Mac>,
}

/// A unicast route of the main table through a gateway, as far as finding one cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    oif: u32,
    prefix_len: u8,
    metric: u32,
    gateway: IpAddr,
}

impl Rtnl {
    /// The gateway of the interface with this index, if its routes go through one.
    pub fn gateway(&self, index: u32) -> Result<Option<Gateway>, RtnlError> {
        let mut routes = vec![];
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            routes.extend(self.dump(
                Op::Read("the routes"),
                || {
                    let mut msg = RouteMessage::default();
                    msg.header.address_family = family;
                    RouteNetlinkMessage::GetRoute(msg)
                },
                |kind, payload, out| {
                    if kind == RTM_NEWROUTE {
                        out.extend(route(payload));
                    }
                    Ok(())
                },
            )?);
        }
        let Some(addr) = choose(&routes, index) else {
            return Ok(None);
        };
        let family = match addr {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        let macs = self.dump(
            Op::Read("the neighbour table"),
            || {
                let mut msg = NeighbourMessage::default();
                msg.header.family = family;
                RouteNetlinkMessage::GetNeighbour(msg)
            },
            |kind, payload, out| {
                if kind == RTM_NEWNEIGH {
                    out.extend(neighbour(payload, index, addr));
                }
                Ok(())
            },
        )?;
        Ok(Some(Gateway {
            addr,
            mac: macs.first().copied(),
        }))
    }
}

/// The gateway of `index`: its default route with the lowest metric (IPv4 before IPv6 at the
/// same metric, as the list comes), else its most general route through a gateway.
fn choose(routes: &[Route], index: u32) -> Option<IpAddr> {
    routes
        .iter()
        .filter(|r| r.oif == index)
        .min_by_key(|r| (r.prefix_len, r.metric))
        .map(|r| r.gateway)
}

/// A route message's gateway route: unicast, main table, through a gateway (others: `None`).
fn route(payload: &[u8]) -> Option<Route> {
    let header = payload.get(..RTMSG_LEN)?;
    let (family, prefix_len, table, kind) = (header[0], header[1], header[4], header[7]);
    if kind != RTN_UNICAST {
        return None;
    }
    let (mut oif, mut metric, mut gateway, mut table) = (None, 0, None, u32::from(table));
    for nla in NlasIterator::new(&payload[RTMSG_LEN..]).map_while(Result::ok) {
        let v = nla.value();
        match nla.kind() {
            RTA_OIF => oif = u32_of(v),
            RTA_PRIORITY => metric = u32_of(v).unwrap_or(0),
            RTA_TABLE => table = u32_of(v).unwrap_or(table),
            RTA_GATEWAY => gateway = ip_of(family, v),
            _ => {}
        }
    }
    (table == RT_TABLE_MAIN).then_some(())?;
    Some(Route {
        oif: oif?,
        prefix_len,
        metric,
        gateway: gateway?,
    })
}

/// The MAC of a neighbour message when it is `addr` on `index` and resolved.
fn neighbour(payload: &[u8], index: u32, addr: IpAddr) -> Option<Mac> {
    let header = payload.get(..NDMSG_LEN)?;
    let family = header[0];
    let ifindex = u32_of(&header[4..8])?;
    let state = u16::from_ne_bytes([header[8], header[9]]);
    if ifindex != index || state & NUD_UNKNOWN != 0 || state == 0 {
        return None;
    }
    let (mut dst, mut lladdr) = (None, None);
    for nla in NlasIterator::new(&payload[NDMSG_LEN..]).map_while(Result::ok) {
        match nla.kind() {
            NDA_DST => dst = ip_of(family, nla.value()),
            NDA_LLADDR => lladdr = <[u8; 6]>::try_from(nla.value()).ok().map(Mac),
            _ => {}
        }
    }
    (dst? == addr).then_some(lladdr?)
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

/// An address attribute of a message of `family` (`AF_INET` 2, `AF_INET6` 10).
fn ip_of(family: u8, v: &[u8]) -> Option<IpAddr> {
    match family as i32 {
        libc::AF_INET => Some(IpAddr::from(<[u8; 4]>::try_from(v).ok()?)),
        libc::AF_INET6 => Some(IpAddr::from(<[u8; 16]>::try_from(v).ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
        out.extend(kind.to_ne_bytes());
        out.extend(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out
    }

    fn route_msg(prefix_len: u8, table: u8, kind: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut m = vec![
            libc::AF_INET as u8,
            prefix_len,
            0,
            0,
            table,
            3,
            0,
            kind,
            0,
            0,
            0,
            0,
        ];
        for a in attrs {
            m.extend(a);
        }
        m
    }

    #[test]
    fn routes_of_other_tables_kinds_and_devices_do_not_count() {
        let gw = nla(RTA_GATEWAY, &[192, 168, 1, 1]);
        let oif = |i: u32| nla(RTA_OIF, &i.to_ne_bytes());
        let main = route_msg(0, 254, RTN_UNICAST, &[gw.clone(), oif(3)]);
        assert_eq!(
            route(&main),
            Some(Route {
                oif: 3,
                prefix_len: 0,
                metric: 0,
                gateway: "192.168.1.1".parse().unwrap()
            })
        );
        // A policy table's default (a VPN's table 51820), a blackhole, a route without gateway.
        let other = route_msg(
            0,
            252,
            RTN_UNICAST,
            &[gw.clone(), oif(3), nla(RTA_TABLE, &51820u32.to_ne_bytes())],
        );
        assert_eq!(route(&other), None);
        assert_eq!(route(&route_msg(0, 254, 6, &[gw.clone(), oif(3)])), None);
        assert_eq!(route(&route_msg(0, 254, RTN_UNICAST, &[oif(5)])), None);
    }

    #[test]
    fn the_interfaces_own_default_route_wins_and_a_vpns_routes_elsewhere_do_not_count() {
        let r = |oif, prefix_len, metric, gw: &str| Route {
            oif,
            prefix_len,
            metric,
            gateway: gw.parse().unwrap(),
        };
        let routes = [
            // tun0 (index 9): 0/1 and 128/1, as OpenVPN's def1 sets them; a default route.
            r(9, 1, 0, "10.8.0.1"),
            r(9, 1, 0, "10.8.0.1"),
            r(9, 0, 0, "10.8.0.1"),
            // wlan0 (index 3): the VPN server's host route, and the default route.
            r(3, 32, 0, "192.168.1.1"),
            r(3, 0, 600, "192.168.1.1"),
            r(3, 0, 100, "fe80::1"),
        ];
        assert_eq!(choose(&routes, 3), Some("fe80::1".parse().unwrap()));
        // The VPN deleted wlan0's default route: its server's route still says the gateway.
        assert_eq!(
            choose(&routes[..4], 3),
            Some("192.168.1.1".parse().unwrap())
        );
        assert_eq!(choose(&routes, 4), None);
    }

    #[test]
    fn only_a_resolved_neighbour_of_the_interface_gives_a_mac() {
        let msg = |ifindex: u32, state: u16, dst: [u8; 4], mac: &[u8]| {
            let mut m = vec![libc::AF_INET as u8, 0, 0, 0];
            m.extend(ifindex.to_ne_bytes());
            m.extend(state.to_ne_bytes());
            m.extend([0, 1]);
            m.extend(nla(NDA_DST, &dst));
            m.extend(nla(NDA_LLADDR, mac));
            m
        };
        let gw: IpAddr = "192.168.1.1".parse().unwrap();
        let mac = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01];
        // Reachable, stale (known, not confirmed lately), permanent: all say the MAC.
        for state in [0x02, 0x04, 0x80] {
            assert_eq!(
                neighbour(&msg(3, state, [192, 168, 1, 1], &mac), 3, gw),
                Some(Mac(mac))
            );
        }
        assert_eq!(
            neighbour(&msg(3, 0x01, [192, 168, 1, 1], &mac), 3, gw),
            None
        );
        assert_eq!(
            neighbour(&msg(3, 0x20, [192, 168, 1, 1], &mac), 3, gw),
            None
        );
        assert_eq!(
            neighbour(&msg(4, 0x02, [192, 168, 1, 1], &mac), 3, gw),
            None
        );
        assert_eq!(
            neighbour(&msg(3, 0x02, [192, 168, 1, 2], &mac), 3, gw),
            None
        );
        assert_eq!(
            neighbour(&msg(3, 0x02, [192, 168, 1, 1], &mac[..4]), 3, gw),
            None
        );
    }
}
