//! A qdisc parameter's value in `unbloat status --json`: each kind's parameter table
//! (`cake::params::PARAMS`, `fq_codel::params::PARAMS`) names its key and gives its value, and
//! status writes them as one JSON object, in the table's order.

use serde::Serialize;

/// A value of `unbloat status --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Setting {
    Bool(bool),
    Int(i64),
    Word(String),
    /// The kernel did not say (`null`).
    Unknown,
}

/// Parameters as (key, value), written as one JSON object (flattened into their qdisc's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings(pub Vec<(&'static str, Setting)>);

impl Serialize for Settings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
