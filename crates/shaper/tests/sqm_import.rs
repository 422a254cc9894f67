//! `unbloat config import-sqm` as golden files: every sqm config in `tests/sqm_import/input/`
//! (sqm-scripts' own samples from `platform/`, copied unchanged, and hand-written ones) is
//! imported, and the TOML, the notes and the plan of every table (`unbloat plan`'s script, built
//! from the TOML's options) are compared with `tests/sqm_import/expected/NAME.{toml,notes,plan}`;
//! an input the import refuses is compared with `NAME.error`. Regenerate after an intended change
//! with `UPDATE_GOLDEN=1 cargo test -p unbloat-shaper --test sqm_import`, and review the diff.
//!
//! Beyond the snapshots: every TOML is read back by unbloat's own config parser to the same
//! options and validated as `unbloat config check` does (disabled tables too, uncommented), every
//! `bad-*` input is refused, and the per-direction meaning of a few cases is checked on the
//! validated spec itself (what cake or fq_codel will hold), not on the text.

use std::path::{Path, PathBuf};
use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::model::{AckFilter, Diffserv, FlowMode};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::{ShaperSpec, Spec};
use unbloat_shaper::sqm_import::{self, render, Import};
use unbloat_units::Time;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sqm_import")
}

/// Every input file, by name, with its text.
fn inputs() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir().join("input"))
        .expect("tests/sqm_import/input")
        .map(|e| {
            let p = e.expect("entry").path();
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).expect("input is text");
            (name, text)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 20, "the inputs are there");
    v
}

fn import(name: &str, text: &str) -> Result<Import, sqm_import::ImportError> {
    sqm_import::import(text, name, &sqm_import::Options::default())
}

fn spec(iface: &unbloat_units::IfName, o: &ShapeOptions) -> Spec {
    Spec::new(iface.clone(), o).unwrap_or_else(|e| panic!("{iface}: {e}"))
}

/// The plan of every table, disabled ones too (marked), as `unbloat plan` prints it.
fn plans(imp: &Import) -> String {
    let mut out = String::new();
    for i in &imp.interfaces {
        if !i.enabled {
            out.push_str(&format!("# disabled in sqm: {} if uncommented\n", i.iface));
        }
        out.push_str(&Plan::build(&spec(&i.iface, &i.options)).render_shell());
    }
    out
}

fn diff(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut out = String::new();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => {}
            (x, y) => {
                if let Some(x) = x {
                    out.push_str(&format!("{:>4} - {x}\n", i + 1));
                }
                if let Some(y) = y {
                    out.push_str(&format!("{:>4} + {y}\n", i + 1));
                }
            }
        }
    }
    out
}

