//! What the kernel holds for a WAN device and its IFB, read over rtnetlink: the same
//! [`LiveState`] as [`crate::live`] builds from `tc -j -s -d`, without a process.
//!
//! Why: the daemon's metrics read every shaped interface at each scrape. One `tc` process costs
//! 50-100 ms of CPU in User-Mode Linux and a few ms on real hardware, which alone broke the
//! budget of 1 % of a core at one scrape a second; a dump is a few system calls.
//!
//! What callers can rely on:
//! - Each value is the one tc would print, read from the same attribute as tc reads it
//!   (`tests/tcnl.rs` compares both readers on the same kernel, setup by setup). HTB's rates
//!   are exact ([`Source::Netlink`](unbloat_shaper::tcjson::Source)), where tc's text rounds.
//! - Decoded whole: cake, fq_codel, htb, ingress/clsact qdiscs; htb classes; u32 filters with
//!   mirred. Other kinds keep their place, kind and counters (options `null`); an answer of a
//!   known kind that does not decode is kept as `Other` with the reason, as the JSON reader does.
//! - A device that is not there is an error; a missing IFB is read as none, as `live` does.
//!
//! `start`, `set-rate` and `stop` keep verifying with tc's own reading (`live`): that is the
//! tool users compare with, and it checks this module too.

mod attr;
mod class;
mod filter;
mod qdisc;

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::rtnl::{Rtnl, RtnlError, TcObjects, INGRESS_FILTERS};
use attr::{u32_at, Attrs};
use unbloat_shaper::model::Handle;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::tcjson::{DeviceState, Filter, LiveState, Qdisc};
use unbloat_units::IfName;

/// `sizeof(struct tcmsg)` (rtnetlink.h): the attributes start after it.
const TCMSG_LEN: usize = 20;

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Rtnl(#[from] RtnlError),
    #[error("{dev} is not there")]
    NoDevice { dev: String },
    #[error("reading the {what} of {dev} over netlink: {why}")]
    Decode {
        dev: String,
        what: TcObjects,
        why: String,
    },
}

/// `struct tcmsg` past its family: the device, the object's handle, its parent, and `tcm_info`
/// (a filter's preference and protocol; a class's leaf qdisc).
pub(crate) struct Header {
    pub handle: u32,
    pub parent: u32,
    pub info: u32,
}

/// What the kernel holds for a plan's devices: its WAN, its IFB when the plan has one and it
/// exists, and classes where the plan has HTB.
pub fn read_plan(rtnl: &Rtnl, plan: &Plan) -> Result<LiveState, ReadError> {
    let ifb = plan.ingress.as_ref().map(|i| &i.ifb);
    read(rtnl, &plan.wan, ifb, crate::live::has_htb(plan))
}

/// The qdiscs of the device at `index` (`dev` names it in errors), with their counters, and
/// nothing else: one dump, for a reader that samples them many times a second (`unbloat test`'s
/// egress backlog) and needs neither the device's filters nor its classes.
pub fn qdiscs(rtnl: &Rtnl, dev: &IfName, index: u32) -> Result<Vec<Qdisc>, ReadError> {
    let reader = Reader {
        rtnl,
        name_of: &|_| None,
    };
    reader.each(dev, index, TcObjects::Qdiscs, qdisc::qdisc)
}

/// Reads `wan` and, when it exists, `ifb`; `classes`: read classes too (HTB's).
pub fn read(
    rtnl: &Rtnl,
    wan: &IfName,
    ifb: Option<&IfName>,
    classes: bool,
) -> Result<LiveState, ReadError> {
    let no_device = |dev: &IfName| ReadError::NoDevice {
        dev: dev.to_string(),
    };
    let wan_link = rtnl.link(wan.as_str())?.ok_or_else(|| no_device(wan))?;
    let ifb_link = match ifb {
        Some(name) => rtnl.link(name.as_str())?,
        None => None,
    };
    // Device names by index for mirred's target, looked up once each.
    let names = RefCell::new(BTreeMap::from([(wan_link.index, wan_link.name.clone())]));
    if let Some(l) = &ifb_link {
        names.borrow_mut().insert(l.index, l.name.clone());
    }
    let name_of = |index: u32| -> Option<String> {
        if let Some(n) = names.borrow().get(&index) {
            return Some(n.clone());
        }
        let name = rtnl.link_name(index).ok().flatten()?;
        names.borrow_mut().insert(index, name.clone());
        Some(name)
    };
    let reader = Reader {
        rtnl,
        name_of: &name_of,
    };
    let wan_state = reader.device(wan, wan_link.index, classes)?;
    let ingress_filters = if wan_state.ingress().is_some() {
        reader.filters(wan, wan_link.index, INGRESS_FILTERS, Some(Handle::INGRESS))?
    } else {
        vec![]
    };
    let ifb_state = match (&ifb_link, ifb) {
        (Some(link), Some(name)) => Some(reader.device(name, link.index, classes)?),
        _ => None,
    };
    Ok(LiveState {
        wan: wan_state,
        ingress_filters,
        ifb: ifb_state,
    })
}

