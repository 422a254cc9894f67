//! Two directions' options -> one `[interface.NAME]` table.
//!
//! sqm-scripts sets each direction on its own; unbloat's keys apply to both, with
//! `extra-egress` / `extra-ingress` for what one direction does differently (read back by the spec
//! with cake's or fq_codel's grammar, over the keys). So: a value both directions share, or the
//! only shaped direction has, becomes a key; values that differ go into each direction's extra
//! string as the words that mean them, generated here from typed values (never the file's text).
//! `ack-filter` is an upload key in unbloat, so the download's goes into `extra-ingress`;
//! dual-srchost up with dual-dsthost down is `isolation = "dual-host"`.

use super::dir::{DirWords, Link};
use super::recipe::Mapped;
use crate::linklayer::{Framing, LinkPreset};
use crate::model::AckFilter;
use crate::options::{Isolation, ShapeOptions};
use std::collections::BTreeMap;
use unbloat_units::Rate;

/// The table's options and, per TOML key, where its value came from.
pub fn table(m: &Mapped) -> (ShapeOptions, BTreeMap<String, Vec<String>>) {
    let (e, i) = (&m.egress, &m.ingress);
    let up = e.opts.up.unwrap_or(Rate::ZERO);
    let down = i.opts.down.unwrap_or(Rate::ZERO);
    let on = (!up.is_zero(), !down.is_zero());
    let mut t = Table::default();
    t.o.up = Some(up);
    t.o.down = Some(down);
    t.from("up", e, "up");
    t.from("down", i, "down");
    t.o.qdisc = Some(m.qdisc);
    t.o.tiers = m.tiers;
    for (key, text) in &m.sources {
        if *key != "tiers" || m.tiers.is_some() {
            t.src(key, text.clone());
        }
    }

    // Link layer: the numbers cake (or the size table) ends with.
    match split(&e.link.resolved(), &i.link.resolved(), on) {
        Split::Main(l) => {
            t.o.link = l.raw.then_some(LinkPreset::Raw);
            t.o.overhead = Some(l.overhead);
            t.o.mpu = Some(l.mpu);
            t.o.framing = Some(l.framing);
            for key in ["link", "overhead", "mpu", "framing"] {
                t.from(key, e, key);
                t.from(key, i, key);
            }
            if !l.raw {
                t.sources.remove("link");
            }
        }
        Split::Dirs(a, b) => {
            t.extra(
                true,
                a.map(link_words),
                e,
                &["link", "overhead", "mpu", "framing"],
            );
            t.extra(
                false,
                b.map(link_words),
                i,
                &["link", "overhead", "mpu", "framing"],
            );
        }
    }

    // Isolation: dual-srchost up and dual-dsthost down is unbloat's dual-host.
    let (ie, ii) = (e.opts.isolation, i.opts.isolation);
    if on == (true, true)
        && ie == Some(Isolation::DualSrchost)
        && ii == Some(Isolation::DualDsthost)
    {
        t.o.isolation = Some(Isolation::DualHost);
        t.from("isolation", e, "isolation");
        t.from("isolation", i, "isolation");
    } else {
        field(
            &mut t,
            on,
            e,
            i,
            "isolation",
            |o| o.isolation,
            |o, v| o.isolation = v,
            |v| vec![v.name().to_string()],
        );
    }
    field(
        &mut t,
        on,
        e,
        i,
        "nat",
        |o| o.nat,
        |o, v| o.nat = v,
        |v| vec![if v { "nat" } else { "nonat" }.into()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "diffserv",
        |o| o.diffserv,
        |o, v| o.diffserv = v,
        |v| vec![v.keyword().into()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "wash",
        |o| o.wash,
        |o, v| o.wash = v,
        |v| vec![if v { "wash" } else { "nowash" }.into()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "rtt",
        |o| o.rtt,
        |o, v| o.rtt = v,
        |v| vec!["rtt".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "split-gso",
        |o| o.split_gso,
        |o, v| o.split_gso = v,
        |v| vec![if v { "split-gso" } else { "no-split-gso" }.into()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "memlimit",
        |o| o.memlimit,
        |o, v| o.memlimit = v,
        |v| vec!["memlimit".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "target",
        |o| o.target,
        |o, v| o.target = v,
        |v| vec!["target".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "interval",
        |o| o.interval,
        |o, v| o.interval = v,
        |v| vec!["interval".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "quantum",
        |o| o.quantum,
        |o, v| o.quantum = v,
        |v| vec!["quantum".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "limit",
        |o| o.limit,
        |o, v| o.limit = v,
        |v| vec!["limit".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "flows",
        |o| o.flows,
        |o, v| o.flows = v,
        |v| vec!["flows".into(), v.to_string()],
    );
    field(
        &mut t,
        on,
        e,
        i,
        "memory-limit",
        |o| o.memory_limit,
        |o, v| o.memory_limit = v,
        |v| vec!["memory_limit".into(), v.to_string()],
    );

    // Keys of one direction only.
    if on.0 {
        t.o.ack_filter = e.opts.ack_filter;
        t.from("ack-filter", e, "ack-filter");
        t.o.ecn_egress = e.opts.ecn_egress;
        t.from("ecn-egress", e, "ecn-egress");
    }
    if on.1 {
        if let Some(a) = i.opts.ack_filter {
            t.extra(false, Some(vec![ack_word(a).into()]), i, &["ack-filter"]);
        }
        t.o.ingress_keyword = i.opts.ingress_keyword;
        t.from("ingress-keyword", i, "ingress-keyword");
        t.o.ecn_ingress = i.opts.ecn_ingress;
        t.from("ecn-ingress", i, "ecn-ingress");
    }
    let join = |w: &Vec<String>| (!w.is_empty()).then(|| w.join(" "));
    t.o.extra_egress = join(&t.extra_e);
    t.o.extra_ingress = join(&t.extra_i);
    (t.o, t.sources)
}

#[derive(Default)]
struct Table {
    o: ShapeOptions,
    sources: BTreeMap<String, Vec<String>>,
    extra_e: Vec<String>,
    extra_i: Vec<String>,
}

impl Table {
    fn src(&mut self, key: &str, text: String) {
        let v = self.sources.entry(key.to_string()).or_default();
        if !v.contains(&text) {
            v.push(text);
        }
    }
    /// The sources `d` has for `field`, as those of the TOML key `key`.
    fn from(&mut self, key: &str, d: &DirWords, field: &str) {
        for s in d.sources.get(field).into_iter().flatten() {
            self.src(key, s.clone());
        }
    }
    fn extra(&mut self, egress: bool, words: Option<Vec<String>>, d: &DirWords, fields: &[&str]) {
        let Some(words) = words else { return };
        let key = if egress {
            "extra-egress"
        } else {
            "extra-ingress"
        };
        for f in fields {
            self.from(key, d, f);
        }
        match egress {
            true => self.extra_e.extend(words),
            false => self.extra_i.extend(words),
        }
    }
}

enum Split<T> {
    Main(T),
    Dirs(Option<T>, Option<T>),
}

/// Where a value both directions may hold goes: a key when they agree or only one is shaped.
fn split<T: Clone + PartialEq>(e: &Option<T>, i: &Option<T>, on: (bool, bool)) -> Split<T> {
    let (e, i) = match on {
        (true, false) => (e.clone(), e.clone()),
        (false, true) => (i.clone(), i.clone()),
        _ => (e.clone(), i.clone()),
    };
    match (&e, &i) {
        (Some(a), Some(b)) if a == b => Split::Main(a.clone()),
        _ => Split::Dirs(e, i),
    }
}

#[allow(clippy::too_many_arguments)]
fn field<T: Clone + PartialEq>(
    t: &mut Table,
    on: (bool, bool),
    e: &DirWords,
    i: &DirWords,
    key: &str,
    get: impl Fn(&ShapeOptions) -> Option<T>,
    set: impl Fn(&mut ShapeOptions, Option<T>),
    words: impl Fn(T) -> Vec<String>,
) {
    match split(&get(&e.opts), &get(&i.opts), on) {
        Split::Main(v) => {
            set(&mut t.o, Some(v));
            t.from(key, e, key);
            t.from(key, i, key);
        }
        Split::Dirs(a, b) => {
            t.extra(true, a.map(&words), e, &[key]);
            t.extra(false, b.map(&words), i, &[key]);
        }
    }
}

fn ack_word(a: AckFilter) -> &'static str {
    a.keyword()
}

/// cake's words for a direction's own link layer.
fn link_words(l: Link) -> Vec<String> {
    let mut w = Vec::new();
    if l.raw {
        w.push("raw".to_string());
    }
    w.extend([
        "overhead".to_string(),
        l.overhead.to_string(),
        "mpu".to_string(),
        l.mpu.to_string(),
        match l.framing {
            Framing::Atm => "atm",
            Framing::Ptm => "ptm",
            Framing::None => "noatm",
        }
        .to_string(),
    ]);
    w
}
