//! Everything tc reports for one WAN device and its IFB, parsed: what `verify` and `status` read.
//!
//! The caller (the system crate) runs the commands and hands over their output as text:
//!
//! | field of [`LiveTexts`] | command |
//! |---|---|
//! | `qdisc` | `tc -j -s -d qdisc show dev WAN` |
//! | `class` | `tc -j -s -d class show dev WAN` |
//! | `filter` | `tc -j -s -d filter show dev WAN` (the egress side; entries name their parent) |
//! | `filter_ingress` | `tc -j -s -d filter show dev WAN ingress` (or `parent ffff:`) |
//! | `ifb` | the same three for the IFB, if one exists |
//!
//! Empty output counts as "nothing there" (tc prints nothing for classes of a classless qdisc).

use super::{parse_classes, parse_filters, parse_qdiscs, Class, Filter, Qdisc, TcJsonError};
use crate::model::Handle;
use unbloat_units::IfName;

/// The raw output of the commands listed in the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveTexts {
    pub qdisc: String,
    pub class: String,
    pub filter: String,
    pub filter_ingress: String,
    pub ifb: Option<IfbTexts>,
}

/// The output of `tc -j -s -d qdisc|class|filter show dev IFB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfbTexts {
    pub name: IfName,
    pub qdisc: String,
    pub class: String,
    pub filter: String,
}

/// One device's qdiscs, classes and (egress-side) filters.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceState {
    pub dev: IfName,
    pub qdiscs: Vec<Qdisc>,
    pub classes: Vec<Class>,
    pub filters: Vec<Filter>,
}

/// What the kernel holds for a WAN device: its own state, the filters on its ingress qdisc,
/// and its IFB's state when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveState {
    pub wan: DeviceState,
    pub ingress_filters: Vec<Filter>,
    pub ifb: Option<DeviceState>,
}

/// Which output of which device could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reading tc's {what} of {dev}: {source}")]
pub struct LiveError {
    pub dev: String,
    pub what: &'static str,
    #[source]
    pub source: TcJsonError,
}

impl LiveState {
    /// Parses the outputs of the commands in the module documentation.
    pub fn parse(wan: &IfName, texts: &LiveTexts) -> Result<LiveState, LiveError> {
        let err = |dev: &IfName, what: &'static str| {
            let dev = dev.to_string();
            move |source| LiveError { dev, what, source }
        };
        let device = |dev: &IfName, q: &str, c: &str, f: &str| -> Result<DeviceState, LiveError> {
            Ok(DeviceState {
                dev: dev.clone(),
                qdiscs: parse_qdiscs(q).map_err(err(dev, "qdiscs"))?,
                classes: parse_classes(c).map_err(err(dev, "classes"))?,
                filters: parse_filters(f, None).map_err(err(dev, "filters"))?,
            })
        };
        Ok(LiveState {
            wan: device(wan, &texts.qdisc, &texts.class, &texts.filter)?,
            ingress_filters: parse_filters(&texts.filter_ingress, Some(Handle::INGRESS))
                .map_err(err(wan, "ingress filters"))?,
            ifb: match &texts.ifb {
                Some(i) => Some(device(&i.name, &i.qdisc, &i.class, &i.filter)?),
                None => None,
            },
        })
    }
}

impl DeviceState {
    /// The root qdisc (egress).
    pub fn root(&self) -> Option<&Qdisc> {
        self.qdiscs.iter().find(|q| q.root)
    }
    /// The `ingress` (or `clsact`) qdisc.
    pub fn ingress(&self) -> Option<&Qdisc> {
        self.qdiscs.iter().find(|q| q.is_ingress())
    }
    pub fn qdisc(&self, handle: Handle) -> Option<&Qdisc> {
        self.qdiscs
            .iter()
            .find(|q| q.handle == handle && !q.is_ingress())
    }
    /// The qdisc attached below a class.
    pub fn qdisc_under(&self, class: Handle) -> Option<&Qdisc> {
        self.qdiscs.iter().find(|q| q.parent == Some(class))
    }
    pub fn class(&self, handle: Handle) -> Option<&Class> {
        self.classes.iter().find(|c| c.handle == handle)
    }
    /// Whether anything other than the kernel's own default is attached at the root.
    pub fn is_shaped(&self) -> bool {
        self.root().is_some_and(|q| !q.is_kernel_default())
    }
}
