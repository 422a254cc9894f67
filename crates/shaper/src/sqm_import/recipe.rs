//! What an sqm recipe builds in each direction, from the real scripts (src/*.qos,
//! src/functions.sh, src/defaults.sh at sqm-scripts 95337de), as typed options per direction
//! ([`Mapped`]); [`super::factor`] then writes them as one TOML table.
//!
//! - Link layer (`get_cake_lla_string`, `get_stab_string`, `get_htb_adsll_string`): cake gets
//!   `[atm] overhead N mpu M` (N counted on top of the IP packet); HTB gets a size table
//!   (`stab ... overhead N linklayer L`), whose N is counted on top of the length Linux sees, the
//!   14-byte MAC header included on an Ethernet device: unbloat's `link = "raw"` with the same N
//!   is exactly that base, for cake and HTB alike, on any device.
//! - cake recipes: `cake bandwidth R <lla> ${EGRESS_CAKE_OPTS} ${EQDISC_OPTS}` and the same with
//!   `INGRESS_CAKE_OPTS`/`IQDISC_OPTS`; defaults.sh's `*_CAKE_OPTS` are `diffserv3 nat`;
//!   piece_of_cake adds `besteffort`, and on ingress `wash` when squash_dscp is 1; layer_cake adds
//!   `besteffort` on ingress when squash_ingress is 1 and `wash` when squash_dscp is 1.
//! - fq_codel under HTB (simple, simplest, simplest_tbf): see [`super::aqm`]; then the option
//!   string.
//!
//! The rule for defaults (see the module doc of [`crate::sqm_import`]): what shapes (qdisc, tiers,
//! tins, wash, compensation the file asks for, option-string words) is carried; tuning left at
//! sqm-scripts' defaults gets unbloat's defaults, with a note.

use super::ctx::Ctx;
use super::dir::{DirWords, LinkState};
use super::model::{Key, NoteKind, Script};
use super::words::{self, Words};
use crate::linklayer::Framing;
use crate::model::Direction;
use crate::options::Qdisc;
use unbloat_units::Rate;

/// One queue's shaping before it is written as a table.
#[derive(Debug, Clone)]
pub struct Mapped {
    pub qdisc: Qdisc,
    pub tiers: Option<u8>,
    pub egress: DirWords,
    pub ingress: DirWords,
    /// TOML key -> where its value came from, for keys of the whole table (qdisc, tiers).
    pub sources: Vec<(&'static str, String)>,
}

/// How the link-layer numbers are counted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Base {
    /// cake's own keywords: on top of the IP packet.
    Cake,
    /// A size table (or HTB's rate tables): on top of Linux's length.
    Linux,
}

