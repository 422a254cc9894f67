//! Two directions' options -> one `[interface.NAME]` table.
//!
//! sqm-scripts sets each direction on its own; unbloat's keys apply to both, with
//! `extra-egress` / `extra-ingress` for what one direction does differently (read back by the spec
//! with cake's or fq_codel's grammar, over the keys). So: a value both directions share, or the
//! only shaped direction has, becomes a key; values that differ go into each direction's extra
//! string as the words that mean them, generated here from typed values (never the file's text).
//! An upload key (the options' declarations say which) takes the upload's value, and the
//! download's goes into `extra-ingress`; dual-srchost up with dual-dsthost down is
//! `isolation = "dual-host"`.

use super::dir::{DirWords, Link};
use super::recipe::Mapped;
use crate::linklayer::LinkPreset;
use crate::model::Direction;
use crate::options::{Dir, Isolation, Opt, Qdisc, ShapeOptions, Words, OPTIONS};
use std::collections::BTreeMap;
use unbloat_units::Rate;

/// The link layer's keys: cake's words for them add up ([`super::dir::LinkState`]), and they
/// are placed together.
const LINK_KEYS: &[&str] = &["link", "overhead", "mpu", "framing", "vlan"];

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
    }
    // The other keys both directions may hold, in table order; then the keys of one direction.
    let own = |opt: &&Opt| {
        !matches!(opt.words, Words::None)
            && !LINK_KEYS.contains(&opt.key)
            && !opt.field.is_set(&t.o)
    };
    let (both, one): (Vec<&Opt>, Vec<&Opt>) = OPTIONS
        .iter()
        .filter(own)
        .partition(|opt| opt.dir == Dir::Both);
    for opt in both {
        field(&mut t, on, e, i, opt, m.qdisc);
    }
    for opt in one {
        let take = |t: &mut Table, d: &DirWords| {
            opt.field.copy(&mut t.o, &d.opts);
            t.from(opt.key, d, opt.key);
        };
        match opt.dir {
            Dir::Only(Direction::Egress) if on.0 => take(&mut t, e),
            Dir::Only(Direction::Ingress) if on.1 => take(&mut t, i),
            Dir::UploadKey => {
                if on.0 {
                    take(&mut t, e);
                }
                if on.1 {
                    t.extra(false, opt.words_for(m.qdisc, &i.opts), i, &[opt.key]);
                }
            }
            _ => {}
        }
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

/// A key both directions may hold: the key when they agree (or one is shaped), else each
/// direction's value in its extra string, as the qdisc's words.
fn field(t: &mut Table, on: (bool, bool), e: &DirWords, i: &DirWords, opt: &Opt, q: Qdisc) {
    let (a, b) = match on {
        (true, false) => (&e.opts, &e.opts),
        (false, true) => (&i.opts, &i.opts),
        _ => (&e.opts, &i.opts),
    };
    if opt.field.is_set(a) && opt.field.same(a, b) {
        opt.field.copy(&mut t.o, a);
        t.from(opt.key, e, opt.key);
        t.from(opt.key, i, opt.key);
    } else {
        t.extra(true, opt.words_for(q, a), e, &[opt.key]);
        t.extra(false, opt.words_for(q, b), i, &[opt.key]);
    }
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
        l.framing.cake_keyword().to_string(),
    ]);
    w
}
