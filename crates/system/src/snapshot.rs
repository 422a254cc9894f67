//! What a WAN device and its IFB held before unbloat touched them, read over rtnetlink (no
//! process), so that a failed or interrupted change can prove it put everything back, and so that
//! a qdisc unbloat did not create is recognised before anything replaces it.
//!
//! A [`Snapshot`] is configuration only: each qdisc's kind, place and the bytes of its
//! `TCA_OPTIONS` and `TCA_STAB`, with what changes by itself taken out (handles the kernel picks,
//! HTB's count of direct packets). Two snapshots of an unchanged device compare equal.

use crate::rtnl::{Link, RawQdisc, Rtnl, RtnlError};
use serde::{Deserialize, Serialize};

use unbloat_shaper::qdisc::htb::attr::{INIT as TCA_HTB_INIT, INIT_DIRECT_PKTS as HTB_DIRECT_PKTS};
use unbloat_shaper::qdisc::netlink::{TC_H_INGRESS, TC_H_ROOT};

/// One qdisc's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscEntry {
    pub kind: String,
    /// None when the kernel chose it (majors from 0x8000 up, net/sched/sch_api.c
    /// `qdisc_alloc_handle`): they differ each time the same setup is created.
    pub handle: Option<u32>,
    pub parent: u32,
    /// `TCA_OPTIONS` and `TCA_STAB`, hex.
    pub options: String,
    pub stab: String,
}

impl QdiscEntry {
    fn from_raw(q: &RawQdisc) -> QdiscEntry {
        let mut options = q.options.clone();
        if q.kind == "htb" {
            zero_counter(&mut options, TCA_HTB_INIT, HTB_DIRECT_PKTS);
        }
        QdiscEntry {
            kind: q.kind.clone(),
            handle: (q.handle >> 16 < 0x8000).then_some(q.handle),
            parent: q.parent,
            options: hex(&options),
            stab: hex(&q.stab),
        }
    }

    pub fn is_root(&self) -> bool {
        self.parent == TC_H_ROOT
    }

    pub fn is_ingress(&self) -> bool {
        self.parent == TC_H_INGRESS
    }

    /// Whether the kernel puts a qdisc like this on a device by itself (`noqueue` on virtual
    /// devices; `pfifo_fast`, `fq_codel`, `fq`, `mq` ... from `net.core.default_qdisc`, handle 0).
    /// Deleting unbloat's root brings such a default back: that is what "as it was" means.
    pub fn is_default(&self) -> bool {
        self.kind == "noqueue"
            || (self.handle == Some(0)
                && matches!(
                    self.kind.as_str(),
                    "pfifo_fast" | "fq_codel" | "fq" | "mq" | "pfifo" | "sfq"
                ))
    }

    /// `cake (kernel's handle) root`, for messages.
    pub fn summary(&self) -> String {
        let handle = match self.handle {
            Some(h) => format!("{:x}:", h >> 16),
            None => "(kernel's handle)".into(),
        };
        let place = if self.is_root() {
            "root"
        } else if self.is_ingress() {
            "ingress"
        } else {
            "child"
        };
        format!("{} {handle} {place}", self.kind)
    }
}

/// A device's qdiscs; and its IFB's, when the IFB exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub wan: Vec<QdiscEntry>,
    /// The IFB's name and qdiscs; None when it does not exist (or no IFB is involved).
    pub ifb: Option<(String, Vec<QdiscEntry>)>,
}

impl Snapshot {
    /// Reads `wan`, and `ifb` if it exists, from the kernel.
    pub fn take(rtnl: &Rtnl, wan: &Link, ifb: Option<&str>) -> Result<Snapshot, RtnlError> {
        let read = |index| -> Result<Vec<QdiscEntry>, RtnlError> {
            let mut q: Vec<QdiscEntry> = rtnl
                .qdiscs(index)?
                .iter()
                .map(QdiscEntry::from_raw)
                .collect();
            q.sort_by_key(|e| (e.parent, e.handle));
            Ok(q)
        };
        let ifb = match ifb {
            Some(name) => match rtnl.link(name)? {
                Some(link) => Some((name.to_string(), read(link.index)?)),
                None => None,
            },
            None => None,
        };
        Ok(Snapshot {
            wan: read(wan.index)?,
            ifb,
        })
    }

