//! unbloat's UCI reader (`unbloat_shaper::uci`) against OpenWrt's own: every file below is read
//! by both, and what each sees is written as `uci show` writes it. The real `uci` is built from
//! its public source by `scripts/openwrt/userland` (make test builds it first); a machine
//! without it fails here and says so, rather than passing on our reader's word alone.
//!
//! The files: the shipped /etc/config/unbloat, the sqm configs the importer's tests read, and
//! lines written to catch a reader out (quoting, comments, lists, anonymous sections, an option
//! or a section said twice). Files libuci refuses must be refused by ours too.

use std::path::{Path, PathBuf};

use unbloat_shaper::uci::{self, Section};

mod common;

/// What OpenWrt's `uci show PKG` prints for `text`, or its error.
fn uci_show(text: &str) -> Result<String, String> {
    // Without uci the test fails here, before it leaves a directory behind.
    common::uci::binary();
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("unbloat-libuci-{}-{n}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("pkg"), text).unwrap();
    let out = common::uci::output(&dir, &["show", "pkg"]);
    std::fs::remove_dir_all(&dir).unwrap();
    match out.status.success() {
        true => Ok(String::from_utf8(out.stdout).unwrap()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// `uci show`'s quoting: single quotes, a quote inside as `'\''`.
fn quoted(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// Our reader's sections as `uci show pkg` prints them.
fn our_show(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        let id = s.name.clone().unwrap_or_else(|| s.label.clone());
        out += &format!("pkg.{id}={}\n", s.kind);
        let mut names: Vec<&str> = s.options.iter().map(|o| o.name.as_str()).collect();
        names.dedup();
        for name in names {
            let values: Vec<String> = s
                .options
                .iter()
                .filter(|o| o.name == name)
                .map(|o| quoted(&o.value))
                .collect();
            out += &format!("pkg.{id}.{name}={}\n", values.join(" "));
        }
    }
    out
}

/// How our reader and libuci differ on `text`, if they do.
fn differs(label: &str, text: &str) -> Option<String> {
    match (uci_show(text), uci::parse(text)) {
        (Ok(theirs), Ok(sections)) => {
            let ours = our_show(&sections);
            (ours != theirs).then(|| format!("{label}: libuci reads\n{theirs}ours reads\n{ours}"))
        }
        (Err(theirs), Ok(sections)) => Some(format!(
            "{label}: libuci refuses it ({}) and ours reads {sections:?}",
            theirs.trim()
        )),
        (Ok(theirs), Err(e)) => Some(format!(
            "{label}: libuci reads\n{theirs}and ours refuses it: {e:?}"
        )),
        (Err(_), Err(_)) => None,
    }
}

/// Every difference at once: one test run shows them all.
fn check_all(files: impl IntoIterator<Item = (String, String)>) {
    let found: Vec<String> = files
        .into_iter()
        .filter_map(|(label, text)| differs(&label, &text))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

#[test]
fn the_shipped_config_and_the_importers_sqm_files_read_as_libuci_reads_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("packaging/openwrt/unbloat.config")];
    files.extend(files_under(
        &root.join("crates/shaper/tests/sqm_import/input"),
        "uci",
    ));
    assert!(files.len() > 5, "{files:?}");
    check_all(
        files
            .iter()
            .map(|f| (f.display().to_string(), std::fs::read_to_string(f).unwrap())),
    );
}

#[test]
fn quoting_comments_lists_and_anonymous_sections_read_as_libuci_reads_them() {
    let cases = [
        "config interface 'wan'\n\toption down '78mbit'\n",
        "config interface wan\n\toption down 78mbit\n",
        "config interface \"wan\"\n\toption eqdisc_opts \"nat dual-srchost\"\n",
        "config interface 'wan'\n\toption note 'it'\\''s'\n",
        "config interface 'wan'\n\toption note \"a \\\"b\\\" c\"\n",
        "config interface 'wan'\n\toption note 'a#b' # a comment\n",
        "# only a comment\nconfig interface 'wan' # here too\n\toption down '1mbit'\n",
        "package pkg\n\nconfig interface 'wan'\n\toption down '1mbit'\n",
        "config interface\n\toption down '1mbit'\nconfig interface\n\toption down '2mbit'\n",
        "config interface 'a'\nconfig interface\nconfig queue\nconfig interface\n\toption x 'y'\n",
        "config interface 'wan'\n\tlist classify 'a'\n\tlist classify 'b c'\n",
        "config interface 'wan'\n\toption down '1mbit'\n\toption down '2mbit'\n",
        "config interface 'wan'\n\toption x 'a'\n\tlist x 'b'\n",
        "config interface 'wan'\n\tlist x 'a'\n\toption x 'b'\n",
        "config interface 'wan'\n\toption down '1mbit'\nconfig interface 'wan'\n\toption up '1mbit'\n",
        "config interface 'wan'\n\toption down ''\n",
        "config interface 'wan'\n\toption down 'a''b'\n",
        "config interface 'wan'\r\n\toption down '1mbit'\r\n",
        "\toption down '1mbit'\n",
        "config interface 'wan'\n\toption down '1mbit\n",
        "config interface 'wan'\n\toption down\n",
        "config interface 'wan'\n\toption down '1' '2'\n",
        "config interface 'w-a.n'\n",
        "config interface 'wan'\n\tfrob x 'y'\n",
        "config 'inter face' 'wan'\n",
        "config interface 'wan'\n\toption 'do wn' '1'\n",
        "config interface 'wan'\n\toption down $HOME\n",
        "config interface 'wan'; option down '1'; option up 2\n",
        "config interface 'wan'\n\toption down 'a';option up b;\n",
        "config interface 'wan'\n\toption note 'a\nb'\n\toption down 1\n",
        "config interface 'wan'\n\toption note \"a\n\\\"b\"\n",
        "config interface 'wan'\n\toption down a#c\n\toption up 'b'#c\n",
        "config interface 'wan'\n\toption x a\\\nb\n",
        "config interface wan\\\n\toption x 1\n",
        "config interface 'wan'\n\toption down \"1\\n2\"\n",
        "config interface 'wan'\n\toption down a\\ b\n",
        "c interface 'wan'\n\to x 'a'\n\tl y b\n",
        "'config' interface 'wan'\n",
        "config interface 'a'\nconfig queue 'a'\n",
        "config interface 'wan'\n\toption x 'a'\n\toption y 'b'\n\toption x ''\n\toption x 'c'\n",
        "config interface 'wan'\n\tlist x 'a'\n\toption y 'b'\n\tlist x 'c'\n",
        "config interface 'wan'\n\tlist x\n\tlist x ''\n",
        "config interface 'wan'\nconfig interface\nconfig interface 'wan'\n\toption x 1\n",
        "config interface 'wan'\n\toption down 'a\n",
        "config interface 'wan'\n\toption down \"a\n",
        "config 'été'\n",
        "config interface 'wän'\n",
        "config interface ''\n\toption x 1\n",
        "config '' 'x'\n",
        "config interface 'wan'\n\toption '' 'x'\n",
        "package pkg\npackage pkg\nconfig interface 'wan'\n",
    ];
    check_all(
        cases
            .iter()
            .enumerate()
            .map(|(i, text)| (format!("case {i} {text:?}"), text.to_string())),
    );
}

/// Every option of the one option table, set with `uci set` (a list with `uci add_list`) and
/// committed as a user or LuCI would, reads back as the same value the command line gives it.
#[test]
fn every_option_set_through_uci_reads_back_as_its_flag_would() {
    use unbloat_shaper::config::ConfigFile;
    use unbloat_shaper::options::{value::Kind, ShapeOptions, OPTIONS};
    common::uci::binary();
    let dir = std::env::temp_dir().join(format!("unbloat-libuci-set-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".uci")).unwrap();
    let file = dir.join("unbloat");
    let mut missed = Vec::new();
    for o in OPTIONS {
        std::fs::write(&file, "").unwrap();
        common::uci::must(&dir, &["set", "unbloat.wan=interface"]);
        common::uci::must(&dir, &["set", "unbloat.wan.interface=eth0"]);
        common::uci::must(&dir, &["set", "unbloat.wan.enabled=1"]);
        let set = match o.field.kind() {
            Kind::List => "add_list",
            _ => "set",
        };
        let assignment = format!("unbloat.wan.{}={}", o.uci_name(), o.example);
        common::uci::must(&dir, &[set, &assignment]);
        common::uci::must(&dir, &["commit", "unbloat"]);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut want = ShapeOptions::default();
        o.field.set(&mut want, o.example).unwrap();
        assert!(
            o.field.show(&want).is_some(),
            "{}: its example sets nothing",
            o.key
        );
        match ConfigFile::parse(&text, &file) {
            Ok(c) => {
                let have = &c.interfaces[0].options;
                if o.field.show(have) != o.field.show(&want) {
                    missed.push(format!(
                        "{}: {:?} read as {:?}\n{text}",
                        o.key,
                        o.field.show(&want),
                        o.field.show(have)
                    ));
                }
            }
            Err(e) => missed.push(format!("{}: refused: {e}\n{text}", o.key)),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
