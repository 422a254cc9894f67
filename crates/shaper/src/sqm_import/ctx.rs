//! The queue being mapped, with the helpers every mapping step uses to note what became of an
//! option and to refuse a value; it remembers which options were noted, so that
//! [`Ctx::note_the_rest`] can make sure no option the file sets goes unreported.

use super::model::{ImportError, ImportErrorKind, Key, Note, NoteKind, Setting, SqmQueue};
use std::collections::BTreeSet;

pub struct Ctx<'a> {
    pub q: &'a SqmQueue,
    pub path: &'a str,
    pub notes: Vec<Note>,
    noted: BTreeSet<Key>,
}

impl<'a> Ctx<'a> {
    pub fn new(q: &'a SqmQueue, path: &'a str) -> Ctx<'a> {
        Ctx {
            q,
            path,
            notes: Vec::new(),
            noted: BTreeSet::new(),
        }
    }

    /// The value of `key`, if set and not empty.
    pub fn get(&self, key: Key) -> Option<&'a Setting> {
        self.q.get(key)
    }

    /// The trimmed value of `key`, if set.
    pub fn value(&self, key: Key) -> Option<&'a str> {
        self.get(key).map(|s| s.value.trim())
    }

    /// Whether a note about `key` was made.
    pub fn is_noted(&self, key: Key) -> bool {
        self.noted.contains(&key)
    }

    /// A note about `key` as the file spells it (with its value when it is set); the same note
    /// twice (a setting both directions read) is made once.
    pub fn note(&mut self, key: Key, kind: NoteKind, text: impl Into<String>) {
        self.noted.insert(key);
        let (option, value) = match self.get(key) {
            Some(s) => (s.name.clone(), Some(s.value.clone())),
            None => (
                key.names(self.q.format)
                    .first()
                    .copied()
                    .unwrap_or("?")
                    .to_string(),
                None,
            ),
        };
        let note = Note {
            queue: self.q.label.clone(),
            option: Some(option),
            value,
            kind,
            text: text.into(),
        };
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// A note about `key` only if the file sets it.
    pub fn note_if_set(&mut self, key: Key, kind: NoteKind, text: impl Into<String>) {
        if self.get(key).is_some() {
            self.note(key, kind, text);
        }
    }

    /// A note about the queue as a whole.
    pub fn note_queue(&mut self, kind: NoteKind, text: impl Into<String>) {
        self.notes.push(Note {
            queue: self.q.label.clone(),
            option: None,
            value: None,
            kind,
            text: text.into(),
        });
    }

    /// Mark `key` as reported without a note of its own (another note covers it).
    pub fn covered(&mut self, key: Key) {
        self.noted.insert(key);
    }

    /// `name 'value'` for a comment, or `name (default)` when the file does not set it.
    pub fn source(&self, key: Key, default: &str) -> String {
        match self.get(key) {
            Some(s) => format!("{} '{}'", s.name, crate::clip::clip(&s.value)),
            None => {
                let name = key.names(self.q.format).first().copied().unwrap_or("?");
                match default {
                    "" => format!("{name} (default)"),
                    d => format!("{name} not set: {d}"),
                }
            }
        }
    }

    /// An error about `key`'s value.
    pub fn bad(&self, key: Key, reason: impl Into<String>) -> ImportError {
        let s = self.get(key);
        ImportErrorKind::Value {
            path: self.path.to_string(),
            line: s.map_or(self.q.line, |s| s.line),
            queue: self.q.label.clone(),
            option: s.map_or_else(
                || {
                    key.names(self.q.format)
                        .first()
                        .copied()
                        .unwrap_or("?")
                        .to_string()
                },
                |s| s.name.clone(),
            ),
            value: s.map_or_else(String::new, |s| crate::clip::clip(&s.value).into_owned()),
            reason: reason.into(),
        }
        .into()
    }

    /// An error about the queue.
    pub fn queue_error(&self, message: impl Into<String>) -> ImportError {
        ImportErrorKind::Queue {
            path: self.path.to_string(),
            line: self.q.line,
            queue: self.q.label.clone(),
            message: message.into(),
        }
        .into()
    }

    /// A value with shell expansion (`$X`, a backquote) cannot be read without running the
    /// file: an error where the value matters.
    pub fn plain(&self, key: Key) -> Result<Option<&'a str>, ImportError> {
        match self.get(key) {
            Some(s) if s.expanded => Err(self.bad(
                key,
                "uses shell expansion ($ or a backquote), which the import does not run; write the value itself",
            )),
            Some(s) => Ok(Some(s.value.trim())),
            None => Ok(None),
        }
    }

    /// Every option the file sets that no step reported: noted as read but unused, and every
    /// setting no sqm-scripts code reads at all.
    pub fn note_the_rest(&mut self) {
        let keys: Vec<Key> = self
            .q
            .settings
            .iter()
            .filter_map(|s| match self.q.format {
                super::model::Format::Uci => Key::from_uci(&s.name),
                super::model::Format::Shell => Key::from_shell(&s.name),
            })
            .collect();
        for key in keys {
            if !self.noted.contains(&key) && self.get(key).is_some() {
                self.note(
                    key,
                    NoteKind::Ignored,
                    "sqm-scripts does not use it with this script",
                );
            }
        }
        let unknown: Vec<(String, String)> = self
            .q
            .unknown()
            .into_iter()
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect();
        for (name, value) in unknown {
            let text = match self.q.format {
                super::model::Format::Uci => "not an option sqm-scripts reads; ignored",
                super::model::Format::Shell => {
                    "not a variable sqm-scripts reads for a queue; ignored"
                }
            };
            self.notes.push(Note {
                queue: self.q.label.clone(),
                option: Some(name),
                value: Some(value),
                kind: NoteKind::Ignored,
                text: text.to_string(),
            });
        }
    }
}
