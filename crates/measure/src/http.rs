//! A plain web server as the far end: the IETF "Responsiveness under Working Conditions" test.
//!
//! Heads up! This follows draft-ietf-ippm-responsiveness (revisions 04-08; goresponsiveness at
//! 343954285090 and goserver at 62fc72ce99ec as the reference client and server): load is
//! parallel GETs of a large object and POSTs of an endless body, added per direction until
//! goodput stops rising; latency is "foreign" probes (a new connection: TCP handshake, TLS
//! handshake, a GET of a small object) and "self" probes (the small GET as a new HTTP/2 stream
//! on a loaded connection). The RPM figure itself is computed from the results by
//! `unbloat_report::rpm`.
//!
//! The layers, each a file under `http/`:
//! - `url`: a validated http(s) URL and the same-host rule.
//! - `config`: the `/.well-known/nq` JSON ([`discover`]).
//! - `tls`: rustls with the system's roots plus an optional CA file; ALPN h2, http/1.1.
//! - `conn`: one connection (TCP with DSCP, TLS, hyper HTTP/2 or HTTP/1.1), every step bounded.
//! - `ramp`: the saturation rule, pure. `load`: the [`crate::farend::Load`]. `probes`: the [`crate::farend::Probes`].
//!
//! What callers can rely on:
//! - [`discover`] and [`HttpTarget::from_urls`] give URLs on the host and port the user named
//!   only; no redirect to another host is ever followed, and load and probes follow none at all.
//! - [`open`] is blocking. It resolves the host once (every connection goes to that address),
//!   checks the server with one small GET (so a busy, stalled, redirecting or broken server is
//!   an error before the run, not in the middle), starts the probes at once and returns the load
//!   ready for [`crate::farend::Load::start`]. The async runtime (tokio, two worker threads) lives inside and
//!   ends when both halves are dropped.
//! - Nothing the server sends can panic this module or hang it past a timeout: response heads
//!   are bounded ([`MAX_HEAD_BYTES`]), small objects by [`HttpOptions::small_limit`],
//!   every step by `connect_timeout` or `request_timeout`. Errors are [`crate::MeasureError::FarEnd`]
//!   (what it did, in words), [`crate::MeasureError::FarEndBusy`] (HTTP 429 or 503) or
//!   [`crate::MeasureError::Unreachable`].
//!
//! ```no_run
//! use std::time::Instant;
//! use unbloat_measure::http::{self, HttpOptions};
//! # fn main() -> Result<(), unbloat_measure::MeasureError> {
//! let opts = HttpOptions::default();
//! let target = http::discover("https://nq.example.net/.well-known/nq", &opts)?;
//! let plans = unbloat_measure::profile::Profile::by_name("bidir")?.resolve(None)?.streams;
//! let (mut load, probes) = http::open(&target, &plans, &opts, Instant::now())?;
//! load.start()?;
//! # Ok(()) }
//! ```

mod config;
mod conn;
mod load;
mod probes;
mod ramp;
mod session;
mod target;
mod tls;
mod url;

pub use config::{discover, parse_config};
pub use conn::MAX_HEAD_BYTES;
pub use ramp::Ramp;
pub use session::{open, FarEnd};
pub use target::{HttpOptions, HttpTarget, MAX_CONNECTIONS};
pub use url::{Scheme, Url};
