//! `tune --save-as`'s edit: a new network added with the run's keys and the gateway, a
//! re-tune in place, and every refusal leaving no text.

use std::path::Path;

use unbloat_units::{IfName, Rate};

use super::*;
use crate::config::ConfigFile;
use crate::linklayer::Framing;
use crate::network::{Networks, Sighting};

const PATH: &str = "/etc/unbloat/unbloat.toml";
const FILE: &str =
    "# the laptop\n[interface.wlan0]\ndown = \"20mbit\" # a café's guess\nup = \"5mbit\"\n\
                    unknown_network = \"interface\"\n";

fn wlan0() -> IfName {
    "wlan0".parse().unwrap()
}

fn mac(s: &str) -> Mac {
    s.parse().unwrap()
}

fn tuned() -> ShapeOptions {
    ShapeOptions {
        down: Some(Rate::from_mbit(78)),
        up: Some(Rate::from_kbit(19_950)),
        framing: Some(Framing::Ptm),
        overhead: Some(30),
        mpu: Some(0),
        ..ShapeOptions::default()
    }
}

fn save_of(text: &str, name: &str, gw: &str) -> Result<Saved, SaveError> {
    save(
        text,
        Path::new(PATH),
        name,
        &wlan0(),
        mac(gw),
        &tuned(),
        "unbloat tune wlan0 against far.example",
    )
}

#[test]
fn a_new_network_is_added_at_the_end_and_the_rest_stays_byte_for_byte() {
    let saved = save_of(FILE, "home", "aa:bb:cc:dd:ee:01").unwrap();
    assert!(!saved.retuned);
    assert!(saved.text.starts_with(FILE), "{}", saved.text);
    assert_eq!(
        &saved.text[FILE.len()..],
        "\n# unbloat tune wlan0 against far.example\n[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\n\
         interface = \"wlan0\"\ndown = \"78000kbit\"\nup = \"19950kbit\"\noverhead = 30\nmpu = 0\nframing = \"ptm\"\n"
    );
    let c = ConfigFile::parse(&saved.text, Path::new(PATH)).unwrap();
    let seen = Sighting {
        gateway: Some(mac("aa:bb:cc:dd:ee:01")),
        ..Sighting::default()
    };
    let (home, _) = recognise(&c.networks, &wlan0(), &seen).unwrap();
    let on = Networks::options(home, &c.interface(&wlan0()).unwrap().options);
    assert_eq!(on.down, Some(Rate::from_kbit(78_000)));
    assert_eq!(on.framing, Some(Framing::Ptm));
}

#[test]
fn a_retune_replaces_the_runs_keys_in_place_and_keeps_the_users_own() {
    let text = format!(
        "{FILE}\n[network.home]\n# the ISP's box\ngateway = \"aa:bb:cc:dd:ee:01\"\ndown = \"60mbit\"\n\
         link = \"vdsl2\"\ndiffserv = \"diffserv4\" # mine\n"
    );
    // The same gateway: its keys change where they stand, the old link preset goes.
    let saved = save_of(&text, "home", "aa:bb:cc:dd:ee:01").unwrap();
    assert!(saved.retuned);
    assert!(
        saved
            .text
            .contains("# the ISP's box\ngateway = \"aa:bb:cc:dd:ee:01\"\ndown = \"78000kbit\"\n"),
        "{}",
        saved.text
    );
    assert!(
        saved.text.contains("diffserv = \"diffserv4\" # mine\n"),
        "{}",
        saved.text
    );
    assert!(!saved.text.contains("link ="), "{}", saved.text);
    assert!(
        !saved.text.contains("# unbloat tune"),
        "no second note: {}",
        saved.text
    );
    // Another gateway (a new router at home) joins the list: the old one still recognises it.
    let saved = save_of(&text, "home", "aa:bb:cc:dd:ee:02").unwrap();
    assert!(
        saved
            .text
            .contains("gateway = [\"aa:bb:cc:dd:ee:01\", \"aa:bb:cc:dd:ee:02\"]"),
        "{}",
        saved.text
    );
}

#[test]
fn each_refusal_names_what_to_do_and_gives_no_text() {
    let long = "n".repeat(33);
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (FILE.into(), "", "aa:bb:cc:dd:ee:01", "a network's name is 1 to 32"),
        (FILE.into(), "home office", "aa:bb:cc:dd:ee:01", "letters, digits"),
        (FILE.into(), "x]\n[interface.eth9", "aa:bb:cc:dd:ee:01", "letters, digits"),
        (FILE.into(), &long, "aa:bb:cc:dd:ee:01", "1 to 32"),
        (
            "[interface.eth0]\ndown = \"20mbit\"\n".into(),
            "home",
            "aa:bb:cc:dd:ee:01",
            "has no [interface.wlan0] table",
        ),
        (
            format!("{FILE}down = \"fast\"\n"),
            "home",
            "aa:bb:cc:dd:ee:01",
            "must read as a config",
        ),
        (
            format!("{FILE}\n[network.office]\ngateway = \"aa:bb:cc:dd:ee:01\"\n"),
            "home",
            "aa:bb:cc:dd:ee:01",
            "is [network.office]'s already; re-tune it with --save-as office",
        ),
        (
            format!("{FILE}\n[interface.eth0]\ndown = \"9mbit\"\n\n[network.home]\ngateway = \"aa:bb:cc:dd:ee:09\"\ninterface = \"eth0\"\n"),
            "home",
            "aa:bb:cc:dd:ee:01",
            "[network.home] is for eth0",
        ),
        (
            format!("{FILE}network = {{ office = {{ gateway = \"aa:bb:cc:dd:ee:09\" }} }}\n"),
            "home",
            "aa:bb:cc:dd:ee:01",
            "",
        ),
    ];
    for (text, name, gw, want) in cases {
        match save_of(&text, name, gw) {
            Ok(s) => panic!("{name:?} saved:\n{}", s.text),
            Err(e) => assert!(e.to_string().contains(want), "{name:?}: {e}"),
        }
    }
    let none = ShapeOptions {
        framing: Some(Framing::Ptm),
        ..ShapeOptions::default()
    };
    let e = save(
        FILE,
        Path::new(PATH),
        "home",
        &wlan0(),
        mac("aa:bb:cc:dd:ee:01"),
        &none,
        "",
    )
    .unwrap_err();
    assert!(e.to_string().contains("no rate either way"), "{e}");
}

#[test]
fn precheck_refuses_before_the_run_what_save_would_refuse_after_it() {
    let p = Path::new(PATH);
    assert!(precheck(FILE, p, "home", &wlan0()).is_ok());
    assert!(precheck(FILE, p, "bad name", &wlan0()).is_err());
    let eth9: IfName = "eth9".parse().unwrap();
    let e = precheck(FILE, p, "home", &eth9).unwrap_err();
    assert!(e.to_string().contains("no [interface.eth9] table"), "{e}");
}

/// A direction without a rate keeps what the table said; the run's other keys are written.
#[test]
fn a_direction_without_a_rate_leaves_the_tables_own() {
    let text = format!("{FILE}\n[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\nup = \"7mbit\"\n");
    let opts = ShapeOptions {
        up: None,
        ..tuned()
    };
    let saved = save(
        &text,
        Path::new(PATH),
        "home",
        &wlan0(),
        mac("aa:bb:cc:dd:ee:01"),
        &opts,
        "",
    )
    .unwrap();
    assert!(saved.text.contains("up = \"7mbit\""), "{}", saved.text);
    assert!(
        saved.text.contains("down = \"78000kbit\""),
        "{}",
        saved.text
    );
}