#[test]
fn sqm_import_golden_files() {
    let expected = dir().join("expected");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (name, text) in inputs() {
        let files: Vec<(&str, String)> = match import(&name, &text) {
            Ok(imp) => {
                let notes: String = imp.notes.iter().map(|n| format!("{n}\n")).collect();
                vec![
                    ("toml", render::toml(&imp, &name)),
                    ("notes", notes),
                    ("plan", plans(&imp)),
                ]
            }
            Err(e) => vec![("error", format!("{e}\n"))],
        };
        for ext in ["toml", "notes", "plan", "error"] {
            let path = expected.join(format!("{name}.{ext}"));
            let actual = files.iter().find(|(x, _)| *x == ext).map(|(_, t)| t);
            if update {
                match actual {
                    Some(t) => std::fs::write(&path, t).expect("write golden"),
                    None => {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                continue;
            }
            match (actual, std::fs::read_to_string(&path)) {
                (None, Err(_)) => {}
                (None, Ok(_)) => {
                    failures.push(format!("{name}.{ext} exists, but the import gave none"))
                }
                (Some(_), Err(e)) => failures.push(format!(
                    "{name}.{ext}: {e} (run with UPDATE_GOLDEN=1 to create it)"
                )),
                (Some(a), Ok(x)) if *a == x => {}
                (Some(a), Ok(x)) => failures.push(format!(
                    "{name}.{ext} differs (- golden, + now):\n{}",
                    diff(&x, a)
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What `unbloat start --config` would read from the TOML is what the import meant, and it
/// validates; a disabled table, uncommented, too.
/// The same import written as UCI (`import-sqm --uci`, for `/etc/config/unbloat`) reads back to
/// the options of every enabled queue, and a disabled one is there with `enabled '0'`.
#[test]
fn sqm_import_every_uci_is_read_back_by_the_config_parser() {
    let mut checked = 0;
    for (name, text) in inputs() {
        let Ok(imp) = import(&name, &text) else {
            continue;
        };
        let uci = render::uci(&imp, &name);
        let c = ConfigFile::parse(&uci, Path::new("/etc/config/unbloat"))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{uci}"));
        let enabled: Vec<_> = imp.interfaces.iter().filter(|i| i.enabled).collect();
        assert_eq!(c.interfaces.len(), enabled.len(), "{name}\n{uci}");
        for (read, meant) in c.interfaces.iter().zip(&enabled) {
            assert_eq!(read.name, meant.iface, "{name}");
            assert_eq!(
                read.options, meant.options,
                "{name}: {}\n{uci}",
                meant.iface
            );
        }
        let off = imp.interfaces.iter().filter(|i| !i.enabled).count();
        assert_eq!(
            uci.matches("option enabled '0'").count(),
            off,
            "{name}\n{uci}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn sqm_import_every_toml_is_read_back_by_the_config_parser() {
    let mut checked = 0;
    for (name, text) in inputs() {
        let Ok(imp) = import(&name, &text) else {
            continue;
        };
        let toml = render::toml(&imp, &name);
        let c = ConfigFile::parse(&toml, Path::new(&name))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{toml}"));
        let enabled: Vec<_> = imp.interfaces.iter().filter(|i| i.enabled).collect();
        assert_eq!(c.interfaces.len(), enabled.len(), "{name}");
        for (read, meant) in c.interfaces.iter().zip(&enabled) {
            assert_eq!(read.name, meant.iface, "{name}");
            assert_eq!(read.options, meant.options, "{name}: {}", meant.iface);
        }
        if !enabled.is_empty() {
            let specs = c
                .specs(&ShapeOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(specs.len(), enabled.len());
        }
        for i in imp.interfaces.iter().filter(|i| !i.enabled) {
            let on = sqm_import::Imported {
                enabled: true,
                ..i.clone()
            };
            let c = ConfigFile::parse(&render::table(&on), Path::new(&name)).expect("uncommented");
            assert_eq!(c.interfaces[0].options, i.options, "{name}: {}", i.iface);
            c.specs(&ShapeOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            // The commented-out form holds no table at all.
            let off = ConfigFile::parse(&render::table(i), Path::new(&name)).expect("comments");
            assert!(off.interfaces.is_empty(), "{name}");
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} imports checked");
}

/// Issue 15: a missing interface, an unknown script, a negative rate and their kind are clear
/// errors, and so are sqm-scripts' own sqm.conf and a default.conf that names no interface.
#[test]
fn sqm_import_bad_inputs_are_refused_with_the_option_named() {
    for (name, text) in inputs() {
        let bad = name.starts_with("bad-") || name.ends_with("sqm.conf") || name == "default.conf";
        let r = import(&name, &text);
        assert_eq!(bad, r.is_err(), "{name}: {:?}", r.map(|i| i.notes));
    }
    let err = |name: &str| {
        let text = std::fs::read_to_string(dir().join("input").join(name)).expect("input");
        import(name, &text).expect_err(name).to_string()
    };
    assert!(err("bad-missing-interface.uci").contains("queue 'wan': no interface"));
    assert!(err("bad-unknown-script.uci").contains("script 'ctinfo_4layercake.qos': not one of"));
    assert!(err("bad-negative-rate.uci")
        .starts_with("bad-negative-rate.uci:4: queue 'wan': download '-5000': a negative rate"));
    assert!(err("bad-rate.iface.conf").contains("UPLINK '10mbit': not a whole number of kbit/s"));
    assert!(err("default.conf").contains("no interface"));
    // With --iface, sqm-scripts' default.conf is a queue like any other.
    let text = std::fs::read_to_string(dir().join("input/default.conf")).expect("input");
    let with = |iface, i_mean_it| sqm_import::Options { iface, i_mean_it };
    let imp = sqm_import::import(&text, "default.conf", &with(Some("eth0"), false))
        .expect("with --iface");
    assert_eq!(imp.interfaces[0].iface.as_str(), "eth0");
    // A rate unbloat takes for a typo is imported when the user says so, and only then.
    let text = std::fs::read_to_string(dir().join("input/bad-tiny-rate.uci")).expect("input");
    let imp = sqm_import::import(&text, "t", &with(None, true)).expect("--i-mean-it");
    assert_eq!(imp.interfaces[0].options.i_mean_it, Some(true));
    assert!(render::toml(&imp, "t").contains("i-mean-it = true"));
    let text = std::fs::read_to_string(dir().join("input/several-queues.uci")).expect("input");
    let imp = sqm_import::import(&text, "s", &with(None, true)).expect("imports");
    assert!(imp.interfaces.iter().all(|i| i.options.i_mean_it.is_none()));
}

fn only(name: &str) -> (Import, Spec) {
    let text = std::fs::read_to_string(dir().join("input").join(name)).expect("input");
    let imp = import(name, &text).unwrap_or_else(|e| panic!("{e}"));
    let i = &imp.interfaces[0];
    let s = spec(&i.iface, &i.options);
    (imp, s)
}

fn cake(d: &Option<unbloat_shaper::spec::DirectionSpec>) -> &unbloat_shaper::cake::CakeParams {
    match d.as_ref().map(|d| &d.shaper) {
        Some(ShaperSpec::Cake(c)) => c,
        other => panic!("cake expected, got {other:?}"),
    }
}

/// sqm-scripts gives each direction its own words; the spec of the single TOML table must hold
/// the same per direction.
#[test]
fn sqm_import_per_direction_meaning_survives_one_table() {
    // layer_cake, eqdisc_opts diffserv4, sqm's defaults elsewhere: diffserv4 up; besteffort and
    // wash down (squash_ingress 1, squash_dscp 1).
    let (_, s) = only("layer-cake-defaults.uci");
    let (e, i) = (cake(&s.egress), cake(&s.ingress));
    assert_eq!((e.diffserv, e.wash), (Diffserv::Diffserv4, false));
    assert_eq!((i.diffserv, i.wash), (Diffserv::Besteffort, true));
    assert_eq!((e.link.overhead, e.link.mpu, e.link.raw), (38, 84, false));

    // dual-srchost up and dual-dsthost down, nat both, cake's ingress mode down, no wash.
    let (imp, s) = only("layer-cake-diffserv4.uci");
    assert_eq!(
        imp.interfaces[0].options.isolation,
        Some(unbloat_shaper::options::Isolation::DualHost)
    );
    let (e, i) = (cake(&s.egress), cake(&s.ingress));
    assert_eq!(
        (e.flow_mode, i.flow_mode),
        (FlowMode::DualSrchost, FlowMode::DualDsthost)
    );
    assert!(e.nat && i.nat && i.ingress && !i.wash && !e.ingress);
    assert_eq!(
        (e.diffserv, i.diffserv),
        (Diffserv::Diffserv4, Diffserv::Diffserv4)
    );

    // tc's units in option strings, the upload's ack-filter, the download's docsis words.
    let (_, s) = only("option-strings.uci");
    let (e, i) = (cake(&s.egress), cake(&s.ingress));
    assert_eq!(e.rtt, Time::from_micros(50), "tc reads `rtt 50` as 50 us");
    assert_eq!(
        (e.ack_filter, i.ack_filter),
        (AckFilter::Enabled, AckFilter::Disabled)
    );
    assert_eq!(
        (i.link.overhead, i.link.mpu, i.link.framing),
        (18, 64, Framing::None)
    );
    assert_eq!(
        (e.link.overhead, e.link.mpu),
        (38, 84),
        "linklayer none: unbloat's default"
    );

    // ATM for cake: on top of the IP packet, as sqm's `atm overhead 44 mpu 0`.
    let (_, s) = only("adsl-cake-atm.uci");
    let l = cake(&s.egress).link;
    assert_eq!(
        (l.raw, l.overhead, l.mpu, l.framing),
        (false, 44, 0, Framing::Atm)
    );

    // ATM through sqm's size table: from Linux's length (raw), the same 40 bytes.
    let (_, s) = only("adsl-htb-atm.uci");
    for d in [&s.egress, &s.ingress] {
        let Some(ShaperSpec::HtbFqCodel {
            link,
            tiers,
            fq_codel,
            ..
        }) = d.as_ref().map(|d| &d.shaper)
        else {
            panic!("htb")
        };
        assert_eq!(
            (link.raw, link.overhead, link.framing, *tiers),
            (true, 40, Framing::Atm, 3)
        );
        let _ = fq_codel;
    }
    let fq = |d: &Option<unbloat_shaper::spec::DirectionSpec>| match d.as_ref().map(|d| &d.shaper) {
        Some(ShaperSpec::HtbFqCodel { fq_codel, .. }) => fq_codel.clone(),
        _ => panic!("htb"),
    };
    let (e, i) = (fq(&s.egress), fq(&s.ingress));
    assert_eq!(
        (e.target, e.interval, e.ecn),
        (Time::from_millis(10), Time::from_millis(100), false)
    );
    assert_eq!((i.limit, i.ecn), (500, true));
}
