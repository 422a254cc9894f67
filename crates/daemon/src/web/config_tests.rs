//! The config form's editing, validation and apply, without a daemon.

use super::*;

const FILE: &str = "# my router\n[defaults]\nqdisc = \"cake\"\n\n\
                    [interface.wan0]\ndown = \"20mbit\" # from the ISP's sheet\nup = \"5mbit\"\n";

fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn error_of(text: &str) -> FieldError {
    let e = ConfigFile::parse(text, Path::new("/etc/unbloat/unbloat.toml"))
        .and_then(|f| f.specs(&Default::default()))
        .expect_err("an invalid file");
    field_error(text, &PlanError::from(e))
}

#[test]
fn a_form_edit_keeps_comments_and_untouched_keys() {
    let new = edit(
        FILE,
        "wan0",
        &values(&[
            ("down", "30mbit"),
            ("up", "5mbit"),
            ("nat", "true"),
            ("wash", ""),
        ]),
    )
    .unwrap();
    assert!(
        new.starts_with("# my router\n[defaults]\nqdisc = \"cake\"\n"),
        "{new}"
    );
    assert!(
        new.contains("down = \"30mbit\" # from the ISP's sheet\n"),
        "{new}"
    );
    assert!(new.contains("up = \"5mbit\"\nnat = true\n"), "{new}");
    let gone = edit(&new, "wan0", &values(&[("nat", "")])).unwrap();
    assert!(!gone.contains("nat"), "{gone}");
    let added = edit(FILE, "ppp0", &values(&[("up", "2mbit"), ("overhead", "8")])).unwrap();
    assert!(
        added.ends_with("[interface.ppp0]\nup = \"2mbit\"\noverhead = 8\n"),
        "{added}"
    );
    assert!(!added.contains("[interface]\n"), "{added}");
}

#[test]
fn errors_land_on_their_interface_and_key() {
    let bad = |v: &[(&str, &str)]| error_of(&edit(FILE, "wan0", &values(v)).unwrap());
    let e = bad(&[("down", "-5mbit")]);
    assert_eq!(
        (e.iface.as_deref(), e.key.as_deref()),
        (Some("wan0"), Some("down"))
    );
    assert!(e.message.contains("negative"), "{e:?}");
    let e = bad(&[("down", "20000")]);
    assert_eq!(
        (e.iface.as_deref(), e.key.as_deref()),
        (Some("wan0"), Some("down"))
    );
    assert!(e.message.contains("no unit"), "{e:?}");
    let e = bad(&[("down", "5kbit")]);
    assert_eq!(
        (e.iface.as_deref(), e.key.as_deref()),
        (Some("wan0"), Some("down"))
    );
    assert!(e.message.contains("below 8kbit"), "{e:?}");
    let e = bad(&[("overhead", "lots")]);
    assert_eq!(e.key.as_deref(), Some("overhead"), "{e:?}");
    let e = bad(&[("flowz", "3")]);
    assert_eq!(
        (e.iface.as_deref(), e.key.as_deref()),
        (Some("wan0"), Some("flowz"))
    );
    let e = error_of("[defaults]\nnat = 3\n[interface.wan0]\nup = \"5mbit\"\n");
    assert_eq!(
        (e.iface, e.key.as_deref(), e.line),
        (None, Some("nat"), Some(2))
    );
    let e = error_of("[interface.\"eth0.2\"]\nup = \"1gbit\"\ndown = \"1kbit\"\n");
    assert_eq!(e.iface.as_deref(), Some("eth0.2"), "{e:?}");
}

#[test]
fn every_field_and_choice_is_one_the_validator_takes() {
    use unbloat_shaper::options::{Web, OPTIONS};
    // The form's keys, and the ones the declarations keep for the TOML editor (a list).
    let mut keys: Vec<&str> = fields().iter().map(|f| f.key).collect();
    keys.extend(
        OPTIONS
            .iter()
            .filter(|o| o.web == Web::Hidden)
            .map(|o| o.key),
    );
    keys.sort();
    // Every key the config file has: the options with each set (some are left out unset).
    let mut every = unbloat_shaper::options::ShapeOptions::default();
    for o in OPTIONS {
        o.field.set(&mut every, o.example).unwrap();
    }
    let all = serde_json::to_value(every).unwrap();
    let mut want: Vec<&str> = all
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    want.sort();
    assert_eq!(keys, want, "the form must offer every key of ShapeOptions");
    for field in fields() {
        for c in &field.choices {
            let text = edit("", "eth0", &values(&[(field.key, c)])).unwrap();
            let parsed = ConfigFile::parse(&text, Path::new("x.toml"));
            assert!(
                !matches!(parsed, Err(ConfigError::Syntax { .. })),
                "{}: {c}: {parsed:?}",
                field.key
            );
        }
    }
}

#[test]
fn a_refused_reload_puts_the_old_file_back_and_a_bad_value_writes_nothing() {
    use crate::control::Answer;
    use crate::keeper::Refusal;
    use std::os::unix::fs::PermissionsExt;
    let scratch = crate::web::scratch::Scratch::new("webcfg");
    let dir = scratch.path();
    let path = dir.join("unbloat.toml");
    std::fs::write(&path, FILE).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let change = |v: &[(&str, &str)]| Change {
        interface: Some("wan0".into()),
        values: values(v),
        ..Change::default()
    };
    let never = || -> Option<Answer> { panic!("no reload for a bad value") };
    let (status, out) = apply(&path, &change(&[("down", "-5mbit")]), &never);
    assert_eq!((status, out.ok), (422, false));
    assert_eq!(out.errors[0].key.as_deref(), Some("down"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), FILE);

    let refuse = || {
        Some(Answer::Refused(Refusal {
            reason: "the kernel said no".into(),
            bad_config: false,
        }))
    };
    let (status, out) = apply(&path, &change(&[("down", "30mbit")]), &refuse);
    assert_eq!((status, out.restored), (409, true), "{out:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), FILE);

    let seen = std::sync::Mutex::new(String::new());
    let accept = || {
        *seen.lock().unwrap() = std::fs::read_to_string(&path).unwrap();
        Some(Answer::Reloaded(Reloaded {
            changed: vec!["wan0".into()],
            ..Reloaded::default()
        }))
    };
    let (status, out) = apply(&path, &change(&[("down", "30mbit")]), &accept);
    assert_eq!((status, out.applied), (200, true), "{out:?}");
    assert!(
        seen.lock().unwrap().contains("30mbit"),
        "the reload saw the new file"
    );
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o640,
        "the file keeps its mode"
    );
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        1,
        "no temporary file left"
    );
}

/// A UCI file (OpenWrt's /etc/config/unbloat) is shown as such, read-only, with how to change
/// it; a form edit of it is refused, so its text is never rewritten as TOML.
#[test]
fn a_uci_config_is_read_only_here_and_says_how_to_change_it() {
    let scratch = crate::web::scratch::Scratch::new("webuci");
    let path = scratch.path().join("unbloat");
    let uci = "config interface 'wan'\n\toption interface 'eth0'\n\toption down '20mbit'\n";
    std::fs::write(&path, uci).unwrap();
    let v = view(&path);
    let e = v.error.expect("an error for the form");
    assert!(
        e.message.contains("OpenWrt's UCI") && e.message.contains("uci commit"),
        "{e:?}"
    );
    assert!(edit(uci, "eth0", &values(&[("down", "30mbit")])).is_err());
}
