//! `unbloat autorate` (issue 16): keep cake's rates just under what a variable link (LTE, 5G,
//! Starlink, busy cable) carries now, by watching its delay and its load.
//!
//! The decisions are pure, with time passed in rather than read, so every one can be replayed
//! in a test:
//! - [`baseline`]: each reflector's empty-path delay (down fast, up slowly) and its health;
//! - [`direction`]: one direction's rate: cut on bloat (the upload from what it carried, the
//!   download from its rate unless the link holds one), raised while loaded and clean, decayed
//!   towards base when light, back to base when every reflector has gone quiet;
//! - [`reflectors`]: which reflectors are probed, when, and which replace the bad ones;
//! - [`controller`]: both directions and the reflectors together, a tick at a time;
//! - [`probe`]: the probes' vocabulary (kinds, the user's choice, what an answer measured).
//!
//! The effects are three small modules: [`pinger`] (ICMP echo and timestamp probes through raw
//! sockets, each answer checked against what was sent, kept by the pure [`sent`]), [`run`] (the
//! loop, setting rates through a [`run::Link`] the caller provides) and
//! [`shaped`] (the `Link` of an interface unbloat shapes: `set-rate`'s in-place rtnetlink change,
//! no process per change; for the CLI and the daemon). [`start`] is what the CLI and the daemon
//! both do to run a controller: the probes bound to the interface, its controller lock, the run
//! with its log. [`log`] reads and plots what a run wrote; [`narrate`] says it in words.

pub mod baseline;
pub mod controller;
pub mod direction;
pub mod log;
pub mod narrate;
pub mod pinger;
pub mod probe;
pub mod reflectors;
pub mod run;
pub mod sent;
pub mod shaped;
pub mod start;
