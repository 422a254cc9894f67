//! The keys of an `[interface.NAME]` table as the page's form shows them: kind, choices, help,
//! and whether they sit under "more options", all from the option declarations
//! (`unbloat_shaper::options::OPTIONS`), in their order (the example config's). A key the
//! declarations keep off the forms (`classify`, a list) is for the TOML editor.

use serde::Serialize;
pub use unbloat_shaper::options::value::Kind;
use unbloat_shaper::options::{Web, OPTIONS};

/// One key of an `[interface.NAME]` table, as the form shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Field {
    pub key: &'static str,
    pub kind: Kind,
    /// For a choice (and true/false for a boolean); empty for free text.
    pub choices: Vec<&'static str>,
    pub help: &'static str,
    /// Shown under "more options" rather than on the card.
    pub more: bool,
}

/// Every key the form edits.
pub fn fields() -> Vec<Field> {
    OPTIONS
        .iter()
        .filter(|o| o.web != Web::Hidden)
        .map(|o| Field {
            key: o.key,
            kind: o.field.kind(),
            choices: o.field.choices(),
            help: o.short,
            more: o.web == Web::More,
        })
        .collect()
}

/// How the form edits `key` (text for a key it does not know).
pub fn kind(key: &str) -> Kind {
    OPTIONS
        .iter()
        .find(|o| o.key == key)
        .map_or(Kind::Text, |o| o.field.kind())
}
