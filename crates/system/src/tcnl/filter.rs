//! A filter from the kernel's `RTM_NEWTFILTER` answer, as [`unbloat_shaper::tcjson`] has it
//! from `tc -j -s -d filter show` (iproute2 tc/tc_filter.c `print_filter`, tc/f_u32.c
//! `u32_print_opt`, tc/m_action.c, tc/m_mirred.c). u32 is read whole (keys, class, actions,
//! mirred's target and counters): it is the classifier unbloat uses; other classifiers are
//! kept with their place and kind only.
//!
//! Heads up! `TCA_U32_*`, `struct tc_u32_sel`, `struct tc_u32_key`, `TCA_ACT_*` from
//! include/uapi/linux/pkt_cls.h; `TCA_MIRRED_*`, `struct tc_mirred` from tc_act/tc_mirred.h.

use super::attr::{be32_at, i32_at, u32_at, Attrs};
use super::qdisc::{counters, handle};
use super::Header;
use unbloat_shaper::model::Handle;
use unbloat_shaper::qdisc::netlink::{TCA_KIND, TCA_OPTIONS};
use unbloat_shaper::tcjson::{Action, Filter, FilterKind, Mirred, U32Key, U32Match};

use unbloat_shaper::qdisc::ingress::attr::{
    ACT_KIND as TCA_ACT_KIND, ACT_OPTIONS as TCA_ACT_OPTIONS, ACT_STATS as TCA_ACT_STATS,
    MIRRED_PARMS as TCA_MIRRED_PARMS, U32_ACT as TCA_U32_ACT, U32_CLASSID as TCA_U32_CLASSID,
    U32_DIVISOR as TCA_U32_DIVISOR, U32_SEL as TCA_U32_SEL,
};
// `TC_H_ROOT`: filters on the root qdisc are shown with `"root": true`, no parent.
use unbloat_shaper::qdisc::netlink::TC_H_ROOT;

/// The filter of one answer. `asked_parent`: the parent the dump asked for when tc leaves it
/// out of each entry (`filter show dev X ingress`); `name_of`: a device's name by its index.
pub(super) fn filter(
    h: &Header,
    a: &Attrs,
    asked_parent: Option<Handle>,
    name_of: &dyn Fn(u32) -> Option<String>,
) -> Result<Filter, String> {
    let kind = a.string(TCA_KIND).ok_or("no TCA_KIND")?;
    // tcm_info: the preference in the upper 16 bits, the protocol (network order) below.
    let protocol = protocol(u16::from_be(h.info as u16));
    let parent = match asked_parent {
        Some(p) => Some(p),
        None if h.parent == TC_H_ROOT => None,
        None => Some(handle(h.parent)),
    };
    let details = match a.get(TCA_OPTIONS) {
        None => FilterKind::Head,
        Some(options) if kind == "u32" => {
            let o = Attrs::parse(options, "u32's options")?;
            if o.has(TCA_U32_DIVISOR) {
                FilterKind::Head // a hash table
            } else {
                FilterKind::U32(u32_key(h.handle, &o, name_of)?)
            }
        }
        Some(_) => FilterKind::Other(serde_json::Value::Null),
    };
    Ok(Filter {
        parent,
        protocol,
        pref: h.info >> 16,
        kind,
        details,
    })
}

/// The names tc prints for the protocols of filters (lib/ll_proto.c).
fn protocol(p: u16) -> String {
    match p {
        0 | 0x0003 => "all".into(),
        0x0800 => "ip".into(),
        0x86DD => "ipv6".into(),
        0x0806 => "arp".into(),
        0x8100 => "802.1Q".into(),
        0x88A8 => "802.1ad".into(),
        other => format!("0x{other:x}"),
    }
}

