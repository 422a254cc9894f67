//! The product's one way to read TOML: toml's parser for the text and the span of every key and
//! value, then each table as JSON through serde_json's `Value`, the deserializer the product
//! already carries for its state files and its daemon. A second, TOML-specific deserializer for
//! every config type cost the router build 65 KB (docs/install.md).
//!
//! An error still says where: the parser's own span, or, for a table its type refuses, the first
//! key (in the file's order) the type refuses on its own, which needs types whose keys are each
//! optional, as the config's tables are.

use std::ops::Range;

use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Why a TOML text was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlError {
    /// The byte offset in the text.
    pub offset: usize,
    /// The key at fault, when one is.
    pub key: Option<String>,
    pub message: String,
}

impl std::fmt::Display for TomlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TomlError {}

impl TomlError {
    fn at(span: Range<usize>, key: Option<&str>, message: impl Into<String>) -> TomlError {
        TomlError {
            offset: span.start,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

/// The text's tables, with the spans of their keys and values.
pub fn parse(text: &str) -> Result<DeTable<'_>, TomlError> {
    DeTable::parse(text).map(Spanned::into_inner).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        TomlError::at(offset..offset, None, e.message())
    })
}

/// The whole text as a `T`, for a text of our own (the error has a place, not a key).
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, TomlError> {
    let root = Spanned::new(0..text.len(), DeValue::Table(parse(text)?));
    serde_json::from_value(to_json(&root)?).map_err(|e| TomlError::at(0..0, None, e.to_string()))
}

/// `v` (a table) as a `T`; refused, the error names the first key `T` refuses on its own: the
/// key itself when `T` has no such key, else its value.
pub fn typed<T: DeserializeOwned>(v: &Spanned<DeValue>) -> Result<T, TomlError> {
    let DeValue::Table(table) = v.get_ref() else {
        return Err(TomlError::at(v.span(), None, "expected a table"));
    };
    let whole = match serde_json::from_value::<T>(to_json(v)?) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let mut keys: Vec<_> = table.iter().collect();
    keys.sort_by_key(|(k, _)| k.span().start);
    let alone = |key: &str, value: Value| {
        serde_json::from_value::<T>(Value::Object(Map::from_iter([(key.to_string(), value)])))
    };
    for (k, val) in keys {
        let key = k.get_ref().as_ref();
        if let Err(e) = alone(key, to_json(val)?) {
            // An option `T` has takes `null`; one it does not have is refused even so.
            let span = match alone(key, Value::Null) {
                Ok(_) => val.span(),
                Err(_) => k.span(),
            };
            return Err(TomlError::at(span, Some(key), e.to_string()));
        }
    }
    Err(TomlError::at(v.span(), None, whole.to_string()))
}

/// Where the line holding byte `offset` of `text` starts (an offset past the end: the last
/// line's start). A scan back, for an error's place or an edit, not for every key.
pub fn line_start(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.get(..offset)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1)
}

/// `v` as JSON: a string, number, boolean, array or table as itself, a date-time as its text.
fn to_json(v: &Spanned<DeValue>) -> Result<Value, TomlError> {
    let out_of_range = || TomlError::at(v.span(), None, "a number out of range");
    Ok(match v.get_ref() {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map(Value::from)
            .map_err(|_| out_of_range())?,
        DeValue::Float(f) => f
            .as_str()
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| {
                let what = format!(
                    "{}: not a finite number (nan, inf, or too large)",
                    f.as_str()
                );
                TomlError::at(v.span(), None, what)
            })?,
        DeValue::Datetime(d) => Value::String(d.to_string()),
        DeValue::Array(a) => Value::Array(a.iter().map(to_json).collect::<Result<_, _>>()?),
        DeValue::Table(t) => {
            let mut m = Map::new();
            for (k, v) in t.iter() {
                m.insert(k.get_ref().to_string(), to_json(v)?);
            }
            Value::Object(m)
        }
    })
}

#[cfg(test)]
#[path = "tomlread_tests.rs"]
mod tests;
