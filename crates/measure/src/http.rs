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
//! - `ramp`: the saturation rule, pure. `load`: the [`Load`]. `probes`: the [`Probes`].
//! - `bench`: CPU cost of the load, for `unbloat bench`.
//!
//! What callers can rely on:
//! - [`discover`] and [`HttpTarget::from_urls`] give URLs on the host and port the user named
//!   only; no redirect to another host is ever followed, and load and probes follow none at all.
//! - [`open`] is blocking. It resolves the host once (every connection goes to that address),
//!   checks the server with one small GET (so a busy, stalled, redirecting or broken server is
//!   an error before the run, not in the middle), starts the probes at once and returns the load
//!   ready for [`Load::start`]. The async runtime (tokio, two worker threads) lives inside and
//!   ends when both halves are dropped.
//! - Nothing the server sends can panic this module or hang it past a timeout: response heads
//!   are bounded ([`conn::MAX_HEAD_BYTES`]), small objects by [`HttpOptions::small_limit`],
//!   every step by `connect_timeout` or `request_timeout`. Errors are [`MeasureError::FarEnd`]
//!   (what it did, in words), [`MeasureError::FarEndBusy`] (HTTP 429 or 503) or
//!   [`MeasureError::Unreachable`].
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

mod bench;
mod config;
mod conn;
mod load;
mod probes;
mod ramp;
mod tls;
mod url;

pub use bench::{load_cpu_cost, LoadCpuCost};
pub use config::{discover, parse_config};
pub use conn::MAX_HEAD_BYTES;
pub use ramp::Ramp;
pub use url::{Scheme, Url};

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use unbloat_report::Direction;

use crate::farend::{Load, Probes};
use crate::profile::StreamPlan;
use crate::MeasureError;
use conn::{read_bounded, Dialer, ReqBody};

/// The hard upper bound on load connections per direction.
pub const MAX_CONNECTIONS: usize = 32;

/// The three URLs of a responsiveness test, all on one host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// A small object (a few bytes): the probes GET it.
    pub small: Url,
    /// A large object (GBs, or endless): the download load GETs it again and again.
    pub large: Url,
    /// Where the upload load POSTs (the server must read and discard the body).
    pub upload: Url,
}

impl HttpTarget {
    /// Three URLs given directly; they must share one host and port.
    pub fn from_urls(small: &str, large: &str, upload: &str) -> Result<HttpTarget, MeasureError> {
        let parse = |t: &str| Url::parse(t).map_err(MeasureError::InvalidArgument);
        let target = HttpTarget {
            small: parse(small)?,
            large: parse(large)?,
            upload: parse(upload)?,
        };
        for u in [&target.large, &target.upload] {
            if !u.same_origin(&target.small) || u.scheme() != target.small.scheme() {
                return Err(MeasureError::InvalidArgument(format!(
                    "{u} is not on {}: the small, large and upload URLs must share scheme, host \
                     and port",
                    target.small.authority()
                )));
            }
        }
        Ok(target)
    }
}

/// How the HTTP far end runs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// An extra CA to trust (PEM), beside the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Load connections per direction at most (default 16, at most [`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// How often the load may add connections (the draft's 1 s interval).
    pub ramp_interval: Duration,
    /// A TCP connect that takes longer fails (5 s).
    pub connect_timeout: Duration,
    /// A TLS handshake or response head that takes longer fails, as does a body that stalls
    /// for longer (10 s).
    pub request_timeout: Duration,
    /// Foreign probes leave this often, self probes as often (200 ms, 5 Hz each).
    pub probe_interval: Duration,
    /// A probe not answered within this is lost (3 s).
    pub probe_timeout: Duration,
    /// The most a small object may weigh (64 KiB).
    pub small_limit: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            ca_file: None,
            max_connections: 16,
            ramp_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            probe_interval: Duration::from_millis(200),
            probe_timeout: Duration::from_secs(3),
            small_limit: 64 * 1024,
        }
    }
}

