//! `AtomicU64` on every CPU a router has. std has none where the CPU has no 64-bit atomic
//! instructions (32-bit MIPS: OpenWrt's mipsel_24kc); there it is portable-atomic's, which keeps
//! the value behind a lock. Elsewhere it is std's.

#[cfg(not(target_has_atomic = "64"))]
pub(crate) use portable_atomic::AtomicU64;
#[cfg(target_has_atomic = "64")]
pub(crate) use std::sync::atomic::AtomicU64;