/// The link-layer compensation sqm-scripts applies for this queue.
pub fn link(cx: &mut Ctx, qdisc: Qdisc) -> Result<LinkState, super::model::ImportError> {
    let layer = cx.plain(Key::Linklayer)?.unwrap_or("none");
    if layer == "none" {
        cx.note(
            Key::Linklayer,
            NoteKind::Default,
            "sqm-scripts compensates nothing (cake and HTB count Linux's own length); unbloat \
             assumes an Ethernet bottleneck unless told (link ethernet: overhead 38, mpu 84); \
             write link = \"raw\" to keep sqm-scripts' behaviour",
        );
        for key in [
            Key::Overhead,
            Key::TcMpu,
            Key::TcMtu,
            Key::TcTsize,
            Key::Llam,
        ] {
            cx.note_if_set(
                key,
                NoteKind::Ignored,
                "sqm-scripts uses it only with linklayer ethernet or atm",
            );
        }
        return Ok(LinkState::default());
    }
    if !matches!(layer, "ethernet" | "atm" | "adsl") {
        return Err(cx.bad(
            Key::Linklayer,
            "sqm-scripts knows none, ethernet and atm (tc's size table refuses anything else)",
        ));
    }
    let overhead: i64 = match cx.plain(Key::Overhead)? {
        None => 0,
        Some(v) => v
            .parse()
            .map_err(|_| cx.bad(Key::Overhead, "not a whole number of bytes"))?,
    };
    if !(-64..=256).contains(&overhead) {
        return Err(cx.bad(
            Key::Overhead,
            "out of range -64..256: unbloat takes what cake takes, for HTB too",
        ));
    }
    let mpu: i64 = match cx.plain(Key::TcMpu)? {
        None => 0,
        Some(v) => v
            .parse()
            .ok()
            .filter(|m| (0..=256).contains(m))
            .ok_or_else(|| cx.bad(Key::TcMpu, "not a whole number of bytes in 0..256"))?,
    };
    let llam = cx.plain(Key::Llam)?.unwrap_or("default");
    let base = match (llam, qdisc) {
        ("default" | "cake", Qdisc::Cake) => Base::Cake,
        ("tc_stab", _) | ("default" | "htb_private", Qdisc::FqCodel) => Base::Linux,
        (_, Qdisc::Cake) => {
            cx.note(Key::Llam, NoteKind::Warning, "with cake, sqm-scripts applies no compensation through this mechanism; imported with the compensation linklayer and overhead ask for, in cake's own keywords");
            Base::Cake
        }
        (_, Qdisc::FqCodel) => {
            cx.note(Key::Llam, NoteKind::Warning, "with HTB, sqm-scripts applies no compensation through this mechanism; imported with the compensation linklayer and overhead ask for, as a size table");
            Base::Linux
        }
    };
    match llam {
        "htb_private" if qdisc == Qdisc::FqCodel => cx.note(
            Key::Llam,
            NoteKind::Mapped,
            "HTB's own rate tables count like a size table: link = \"raw\" with the same numbers (unbloat builds a size table)",
        ),
        "tc_stab" if qdisc == Qdisc::Cake => cx.note(
            Key::Llam,
            NoteKind::Mapped,
            "a size table under cake counts from Linux's length: link = \"raw\" with the same numbers, in cake's own keywords",
        ),
        _ => cx.note_if_set(
            Key::Llam,
            NoteKind::Mapped,
            "unbloat compensates with cake's keywords for cake and a size table for HTB, as sqm-scripts' default does",
        ),
    }
    let atm = match (base, layer) {
        (_, "atm") | (Base::Linux, "adsl") => Framing::Atm,
        _ => Framing::None,
    };
    if layer == "adsl" && base == Base::Cake {
        cx.note(
            Key::Linklayer,
            NoteKind::Warning,
            "with cake, sqm-scripts adds ATM framing only for 'atm', so 'adsl' gets none: imported so",
        );
    }
    let raw = base == Base::Linux;
    let mut text = format!("overhead = {overhead}, mpu = {mpu}, framing = \"{atm}\"");
    if raw {
        text.push_str(", link = \"raw\": sqm-scripts' size table counts from Linux's length (the MAC header included), as unbloat's raw does");
    }
    cx.note(Key::Linklayer, NoteKind::Mapped, text);
    cx.note_if_set(
        Key::Overhead,
        NoteKind::Mapped,
        format!("overhead = {overhead}"),
    );
    cx.note_if_set(Key::TcMpu, NoteKind::Mapped, format!("mpu = {mpu}"));
    for (key, default) in [(Key::TcMtu, "2047"), (Key::TcTsize, "512")] {
        match cx.value(key) {
            Some(_) if !raw => cx.note(
                key,
                NoteKind::Ignored,
                "sqm-scripts uses it only in a size table, and cake gets none here",
            ),
            Some(v) if v == default => cx.note(key, NoteKind::Default, "unbloat's size table has mtu 2047 and tsize 512, sqm-scripts' defaults"),
            Some(_) => cx.note(key, NoteKind::NotMapped, "unbloat's size table has mtu 2047 and tsize 512 (sqm-scripts' defaults), not configurable; it sets the table's resolution, not the compensation"),
            None => {}
        }
    }
    Ok(LinkState {
        overhead,
        overhead_set: true,
        raw,
        mpu,
        framing: Some(atm),
        touched: true,
    })
}

/// (origin, words) pairs, read in order.
pub type RecipeWords = Vec<(String, String)>;

