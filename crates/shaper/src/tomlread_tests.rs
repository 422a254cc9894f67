//! Reading TOML through JSON, and the places its errors name.

use super::*;
use serde::Deserialize;

#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    n: Option<u8>,
    s: Option<String>,
    f: Option<f64>,
    list: Option<Vec<i64>>,
}

fn read(text: &str) -> Result<Opts, TomlError> {
    let root = parse(text)?;
    let (_, v) = root.iter().next().expect("one table");
    typed(v)
}

#[test]
fn every_toml_value_arrives_as_itself() {
    let o = read("[t]\nn = 0x1f\ns = \"a\\tb\"\nf = 1_000.5\nlist = [1, -2, 0b11]\n").unwrap();
    assert_eq!(
        o,
        Opts {
            n: Some(31),
            s: Some("a\tb".into()),
            f: Some(1000.5),
            list: Some(vec![1, -2, 3]),
        }
    );
    #[derive(Deserialize)]
    struct When {
        at: String,
    }
    let w: When = from_str("at = 1979-05-27T07:32:00Z").unwrap();
    assert_eq!(w.at, "1979-05-27T07:32:00Z");
}

#[test]
fn an_error_names_the_value_or_the_key_at_fault() {
    let text = "[t]\ns = \"fine\"\nn = 300\n";
    let e = read(text).unwrap_err();
    assert_eq!(
        (e.offset, e.key.as_deref()),
        (text.find("300").unwrap(), Some("n"))
    );
    assert!(e.message.contains("300"), "{e:?}");
    // A key the type does not have: the key's own place.
    let text = "[t]\ns = \"fine\"\nnn = 3\n";
    let e = read(text).unwrap_err();
    assert_eq!(
        (e.offset, e.key.as_deref()),
        (text.find("nn").unwrap(), Some("nn"))
    );
    assert!(e.message.contains("unknown field `nn`"), "{e:?}");
    // The first in the file's order, not the alphabet's.
    let text = "[t]\ns = 1\nn = \"x\"\n";
    assert_eq!(read(text).unwrap_err().key.as_deref(), Some("s"));
}

#[test]
fn what_json_cannot_hold_and_what_is_not_toml_are_refused_with_a_place() {
    let text = "[t]\nf = nan\n";
    let e = read(text).unwrap_err();
    assert_eq!(e.offset, text.find("nan").unwrap());
    let text = "[t]\nn = \n";
    let e = read(text).unwrap_err();
    assert_eq!(e.offset, text.find(" \n").unwrap() + 1, "{e:?}");
    let e = typed::<Opts>(&Spanned::new(3..5, DeValue::Boolean(true))).unwrap_err();
    assert_eq!((e.offset, e.message.as_str()), (3, "expected a table"));
}
