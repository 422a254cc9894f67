//! `unbloat autorate` (issue 16): keep cake's rates just under what a variable link (LTE, 5G,
//! Starlink, busy cable) carries now, by watching its delay and its load.
//!
//! This crate is the controller alone, pure: delay samples and achieved rates in, rates out,
//! with time passed in rather than read, so every decision can be replayed in a test.
//! - [`baseline`]: each reflector's empty-path delay (down fast, up slowly) and its health;
//! - [`direction`]: one direction's rate: cut on bloat in proportion to what the link carried,
//!   raised while loaded and clean, decayed towards base when light, back to base when every
//!   reflector has gone quiet.
//!
//! The probes, the interface counters and the rate changes (through `set-rate`'s rtnetlink path,
//! no process per change) belong to the command that drives it.

pub mod baseline;
pub mod direction;