    pub fn root(&self) -> Option<&QdiscEntry> {
        root_of(&self.wan)
    }

    /// The root qdisc, if it is not one the kernel puts there by itself.
    pub fn custom_root(&self) -> Option<&QdiscEntry> {
        self.root().filter(|q| !q.is_default())
    }

    /// The `ffff:` ingress (or clsact) qdisc, if any.
    pub fn ingress(&self) -> Option<&QdiscEntry> {
        self.wan.iter().find(|q| q.is_ingress())
    }

    /// The IFB's root qdisc, if the IFB exists.
    pub fn ifb_root(&self) -> Option<&QdiscEntry> {
        self.ifb.as_ref().and_then(|(_, q)| root_of(q))
    }

    /// Whether `other` holds the same setup: equal, once every qdisc the kernel puts on a device
    /// by itself ([`QdiscEntry::is_default`]) counts as none. A device that comes up during a
    /// change (pppd re-dialling, a link's carrier back) gets its default qdisc from the kernel
    /// then: it was "qdiscs []" while down, "pfifo_fast 0: root" after. That is the kernel's
    /// business, not something unbloat's undo left or could remove.
    pub fn same_setup(&self, other: &Snapshot) -> bool {
        fn ours(q: &[QdiscEntry]) -> Vec<&QdiscEntry> {
            q.iter().filter(|e| !e.is_default()).collect()
        }
        let same_ifb = match (&self.ifb, &other.ifb) {
            (Some((a, qa)), Some((b, qb))) => a == b && ours(qa) == ours(qb),
            (a, b) => a.is_none() && b.is_none(),
        };
        ours(&self.wan) == ours(&other.wan) && same_ifb
    }

