//! What one option declaration says ([`Opt`]), and the typed access to its field of
//! [`ShapeOptions`] ([`Field`]). The declarations themselves are [`super::table`]; this module
//! is their grammar, and the readers (the command line, the forms, the option strings, the spec's
//! checks, the sqm import) only ever iterate [`super::OPTIONS`] through it.

use super::value::{Kind, OptValue};
use super::{Qdisc, ShapeOptions};
use crate::model::Direction;

/// One option: everything any reader needs to know of it. See [`super::table`].
pub struct Opt {
    /// The config key (`ecn-egress`): TOML, the web page's form, UCI, messages.
    pub key: &'static str,
    pub field: &'static dyn Field,
    /// The command line's help (and the man page's), a sentence or more.
    pub help: &'static str,
    /// One line for a form (the web page, LuCI).
    pub short: &'static str,
    /// A value unlike the default, as a user types it: a form's placeholder, and what the
    /// table-driven test walks from flag to kernel to status.
    pub example: &'static str,
    pub cli: Cli,
    pub heading: Heading,
    /// The strategy that takes it; None: both.
    pub qdisc: Option<Qdisc>,
    /// Why the other strategy refuses it, shown with the refusal (empty: a standard sentence).
    pub refusal: &'static str,
    pub dir: Dir,
    /// Its words in the qdisc's own grammar (option strings, sqm-scripts' strings).
    pub words: Words,
    pub web: Web,
    /// Its option name in `/etc/config/unbloat` where it is not the key with `_` for `-` (UCI
    /// names have no `-`): sqm's name where it means the same thing (`eqdisc_opts`).
    pub uci: Option<&'static str>,
}

/// How the command line gives an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// No flag: the config file and option strings only.
    None,
    /// `--KEY VALUE`, with the value's name in the help.
    Value(&'static str),
    /// `--KEY` alone means true (`--wash`).
    Switch,
    /// `--KEY` (true) and a flag for false, which exclude each other (`--nat`, `--no-nat`): the
    /// second flag and its help.
    Pair(&'static str, &'static str),
    /// Only a flag for false, which turns off what is otherwise on by default
    /// (`--no-ingress-keyword`).
    Off(&'static str),
    /// `--KEY` alone means the second value, `--KEY=VALUE` names one (`--KEY=aggressive`).
    Optional(&'static str, &'static str),
    /// A flag of another name, with a value (`--egress-options WORDS` for `extra-egress`).
    Named(&'static str, &'static str),
    /// `--KEY VALUE`, repeated, in order (`--classify`).
    Repeated(&'static str),
}

/// The section of `--help` an option's flag is listed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heading {
    Rates,
    Queueing,
    Link,
    FqCodel,
    Advanced,
}

impl Heading {
    pub fn title(self) -> &'static str {
        match self {
            Heading::Rates => {
                "Rates (in bits, with a unit: 78mbit, 19950kbit, 20M, 20Mbit/s; no unit or mbps is \
                 refused, not guessed; 0 turns a direction off)"
            }
            Heading::Queueing => "Queueing",
            Heading::Link => "Link layer",
            Heading::FqCodel => "fq_codel",
            Heading::Advanced => "Advanced",
        }
    }
}

/// Which direction an option sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Both,
    /// This direction only, and its words mean it on that side only (`bandwidth` is `up` on the
    /// upload, `down` on the download).
    Only(Direction),
    /// The key sets the upload only; the download's comes from `extra-ingress`, where the same
    /// words set it (cake's ACK filter: the download's ACKs travel up).
    UploadKey,
}

impl Dir {
    /// Whether the option's words mean it on side `d`.
    pub fn admits(self, d: Direction) -> bool {
        match self {
            Dir::Only(o) => o == d,
            Dir::Both | Dir::UploadKey => true,
        }
    }
}

/// An option's words in one qdisc's grammar (iproute2's tc/q_cake.c, tc/q_fq_codel.c).
#[derive(Debug, Clone, Copy)]
pub enum Words {
    None,
    Cake(&'static [Word]),
    FqCodel(&'static [Word]),
}

impl Words {
    pub fn of(self, q: Qdisc) -> &'static [Word] {
        match (self, q) {
            (Words::Cake(w), Qdisc::Cake) | (Words::FqCodel(w), Qdisc::FqCodel) => w,
            _ => &[],
        }
    }
}

/// One way the grammar says an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// The word, then a value: `rtt 50ms`.
    Value(&'static str),
    /// The word alone means this value, as a user types it: `nonat` is `false`.
    Means(&'static str, &'static str),
    /// Each of the type's own keywords (`diffserv4`, `dual-srchost`, `atm`).
    Keywords,
    /// The word adds one (cake's repeated `ether-vlan`).
    Counts(&'static str),
}

/// Where the web page's form (and LuCI's) shows an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Web {
    Card,
    /// Under "more options".
    More,
    /// Not on the form: the TOML editor only.
    Hidden,
}

impl Opt {
    /// The command line's flags for it: `nat` and `no-nat` for `--nat`/`--no-nat`,
    /// `no-ingress-keyword`, `egress-options`; none for a key of the config file only.
    pub fn flags(&self) -> Vec<&'static str> {
        match self.cli {
            Cli::None => vec![],
            Cli::Off(off) => vec![off],
            Cli::Pair(off, _) => vec![self.key, off],
            Cli::Named(flag, _) => vec![flag],
            _ => vec![self.key],
        }
    }

