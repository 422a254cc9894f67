//! unbloat-lab: an emulated bloated access network, and the strategies compared on it.
//!
//! The layers:
//! - [`profile`]: link profiles (TOML data, five shipped, users may write their own).
//! - [`strategies`]: the one place that defines what each compared strategy configures
//!   (`none`, `wondershaper`, `sqm-simple`, `sqm-piece-of-cake`, `unbloat`) as exact commands.
//! - [`topology`]: the network namespaces of one lab run (LAN host, router, modem, internet,
//!   server), built from a profile, and removed again whatever happens.

pub mod cleanup;
pub mod profile;
pub mod strategies;
pub mod topology;