    /// What differs from `other`, for the message when a rollback did not restore everything.
    pub fn describe_difference(&self, other: &Snapshot) -> String {
        let show = |s: &Snapshot| {
            let kinds: Vec<String> = s.wan.iter().map(QdiscEntry::summary).collect();
            let ifb = match &s.ifb {
                Some((name, q)) => format!(
                    "{name} [{}]",
                    q.iter()
                        .map(QdiscEntry::summary)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "absent".into(),
            };
            format!("qdiscs [{}], IFB {ifb}", kinds.join(", "))
        };
        format!("before: {}; now: {}", show(self), show(other))
    }
}

fn root_of(q: &[QdiscEntry]) -> Option<&QdiscEntry> {
    q.iter().find(|e| e.is_root())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Zeroes `range` of the payload of the top-level attribute `kind` in a run of netlink
/// attributes (each: u16 length including the 4-byte header, u16 type, payload padded to 4).
fn zero_counter(attrs: &mut [u8], kind: u16, range: std::ops::Range<usize>) {
    let mut at = 0;
    while at + 4 <= attrs.len() {
        let len = u16::from_ne_bytes([attrs[at], attrs[at + 1]]) as usize;
        let ty = u16::from_ne_bytes([attrs[at + 2], attrs[at + 3]]) & 0x3fff;
        if len < 4 || at + len > attrs.len() {
            return;
        }
        if ty == kind && 4 + range.end <= len {
            attrs[at + 4 + range.start..at + 4 + range.end].fill(0);
        }
        at += (len + 3) & !3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: &str, handle: u32, parent: u32, options: Vec<u8>) -> RawQdisc {
        RawQdisc {
            handle,
            parent,
            kind: kind.into(),
            options,
            stab: vec![],
        }
    }

    #[test]
    fn defaults_are_recognised_and_custom_roots_are_not() {
        let e = |kind, handle| QdiscEntry::from_raw(&raw(kind, handle, TC_H_ROOT, vec![]));
        assert!(e("noqueue", 0).is_default());
        assert!(e("mq", 0).is_default());
        assert!(!e("htb", 0x1_0000).is_default());
        assert!(!e("cake", 0x8001_0000).is_default());
        // fq_codel put there by a person has a handle of its own.
        assert!(!e("fq_codel", 0x8002_0000).is_default());
    }

    /// Bug (CI, the daemon's re-dial test): a change interrupted while ppp0 came up could not be
    /// "undone", because the device had no qdisc when its snapshot was taken and the kernel's
    /// default pfifo_fast after. A default qdisc, alone or as mq's children, is no setup; a
    /// qdisc of anyone's choosing, an ingress or an IFB's root still differ.
    #[test]
    fn a_default_qdisc_the_kernel_attached_is_the_same_setup_as_none() {
        let e = |kind, handle, parent| QdiscEntry::from_raw(&raw(kind, handle, parent, vec![]));
        let snap = |wan: Vec<QdiscEntry>| Snapshot { wan, ifb: None };
        let down = snap(vec![]);
        let up = snap(vec![e("pfifo_fast", 0, TC_H_ROOT)]);
        assert!(down.same_setup(&up) && up.same_setup(&down));
        assert_ne!(down, up, "the snapshots themselves still differ");
        let multiqueue = snap(vec![
            e("mq", 0, TC_H_ROOT),
            e("fq_codel", 0, 0x1),
            e("fq_codel", 0, 0x2),
        ]);
        assert!(down.same_setup(&multiqueue));
        assert!(!down.same_setup(&snap(vec![e("cake", 0x8001_0000, TC_H_ROOT)])));
        assert!(!down.same_setup(&snap(vec![e("fq_codel", 0x8002_0000, TC_H_ROOT)])));
        assert!(!up.same_setup(&snap(vec![e("ingress", 0xffff_0000, TC_H_INGRESS)])));
        let with_ifb = |q: Vec<QdiscEntry>| Snapshot {
            wan: vec![],
            ifb: Some(("ifb4ppp0".into(), q)),
        };
        assert!(with_ifb(vec![]).same_setup(&with_ifb(vec![e("noqueue", 0, TC_H_ROOT)])));
        assert!(!with_ifb(vec![]).same_setup(&with_ifb(vec![e("cake", 0x8003_0000, TC_H_ROOT)])));
        assert!(
            !down.same_setup(&with_ifb(vec![])),
            "an IFB that was not there is not the same"
        );
    }

    #[test]
    fn kernel_chosen_handles_do_not_make_snapshots_differ_but_chosen_ones_do() {
        let cake = |h| QdiscEntry::from_raw(&raw("cake", h, TC_H_ROOT, vec![1, 2]));
        assert_eq!(cake(0x8002_0000), cake(0x8007_0000));
        assert_ne!(cake(0x1_0000), cake(0x2_0000));
    }

    #[test]
    fn htbs_direct_packet_count_is_traffic_not_configuration() {
        // TCA_HTB_INIT (24 bytes: header + tc_htb_glob) then TCA_HTB_DIRECT_QLEN (8 bytes).
        let glob = |direct: u32| {
            let mut a = vec![];
            a.extend(24u16.to_ne_bytes());
            a.extend(TCA_HTB_INIT.to_ne_bytes());
            for v in [3u32, 10, 0x12, 0, direct] {
                a.extend(v.to_ne_bytes());
            }
            a.extend(8u16.to_ne_bytes());
            a.extend(4u16.to_ne_bytes());
            a.extend(1000u32.to_ne_bytes());
            a
        };
        let htb = |d| QdiscEntry::from_raw(&raw("htb", 0x1_0000, TC_H_ROOT, glob(d)));
        assert_eq!(htb(0), htb(57));
        let mut other = glob(0);
        other[12] = 0x13; // defcls
        assert_ne!(
            htb(0),
            QdiscEntry::from_raw(&raw("htb", 0x1_0000, TC_H_ROOT, other))
        );
    }
}
