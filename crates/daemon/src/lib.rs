//! unbloat-daemon: shaping that stays on (issue 14).
//!
//! - [`keeper`]: the decisions (which link events call for what) and the transactions that keep
//!   the config applied: at start, on link events, on reload, periodically.
//! - [`run`]: `unbloat daemon`'s threads and loop: link events, signals, the control socket, the
//!   systemd notifications and watchdog.
//! - [`autorate`]: a controller per `[autorate.NAME]` table, moving cake's rates beside the
//!   keeper under one lock.
//! - [`control`]: the control socket `unbloat reload` and `unbloat status` ask.
//! - [`http`]: the blocking HTTP/1.1 server under both: a thread per connection, a connection
//!   cap, head, body and idle timeouts.
//! - [`serve`]: the metrics server (`/metrics`).
//! - [`web`]: the web page: status, live graphs, the config form, test and tune runs, reports.
//! - [`metrics`]: Prometheus's text format from what tc reports (pure).
//! - [`say`]: log lines with journald's priorities.
//! - `seen` (feature `networks`): which network an interface is on and why, decided from its
//!   gateway's MAC (pure); the keeper's side is `keeper::follow`.
pub mod autorate;
pub mod control;
pub mod http;
pub mod keeper;
pub mod metrics;
pub mod run;
pub mod say;
#[cfg(feature = "networks")]
pub mod seen;
pub mod serve;
pub mod web;
