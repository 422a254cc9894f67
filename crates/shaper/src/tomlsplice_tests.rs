//! Editing one table in the file's text, and what it refuses.

use super::*;

const FILE: &str = "# my router\n[defaults]\nqdisc = \"cake\" # everywhere\n\n\
                    [interface.wan0]\n# the ISP's sheet\ndown = \"20mbit\" # measured\nup = \"5mbit\"\n\
                    \n[interface.lan0]\ndown = \"1gbit\"\n";

fn set_of(text: &str, name: &str, changes: &[(&str, Option<&str>)]) -> Result<String, Unsupported> {
    let changes: Vec<(&str, Option<String>)> = changes
        .iter()
        .map(|(k, v)| (*k, v.map(str::to_string)))
        .collect();
    let root = parse(text).expect("the test's text is TOML");
    set(text, &root, "interface", name, &changes)
}

#[test]
fn a_value_is_replaced_where_it_stands_and_nothing_else_moves() {
    let new = set_of(FILE, "wan0", &[("down", Some("\"30mbit\""))]).unwrap();
    assert_eq!(new, FILE.replace("\"20mbit\"", "\"30mbit\""));
    // A multi-line array is one value too.
    let text = "[interface.wan0]\nx = [\n  1,\n  2,\n] # two\nup = 1\n";
    let new = set_of(text, "wan0", &[("x", Some("3"))]).unwrap();
    assert_eq!(new, "[interface.wan0]\nx = 3 # two\nup = 1\n");
}

#[test]
fn a_removed_key_takes_its_line_and_only_its_line() {
    let new = set_of(FILE, "wan0", &[("down", None)]).unwrap();
    assert_eq!(new, FILE.replace("down = \"20mbit\" # measured\n", ""));
    assert!(new.contains("# the ISP's sheet\nup = \"5mbit\"\n"), "{new}");
}

#[test]
fn new_keys_follow_the_tables_last_line_in_the_order_given() {
    let new = set_of(
        FILE,
        "wan0",
        &[("nat", Some("true")), ("overhead", Some("18"))],
    )
    .unwrap();
    assert_eq!(
        new,
        FILE.replace(
            "up = \"5mbit\"\n",
            "up = \"5mbit\"\nnat = true\noverhead = 18\n"
        )
    );
    // Not into a sub-table that follows, and a file without its last newline gets one.
    let text = "[interface.wan0]\nup = 1\n[interface.wan0.sub]\nx = 1";
    let new = set_of(text, "wan0", &[("down", Some("2"))]).unwrap();
    assert_eq!(
        new,
        "[interface.wan0]\nup = 1\ndown = 2\n[interface.wan0.sub]\nx = 1"
    );
    let new = set_of("[interface.wan0]\nup = 1", "wan0", &[("down", Some("2"))]).unwrap();
    assert_eq!(new, "[interface.wan0]\nup = 1\ndown = 2\n");
    // An empty table gets them after its header.
    let new = set_of("[interface.wan0]\n[x]\n", "wan0", &[("up", Some("1"))]).unwrap();
    assert_eq!(new, "[interface.wan0]\nup = 1\n[x]\n");
}

#[test]
fn a_missing_table_is_added_at_the_end_with_its_name_quoted_when_it_must_be() {
    let new = set_of(FILE, "eth0.2", &[("up", Some("\"2mbit\""))]).unwrap();
    assert_eq!(
        new,
        format!("{FILE}\n[interface.\"eth0.2\"]\nup = \"2mbit\"\n")
    );
    assert_eq!(
        set_of("", "eth0", &[("up", Some("1"))]).unwrap(),
        "[interface.eth0]\nup = 1\n"
    );
    assert_eq!(
        set_of("a = 1", "eth0", &[]).unwrap(),
        "a = 1\n\n[interface.eth0]\n"
    );
}

#[test]
fn a_form_it_cannot_edit_in_place_is_refused_not_guessed() {
    for text in [
        "interface = { wan0 = { up = 1 } }\n",
        "[interface]\nwan0 = { up = 1 }\n",
        "[interface]\nwan0.up = 1\n",
        "interface = 3\n",
        "[[interface.wan0]]\nup = 1\n",
    ] {
        assert_eq!(
            set_of(text, "wan0", &[("up", Some("2"))]),
            Err(Unsupported),
            "{text}"
        );
        assert_eq!(
            set_of(text, "ppp0", &[("up", Some("2"))]),
            Err(Unsupported),
            "{text}"
        );
    }
    // A dotted key inside the table is a table, not a value the form can set.
    let text = "[interface.wan0]\nup.x = 1\n";
    assert_eq!(set_of(text, "wan0", &[("up", Some("2"))]), Err(Unsupported));
    let not_toml = parse("[interface.wan0\n").unwrap_err();
    assert!(not_toml.contains("line 1"), "{not_toml}");
}

#[test]
fn strings_and_keys_are_written_so_they_read_back_as_given() {
    let odd = "a \"quoted\" \\ back\nslash\tand \u{7} bell";
    let new = set_of("", "wan0", &[("x y", Some(&string(odd)))]).unwrap();
    let root = parse(&new).unwrap();
    let tables = tables(&root, "interface");
    assert_eq!(tables.len(), 1);
    assert_eq!(
        values(&new, tables[0].1).get("x y").map(String::as_str),
        Some(odd)
    );
}

#[test]
fn the_form_sees_strings_unquoted_and_the_rest_as_written_in_file_order() {
    let text = "[interface.zz]\nup = \"1mbit\"\nnat = true\noverhead = 0x12\n[interface.aa]\n";
    let root = parse(text).unwrap();
    let found = tables(&root, "interface");
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["zz", "aa"]);
    let v = values(text, found[0].1);
    assert_eq!(v["up"], "1mbit");
    assert_eq!(v["nat"], "true");
    assert_eq!(v["overhead"], "0x12");
}
