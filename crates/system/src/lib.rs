//! unbloat-system: everything that touches the machine.
//!
//! - [`runner`]: the only place that starts programs (`tc`, `ip`, ...), behind the [`runner::Runner`]
//!   trait, with a real ([`runner::SystemRunner`]) and a recording ([`runner::RecordingRunner`])
//!   implementation.
pub mod runner;