/// The words sqm-scripts' cake recipe gives each direction before the option strings: (egress,
/// ingress), each a list of (origin, words).
pub fn cake_recipe(
    cx: &mut Ctx,
    script: Script,
    squash_dscp: bool,
    squash_ingress: bool,
) -> (RecipeWords, RecipeWords) {
    let s = script.name().to_string();
    let mut e: RecipeWords = Vec::new();
    let mut i: RecipeWords = Vec::new();
    if script.forces_cake() {
        // defaults.sh: *_CAKE_OPTS="diffserv3 nat" unless a shell file sets them.
        for (key, list) in [
            (Key::EgressCakeOpts, &mut e),
            (Key::IngressCakeOpts, &mut i),
        ] {
            match cx.get(key) {
                Some(set) => {
                    list.push((set.name.clone(), set.value.clone()));
                    cx.note(
                        key,
                        NoteKind::Mapped,
                        "read word by word as the recipe's words",
                    );
                }
                None => list.push(("defaults.sh".into(), "diffserv3".into())),
            }
        }
        if cx.get(Key::EgressCakeOpts).is_none() || cx.get(Key::IngressCakeOpts).is_none() {
            cx.note_queue(
                NoteKind::Default,
                format!(
                    "{s} adds cake's `nat` (defaults.sh: diffserv3 nat) to its triple-isolate; \
                     unbloat decides isolation and nat from the machine when it starts \
                     (dual-host with nat behind a masquerade, per flow on a machine that \
                     forwards nothing); say isolation = ... and nat = ... to fix them"
                ),
            );
        }
    }
    let wash_note = |cx: &mut Ctx, how: &str| {
        cx.note(Key::SquashDscp, NoteKind::Mapped, how.to_string());
    };
    match script {
        Script::PieceOfCake => {
            e.push((s.clone(), "besteffort".into()));
            i.push((s.clone(), "besteffort".into()));
            cx.note_if_set(
                Key::SquashIngress,
                NoteKind::Ignored,
                "piece_of_cake.qos has one tin both ways anyway",
            );
        }
        Script::LayerCake => {
            if squash_ingress {
                i.push(("squash_ingress 1".into(), "besteffort".into()));
            }
            cx.note(
                Key::SquashIngress,
                NoteKind::Mapped,
                if squash_ingress {
                    "DSCP ignored on the download: besteffort there"
                } else {
                    "DSCP tins on the download too"
                },
            );
        }
        Script::Simple => {
            // simple.qos's cake lines carry no tin word: cake's own default, diffserv3.
            e.push(("cake's default".into(), "diffserv3".into()));
            i.push(match squash_ingress {
                true => ("squash_ingress 1".into(), "besteffort".into()),
                false => ("cake's default".into(), "diffserv3".into()),
            });
            cx.note(
                Key::SquashIngress,
                NoteKind::Mapped,
                if squash_ingress {
                    "DSCP ignored on the download: besteffort there"
                } else {
                    "cake's default tins (diffserv3) on the download"
                },
            );
            if squash_dscp {
                // simple.qos clears DSCP with an iptables rule after the IFB: what LAN hosts
                // see is what cake's wash leaves.
                i.push(("squash_dscp 1".into(), "wash".into()));
                wash_note(cx, "sqm-scripts clears DSCP on the download with an iptables rule; cake's wash on the download does the same for LAN hosts");
            } else {
                wash_note(cx, "DSCP marks kept on the download");
            }
        }
        Script::Simplest | Script::SimplestTbf => {
            e.push((s.clone(), "besteffort".into()));
            i.push((s.clone(), "besteffort".into()));
            for key in [Key::SquashDscp, Key::SquashIngress] {
                cx.note_if_set(key, NoteKind::Ignored, "simplest.qos does not look at DSCP");
            }
        }
    }
    if script.forces_cake() {
        if squash_dscp {
            i.push(("squash_dscp 1".into(), "wash".into()));
            wash_note(cx, "DSCP cleared on the download: wash there");
        } else {
            wash_note(cx, "DSCP marks kept on the download");
        }
    }
    (e, i)
}

/// Read the recipe's words and then the option string into one direction.
pub fn apply_words(
    cx: &mut Ctx,
    dir: &mut DirWords,
    recipe: &[(String, String)],
    opts_key: Key,
    qdisc: Qdisc,
    direction: Direction,
) -> Result<(), super::model::ImportError> {
    let label = cx.q.label.clone();
    for (origin, text) in recipe {
        words::apply(
            dir,
            &Words { origin, text },
            qdisc,
            direction,
            &label,
            &mut cx.notes,
        );
    }
    if let Some(text) = cx.plain(opts_key)? {
        let origin = cx.get(opts_key).map(|s| s.name.clone()).unwrap_or_default();
        let before = cx.notes.len();
        words::apply(
            dir,
            &Words {
                origin: &origin,
                text,
            },
            qdisc,
            direction,
            &label,
            &mut cx.notes,
        );
        let left_out = cx.notes.len() - before;
        cx.note(
            opts_key,
            NoteKind::Mapped,
            match left_out {
                0 => {
                    "read word by word into the typed options (each line's comment names its words)"
                        .to_string()
                }
                n => format!(
                    "read word by word into the typed options; {n} word(s) left out, noted above"
                ),
            },
        );
    }
    Ok(())
}

/// sqm's rate options: kbit/s as a whole number, 0 for "not shaped".
pub fn rate(cx: &mut Ctx, key: Key, default_kbit: u64) -> Result<Rate, super::model::ImportError> {
    let Some(v) = cx.plain(key)? else {
        cx.note(
            key,
            NoteKind::Warning,
            format!(
                "not set: sqm-scripts then shapes at its built-in {default_kbit} kbit/s \
                 (defaults.sh), surely not your line's rate; imported as \"{default_kbit}kbit\": \
                 set your own"
            ),
        );
        return Ok(Rate::from_kbit(default_kbit));
    };
    if let Some(abs) = v.strip_prefix('-') {
        if !abs.is_empty() && abs.chars().all(|c| c.is_ascii_digit()) {
            return Err(cx.bad(
                key,
                "a negative rate: give kbit/s, or 0 for no shaping this way",
            ));
        }
    }
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit()) {
        return Err(cx.bad(
            key,
            "not a whole number of kbit/s (sqm-scripts' unit, written without one: 50000 is 50 Mbit/s)",
        ));
    }
    let kbit: u64 = v
        .parse()
        .ok()
        .filter(|k| *k <= 100_000_000)
        .ok_or_else(|| cx.bad(key, "more than 100 Gbit/s, faster than any access link"))?;
    let toml = if key == Key::Download { "down" } else { "up" };
    cx.note(
        key,
        NoteKind::Mapped,
        match kbit {
            0 => format!("{toml} = 0: not shaped this way, as in sqm-scripts"),
            k => format!("{toml} = \"{k}kbit\" (sqm-scripts' kbit/s)"),
        },
    );
    Ok(Rate::from_kbit(kbit))
}
