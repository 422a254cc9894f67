//! unbloat-fuzz: the bodies of the fuzz targets, one plain function per parser that takes
//! bytes from outside (a client, a peer, a file, the kernel), each named as its target.
//!
//! `fuzz/` (cargo-fuzz, libFuzzer, nightly) calls them with what libFuzzer makes up;
//! `tests/corpus.rs` replays the seed corpus `fuzz/corpus/TARGET/` through them on stable, so
//! every `cargo test` runs each body over its seeds ([docs/reliability.md](../../docs/reliability.md#fuzzing)).
//! A body passes when the parser ends with a value or an error; a panic is the finding. Where
//! a parser has a writer, the body also checks that what it read is written back the same. Each
//! says whether the parser took the input (a value, not an error): the corpus test checks that
//! some seeds of every target get past the first refusal, where the parser's code is.
//!
//! - [`wire`]: the daemon's HTTP request heads, `unbloat serve`'s frames and probes;
//! - [`files`]: the config (TOML and UCI) and the sqm-scripts importer;
//! - [`kernel`]: tc's JSON and rtnetlink's answers;
//! - [`probes`]: ICMP replies (echo, timestamp, autorate's), irtt's and iperf3's messages.

pub mod files;
pub mod kernel;
pub mod probes;
pub mod wire;

/// A target's body: whether the parser took the input.
pub type Body = fn(&[u8]) -> bool;

/// Every target: its name (its directory in `fuzz/corpus/` and its binary in `fuzz/`) and body.
pub const TARGETS: &[(&str, Body)] = &[
    ("http_head", wire::http_head),
    ("serve_frames", wire::serve_frames),
    ("config", files::config),
    ("sqm_import", files::sqm_import),
    ("tc_json", kernel::tc_json),
    ("netlink", kernel::netlink),
    ("icmp", probes::icmp),
    ("irtt", probes::irtt),
    ("iperf3", probes::iperf3),
];

/// The input as text, as the file readers take it (they refuse what is not UTF-8 first).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