    /// Its option name in `/etc/config/unbloat`.
    pub fn uci_name(&self) -> String {
        self.uci
            .map_or_else(|| self.key.replace('-', "_"), str::to_string)
    }

    /// How messages name the option: `--KEY` when a flag of that name gives it, the config key
    /// alone when only a file or an option string can, both when the flag is spelled otherwise
    /// (`--egress-options/extra-egress`).
    pub fn name(&self) -> String {
        match self.cli {
            Cli::None | Cli::Off(_) => self.key.to_string(),
            Cli::Named(flag, _) => format!("--{flag}/{}", self.key),
            _ => format!("--{}", self.key),
        }
    }

    /// The value in a message: the qdisc's keyword where it has one, else as typed.
    pub fn shown(&self, o: &ShapeOptions) -> Option<String> {
        self.field
            .word(o)
            .map(str::to_string)
            .or_else(|| self.field.show(o))
    }

    /// The words of `q`'s grammar that say this option's value in `o` (for an option string
    /// unbloat writes itself): the first form that can.
    pub fn words_for(&self, q: Qdisc, o: &ShapeOptions) -> Option<Vec<String>> {
        let shown = self.field.show(o)?;
        self.words.of(q).iter().find_map(|w| match *w {
            Word::Value(word) => Some(vec![word.to_string(), shown.clone()]),
            Word::Means(word, value) => (value == shown).then(|| vec![word.to_string()]),
            Word::Keywords => self.field.word(o).map(|k| vec![k.to_string()]),
            Word::Counts(_) => None,
        })
    }
}

/// Typed access to one field of [`ShapeOptions`], the same for every type (through
/// [`OptValue`]).
pub trait Field: Sync {
    fn kind(&self) -> Kind;
    fn noun(&self) -> &'static str;
    fn choices(&self) -> Vec<&'static str>;
    fn is_set(&self, o: &ShapeOptions) -> bool;
    /// As a user types it.
    fn show(&self, o: &ShapeOptions) -> Option<String>;
    /// As a user types it, once per time it is said (a list's items); empty when unset.
    fn show_each(&self, o: &ShapeOptions) -> Vec<String>;
    /// As a TOML value.
    fn toml(&self, o: &ShapeOptions) -> Option<String>;
    fn word(&self, o: &ShapeOptions) -> Option<&'static str>;
    /// Parses what a user typed and sets it (a list gets one more item).
    fn set(&self, o: &mut ShapeOptions, text: &str) -> Result<(), String>;
    /// Sets the value a keyword stands for; false if it is not one of the type's.
    fn set_word(&self, o: &mut ShapeOptions, w: &str) -> bool;
    fn add_one(&self, o: &mut ShapeOptions) -> bool;
    fn clear(&self, o: &mut ShapeOptions);
    /// `to`'s value becomes `from`'s (set or not).
    fn copy(&self, to: &mut ShapeOptions, from: &ShapeOptions);
    fn same(&self, a: &ShapeOptions, b: &ShapeOptions) -> bool;
}

/// The [`Field`] of an `Option<T>` member; [`super::table`] makes one per option.
pub struct Acc<T: 'static> {
    pub get: fn(&ShapeOptions) -> &Option<T>,
    pub get_mut: fn(&mut ShapeOptions) -> &mut Option<T>,
    /// How a user's text is read: the type's own parser unless the option has its own (cake's
    /// rtt also takes its names: `internet`).
    pub parse: fn(&str) -> Result<T, String>,
}

impl<T: OptValue> Field for Acc<T> {
    fn kind(&self) -> Kind {
        T::KIND
    }
    fn noun(&self) -> &'static str {
        T::NOUN
    }
    fn choices(&self) -> Vec<&'static str> {
        T::choices()
    }
    fn is_set(&self, o: &ShapeOptions) -> bool {
        (self.get)(o).is_some()
    }
    fn show(&self, o: &ShapeOptions) -> Option<String> {
        (self.get)(o).as_ref().map(T::show)
    }
    fn show_each(&self, o: &ShapeOptions) -> Vec<String> {
        (self.get)(o).as_ref().map(T::each).unwrap_or_default()
    }
    fn toml(&self, o: &ShapeOptions) -> Option<String> {
        (self.get)(o).as_ref().map(T::toml)
    }
    fn word(&self, o: &ShapeOptions) -> Option<&'static str> {
        (self.get)(o).as_ref().and_then(T::word)
    }
    fn set(&self, o: &mut ShapeOptions, text: &str) -> Result<(), String> {
        let v = (self.parse)(text)?;
        let slot = (self.get_mut)(o);
        *slot = Some(match slot.take() {
            Some(old) => T::and(old, v),
            None => v,
        });
        Ok(())
    }
    fn set_word(&self, o: &mut ShapeOptions, w: &str) -> bool {
        match T::from_word(w) {
            Some(v) => {
                *(self.get_mut)(o) = Some(v);
                true
            }
            None => false,
        }
    }
    fn add_one(&self, o: &mut ShapeOptions) -> bool {
        T::add_one((self.get_mut)(o))
    }
    fn clear(&self, o: &mut ShapeOptions) {
        *(self.get_mut)(o) = None;
    }
    fn copy(&self, to: &mut ShapeOptions, from: &ShapeOptions) {
        *(self.get_mut)(to) = (self.get)(from).clone();
    }
    fn same(&self, a: &ShapeOptions, b: &ShapeOptions) -> bool {
        (self.get)(a) == (self.get)(b)
    }
}