impl HttpOptions {
    fn check(&self) -> Result<(), MeasureError> {
        let bad = |why: &str| Err(MeasureError::InvalidArgument(why.to_string()));
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return bad("HTTP max connections must be 1 to 32 per direction");
        }
        if self.probe_interval < Duration::from_millis(10) {
            return bad("HTTP probe interval must be at least 10 ms");
        }
        if self.ramp_interval < Duration::from_millis(100) {
            return bad("HTTP ramp interval must be at least 100 ms");
        }
        Ok(())
    }
}

/// The two halves of a far end, as [`open`] returns them.
pub type FarEnd = (Box<dyn Load>, Box<dyn Probes>);

/// Opens the far end: see the module doc. `streams` gives the directions (and DSCP) of the
/// profile's load; their number does not matter, the ramp decides how many connections run.
pub fn open(
    target: &HttpTarget,
    streams: &[StreamPlan],
    opts: &HttpOptions,
    epoch: Instant,
) -> Result<FarEnd, MeasureError> {
    opts.check()?;
    let addr = resolve(&target.small)?;
    let tls = match target.small.scheme() {
        Scheme::Https => Some(tls::client_config(opts.ca_file.as_deref())?),
        Scheme::Http => None,
    };
    let dialer = Arc::new(Dialer::new(
        &target.small,
        addr,
        tls,
        opts.connect_timeout,
        opts.request_timeout,
    )?);
    let rt = Arc::new(runtime()?);
    let h2 = rt.block_on(preflight(&dialer, &target.small, opts.small_limit))?;
    let mut plan: Vec<(Direction, u8)> = Vec::new();
    for s in streams {
        if !plan.iter().any(|(d, _)| *d == s.direction) {
            plan.push((s.direction, s.dscp));
        }
    }
    let loaded: load::Loaded = Arc::new(Mutex::new(Vec::new()));
    let probes = probes::HttpProbes::start(
        Arc::clone(&rt),
        Arc::clone(&dialer),
        target.small.clone(),
        h2,
        Arc::clone(&loaded),
        opts,
        epoch,
    );
    let load = load::HttpLoad::new(rt, dialer, target, plan, opts, loaded);
    Ok((Box::new(load), Box::new(probes)))
}

/// One connection and a GET of the small object: the server answers as it should, or the
/// run does not start. Returns whether it speaks HTTP/2.
async fn preflight(dialer: &Dialer, small: &Url, limit: usize) -> Result<bool, MeasureError> {
    let mut conn = dialer.connect(0).await?;
    let get = conn.sender.send(http::Method::GET, small, ReqBody::Empty);
    let resp = match tokio::time::timeout(dialer.request_timeout, get).await {
        Err(_) => return Err(dialer.stalled("the answer to GET of the small object")),
        Ok(Err(e)) => {
            let why = format!("GET {}: {}", small.path(), conn::describe(&e));
            return Err(MeasureError::far_end(&dialer.server, why));
        }
        Ok(Ok(r)) => r,
    };
    dialer.check("GET", small, &resp)?;
    match tokio::time::timeout(
        dialer.request_timeout,
        read_bounded(resp.into_body(), limit),
    )
    .await
    {
        Err(_) => Err(dialer.stalled("the small object's body")),
        Ok(Err(why)) => Err(MeasureError::far_end(
            &dialer.server,
            format!("small object {}: {why}", small.path()),
        )),
        Ok(Ok(_)) => Ok(conn.sender.is_h2()),
    }
}

/// The host's first address; every connection of the run goes there.
fn resolve(url: &Url) -> Result<SocketAddr, MeasureError> {
    let host = url.host().to_string();
    let mut addrs = (host.as_str(), url.port())
        .to_socket_addrs()
        .map_err(|source| MeasureError::Resolve {
            host: host.clone(),
            source,
        })?;
    addrs.next().ok_or(MeasureError::NoAddress { host })
}

/// The module's own runtime: two workers, so TLS and HTTP/2 framing of the load run beside
/// the probes' timers rather than delaying them.
fn runtime() -> Result<Runtime, MeasureError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("unbloat-http")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| MeasureError::io("starting the HTTP runtime", e))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
