//! unbloat-system: everything that touches the machine.
//!
//! - [`runner`]: the only place that starts programs (`tc`, `ip`, `linux.uml`, ...), behind the
//!   [`runner::Runner`] trait, with a real ([`runner::SystemRunner`]) and a recording
//!   ([`runner::RecordingRunner`]) implementation.
//! - [`probe`]: what the kernel and iproute2 here can do, tried for real in a throw-away network
//!   namespace, and what to do about what is missing.
//! - [`kernel`]: a kernel that has every qdisc a piece of work needs (the host's, or User-Mode
//!   Linux), to run commands and tests in.
//! - [`apply`]: start and stop, atomically, with rollback to a [`snapshot`] and verification;
//!   one [`lock`] per interface; the [`state`] records of what start created.
pub mod apply;
pub mod kernel;
pub mod lock;
pub mod probe;
pub mod runner;
pub mod snapshot;
pub mod state;
