//! A stock `iperf3 -s` as the far end of the load, through iperf3's own control protocol.
//!
//! Heads up! iperf3 documents no protocol; this follows its source, github.com/esnet/iperf
//! (src/iperf_api.c, iperf_client_api.c, iperf_server_api.c, iperf_api.h, iperf.h,
//! iperf_error.c), read at 3.21 and checked against 3.12 (Debian 12, Ubuntu 22.04). TCP only.
//!
//! The layers:
//! - [`wire`]: the cookie, state bytes, parameters and results as data. Pure, property-tested.
//! - `codes`: iperf3's error codes in words.
//! - `control`: the control connection; every read bounded by the connect timeout.
//! - `stream`: one data connection, moved and counted as unbloat's own streams ([`crate::load`]).
//! - [`Iperf3Load`]: the [`crate::farend::Load`] of a test against `iperf3 -s`.
//!
//! What callers can rely on:
//! - A plan of uploads runs in iperf3's normal mode, of downloads in reverse mode, of as many of
//!   each in bidirectional mode (iperf3 3.7+); anything else is refused by [`Iperf3Load::new`].
//! - Uploads are marked with each stream's DSCP from the SYN on. Downloads are marked by the
//!   server, with one TOS for all (iperf3's `TOS` parameter); [`crate::farend::Load::finish`]'s
//!   notes say so when the plan asked for several.
//! - A busy server is [`crate::MeasureError::FarEndBusy`]; a refusal (SERVER_ERROR with
//!   iperf3's code in words), garbage, a stall or a close is [`crate::MeasureError::FarEnd`],
//!   each within the connect timeout per step; nothing a server sends panics or allocates more
//!   than [`wire::MAX_RESULTS_JSON`].
//! - The server sees each test to its end (results exchanged, IPERF_DONE) when `finish` returns
//!   Ok, and serves the next client after it has opened a new listener: `iperf3 -s` closes its
//!   listener between tests, so a client connecting in that instant is refused or reset (the
//!   same happens to iperf3's own client).

mod codes;
mod control;
mod load;
mod stream;
pub mod wire;

pub use load::{Iperf3Load, STOP_WAIT, TIME_MARGIN};
