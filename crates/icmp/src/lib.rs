//! unbloat-icmp: what `unbloat test`, `unbloat tune` and `unbloat autorate` share to ping.
//!
//! A crate of its own so that autorate, which only pings, does not pull in the measuring
//! engine's async runtime, HTTP and TLS (`unbloat-measure`). It needs libc and socket2, nothing
//! heavier.
//!
//! - [`echo`]: the ICMP echo socket of the latency probes and the framing sweep (unprivileged
//!   or raw), and the RFC 1071 [`checksum`] autorate's own echoes carry too.
//! - [`timestamp`]: ICMP timestamp requests (raw sockets only), whose replies split a round trip
//!   to the gateway into its two ways.
//! - [`rxtime`]: when a datagram reached this host (the kernel's arrival stamp), rather than when
//!   a thread got round to reading it.

pub mod echo;
pub mod rxtime;
pub mod timestamp;

pub use echo::{checksum, IcmpSocket};
