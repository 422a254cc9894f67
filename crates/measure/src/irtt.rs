//! The irtt far end: latency probes against a stock `irtt server` (UDP 2112), in irtt's own
//! protocol, so the public irtt servers people already run can answer `unbloat test`'s probes.
//!
//! Heads up! This follows irtt's source, <https://github.com/heistp/irtt> at v0.9.2
//! (0d612bb), protocol version 1: packet.go and fbuf.go (the packet layout), params.go (the
//! parameters), conn.go (the client's open and close), sconn.go (what the server grants and
//! enforces), defaults.go (its limits). Debian's irtt 0.9.0 speaks the same protocol; its one
//! difference on the wire is handled in [`packet`].
//!
//! The layers, from bytes up:
//! - [`params`]: the test parameters of the open request and reply. Pure; property-tested.
//! - [`packet`]: the open, echo and close packets, parsed into a validated form. Pure;
//!   property-tested, and checked against an exchange captured between irtt's own client and
//!   server.
//! - [`session`]: one session on a UDP socket: the open handshake with a timeout, what the server
//!   granted (it may raise the interval, lower the duration, refuse DSCP or stamps), echo
//!   replies, the close.
//!
//! The probing itself (the send schedule, the records, kernel receive stamps, the clock
//! relation) is [`crate::probe::Prober::start_irtt`]'s, the same as against `unbloat serve`.
//!
//! Not supported: HMAC (`irtt server --hmac`). Such a server drops unsigned packets without a
//! word, so an open that nobody answers says it may be the cause.

pub mod packet;
pub mod params;
pub mod session;

pub use params::Params;
pub use session::{Ask, Echo, Session};

/// irtt's port (defaults.go: `DefaultPort = "2112"`).
pub const DEFAULT_PORT: u16 = 2112;