struct Reader<'a> {
    rtnl: &'a Rtnl,
    name_of: &'a dyn Fn(u32) -> Option<String>,
}

impl Reader<'_> {
    /// One device's qdiscs, its root's filters and, when asked, its classes.
    fn device(&self, dev: &IfName, index: u32, classes: bool) -> Result<DeviceState, ReadError> {
        let qdiscs = self.each(dev, index, TcObjects::Qdiscs, qdisc::qdisc)?;
        let classes = if classes {
            self.each(dev, index, TcObjects::Classes, class::class)?
        } else {
            vec![]
        };
        // A root without filters (noqueue, cake) answers an empty dump.
        let filters = self.filters(dev, index, 0, None)?;
        Ok(DeviceState {
            dev: dev.clone(),
            qdiscs,
            classes,
            filters,
        })
    }

    fn filters(
        &self,
        dev: &IfName,
        index: u32,
        parent: u32,
        asked: Option<Handle>,
    ) -> Result<Vec<Filter>, ReadError> {
        let what = TcObjects::Filters { parent };
        let found = self.each(dev, index, what, |h, a| {
            filter::filter(h, a, asked, self.name_of)
        });
        match found {
            // No such parent (the ingress qdisc went away since the qdiscs were read): no
            // filters there, as `tc filter show` prints nothing.
            Err(ReadError::Rtnl(e)) if matches!(e.errno(), Some(libc::EINVAL | libc::ENOENT)) => {
                Ok(vec![])
            }
            other => other,
        }
    }

    /// Dumps `what` and decodes each answer with `decode`.
    fn each<T>(
        &self,
        dev: &IfName,
        index: u32,
        what: TcObjects,
        decode: impl Fn(&Header, &Attrs) -> Result<T, String>,
    ) -> Result<Vec<T>, ReadError> {
        let decode_error = |why: String| ReadError::Decode {
            dev: dev.to_string(),
            what,
            why,
        };
        self.rtnl
            .tc_dump(what, index)?
            .iter()
            .map(|payload| decode_with(payload, &decode))
            .collect::<Result<_, String>>()
            .map_err(decode_error)
    }
}

/// One answer of a dump (`struct tcmsg` and its attributes) decoded by `decode`.
fn decode_with<T>(
    payload: &[u8],
    decode: impl Fn(&Header, &Attrs) -> Result<T, String>,
) -> Result<T, String> {
    let header = header(payload).ok_or("an answer shorter than struct tcmsg")?;
    let attrs = Attrs::parse(&payload[TCMSG_LEN..], "the answer's attributes")?;
    decode(&header, &attrs)
}

/// One answer read as a qdisc, a class and a filter, as a dump of each would: every decoder of
/// this module on bytes that came from no kernel. For the fuzz targets (fuzz/); not an API.
#[doc(hidden)]
pub fn decode_answer(payload: &[u8]) -> [Result<(), String>; 3] {
    let name_of = |index: u32| Some(format!("if{index}"));
    [
        decode_with(payload, qdisc::qdisc).map(drop),
        decode_with(payload, class::class).map(drop),
        decode_with(payload, |h, a| filter::filter(h, a, None, &name_of)).map(drop),
    ]
}

fn header(payload: &[u8]) -> Option<Header> {
    if payload.len() < TCMSG_LEN {
        return None;
    }
    Some(Header {
        handle: u32_at(payload, 8)?,
        parent: u32_at(payload, 12)?,
        info: u32_at(payload, 16)?,
    })
}
