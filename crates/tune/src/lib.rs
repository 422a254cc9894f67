//! `unbloat tune`: find the rates and the framing of the user's own link by measuring it.
//!
//! The phases, each with its own module:
//! - [`framing`]: an RTT sweep over packet sizes tells ATM's 48-byte cell staircase (and so its
//!   per-packet overhead) from a straight line (PTM, DOCSIS, Ethernet). Pure analysis; the sweep
//!   itself is `unbloat_measure::sweep`.
//! - [`search`]: the rate search per direction, a pure state machine fed with each step's
//!   steady-state latency and goodput.
//!
//! Dependencies go one way: tune uses shaper (plans), system (transactions), measure (tests) and
//! report (summaries, plots); the CLI and the lab use tune.

pub mod framing;
pub mod search;