/// A u32 key: its handle as tc prints it, its class, the 32-bit matches of its selector
/// (`struct tc_u32_sel`: flags, offshift, nkeys u8, then offmask, off, offoff, hoff, hmask, the
/// keys from byte 16: each mask and value big-endian, off and offmask s32), and its actions.
fn u32_key(fh: u32, o: &Attrs, name_of: &dyn Fn(u32) -> Option<String>) -> Result<U32Key, String> {
    let mut matches = Vec::new();
    if let Some(sel) = o.get(TCA_U32_SEL) {
        let nkeys = *sel.get(2).ok_or("a short u32 selector")? as usize;
        for i in 0..nkeys {
            let at = 16 + 16 * i;
            let short = || format!("u32 selector: key {i} of {nkeys} is cut off");
            matches.push(U32Match {
                mask: be32_at(sel, at).ok_or_else(short)?,
                value: be32_at(sel, at + 4).ok_or_else(short)?,
                off: i64::from(i32_at(sel, at + 8).ok_or_else(short)?),
            });
        }
    }
    let actions = match o.nested(TCA_U32_ACT, "u32's actions")? {
        None => vec![],
        Some(list) => {
            let mut each: Vec<(u16, &[u8])> = list.all().collect();
            each.sort_by_key(|(order, _)| *order);
            each.into_iter()
                .map(|(_, bytes)| action(&Attrs::parse(bytes, "an action")?, name_of))
                .collect::<Result<_, String>>()?
        }
    };
    Ok(U32Key {
        fh: u32_handle(fh),
        flowid: o.u32(TCA_U32_CLASSID).map(handle),
        matches,
        actions,
    })
}

/// tc's `sprint_u32_handle`: `htid:hash:node` in hex, parts left out when zero (`800::800`).
fn u32_handle(h: u32) -> String {
    if h == 0 {
        return "none".into();
    }
    let (htid, hash, node) = (h >> 20, (h >> 12) & 0xFF, h & 0xFFF);
    let mut s = String::new();
    if htid != 0 {
        s += &format!("{htid:x}:");
    }
    if node != 0 || hash != 0 {
        if hash != 0 {
            s += &format!("{hash:x}");
        }
        if node != 0 {
            s += &format!(":{node:x}");
        }
    }
    s
}

/// One action: mirred read whole (`struct tc_mirred`: index, capab, action, refcnt, bindcnt,
/// eaction, ifindex), any other kind kept as its name.
fn action(a: &Attrs, name_of: &dyn Fn(u32) -> Option<String>) -> Result<Action, String> {
    let kind = a.string(TCA_ACT_KIND).unwrap_or_default();
    let other = || Action::Other(serde_json::json!({ "kind": kind }));
    if kind != "mirred" {
        return Ok(other());
    }
    let Some(options) = a.nested(TCA_ACT_OPTIONS, "mirred's options")? else {
        return Ok(other());
    };
    let p = options
        .get(TCA_MIRRED_PARMS)
        .ok_or("mirred without parameters")?;
    let (eaction, ifindex) = (
        i32_at(p, 20).ok_or("short mirred parameters")?,
        u32_at(p, 24).ok_or("short mirred parameters")?,
    );
    // TCA_EGRESS_REDIR 1, TCA_EGRESS_MIRROR 2, TCA_INGRESS_REDIR 3, TCA_INGRESS_MIRROR 4.
    let (action, direction) = match eaction {
        1 => ("redirect", "egress"),
        2 => ("mirror", "egress"),
        3 => ("redirect", "ingress"),
        4 => ("mirror", "ingress"),
        _ => return Ok(other()),
    };
    // tc refuses to print a mirred whose device is gone; kept as "other" here.
    let Some(to_dev) = name_of(ifindex) else {
        return Ok(other());
    };
    let stats = a
        .nested(TCA_ACT_STATS, "the action's statistics")?
        .and_then(|s| counters(&s));
    Ok(Action::Mirred(Mirred {
        action: action.into(),
        direction: direction.into(),
        to_dev,
        packets: stats.as_ref().map(|c| c.packets),
        bytes: stats.as_ref().map(|c| c.bytes),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u32_handles_print_as_tc_prints_them() {
        assert_eq!(u32_handle(0x8000_0800), "800::800");
        assert_eq!(u32_handle(0x8000_0000), "800:");
        assert_eq!(u32_handle(0x8000_1001), "800:1:1");
        assert_eq!(u32_handle(0), "none");
    }

    #[test]
    fn protocols_are_named_from_network_order() {
        assert_eq!(protocol(u16::from_be(0x0300)), "all");
        assert_eq!(protocol(0x86DD), "ipv6");
        assert_eq!(protocol(0x1234), "0x1234");
    }
}
