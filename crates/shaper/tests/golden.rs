//! Golden scripts: the full shell rendering (`unbloat plan` output) and the teardown of each
//! configuration, pinned in `tests/golden/NAME.sh`. Any difference fails with a line diff.
//! Regenerate after an intended change with `UPDATE_GOLDEN=1 cargo test -p unbloat-shaper --test
//! golden`, and review the diff of the .sh files like code.

use std::path::PathBuf;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::Spec;

#[path = "golden/cases.rs"]
mod cases;
use cases::{cases, CASES_TOML};

#[test]
fn the_cases_file_is_toml() {
    let table: serde_json::Map<String, serde_json::Value> =
        unbloat_shaper::tomlread::from_str(CASES_TOML).expect("cases.toml is TOML");
    assert_eq!(table.len(), cases().len(), "every [case] is parsed");
}

fn render(iface: &str, table: &str) -> String {
    let opts: ShapeOptions =
        unbloat_shaper::tomlread::from_str(table).unwrap_or_else(|e| panic!("{iface}: {e}"));
    let spec = Spec::new(iface.parse().expect("valid name"), &opts)
        .unwrap_or_else(|e| panic!("{iface}: {e}"));
    let plan = Plan::build(&spec);
    let mut out = String::new();
    for line in table.lines() {
        out.push_str(&format!("# options: {line}\n"));
    }
    for w in &spec.warnings {
        out.push_str(&format!("# warning: {w}\n"));
    }
    out.push_str(&plan.render_shell());
    out.push_str("# stop\n");
    out.push_str(&plan.teardown().render_shell());
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
fn golden_scripts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (name, iface, table) in cases() {
        let actual = render(&iface, &table);
        let path = dir.join(format!("{name}.sh"));
        if update {
            std::fs::create_dir_all(&dir).expect("create tests/golden");
            std::fs::write(&path, &actual).expect("write golden file");
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{name}.sh differs (- golden, + now):\n{}",
                diff(&expected, &actual)
            )),
            Err(e) => failures.push(format!(
                "{name}.sh: {e} (run with UPDATE_GOLDEN=1 to create it)"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_golden_file_has_a_case() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for entry in std::fs::read_dir(&dir).expect("tests/golden exists") {
        let name = entry
            .expect("dir entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let Some(stem) = name.strip_suffix(".sh") else {
            continue; // cases.toml itself
        };
        assert!(
            cases().iter().any(|(n, _, _)| n == stem),
            "stale golden file {name}"
        );
    }
}

#[test]
fn batch_lines_are_what_tc_batch_reads() {
    // No comments, no empty lines, no leading "tc": line N of a tc error is command N.
    for (_, iface, table) in cases() {
        let opts: ShapeOptions = unbloat_shaper::tomlread::from_str(&table).expect("case parses");
        let plan =
            Plan::build(&Spec::new(iface.parse().expect("name"), &opts).expect("case is valid"));
        let script = plan.script();
        let text = script.batch_text();
        assert_eq!(text.lines().count(), script.tc_batch.len());
        for line in text.lines() {
            assert!(
                !line.is_empty() && !line.contains('#') && !line.starts_with("tc "),
                "{line}"
            );
            assert!(
                line.starts_with("qdisc add ")
                    || line.starts_with("class add ")
                    || line.starts_with("filter add "),
                "{line}"
            );
        }
    }
}

#[test]
fn long_interface_gets_a_short_unique_ifb() {
    let text = render("enx00e04c680123", "down = \"10mbit\"");
    let other = render("enx00e04c680124", "down = \"10mbit\"");
    let ifb = |t: &str| {
        t.lines()
            .find_map(|l| {
                l.strip_prefix("ip link add name ")
                    .map(|r| r.split(' ').next().unwrap_or("").to_string())
            })
            .expect("an ip link add line")
    };
    assert!(ifb(&text).len() <= 15);
    assert_ne!(ifb(&text), ifb(&other));
}
