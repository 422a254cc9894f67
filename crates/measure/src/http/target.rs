//! The test's endpoints and options, and what every part of the HTTP far end shares: the one
//! address a run goes to, the runtime, a lock that survives a panicked holder.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::url::Url;
use crate::MeasureError;

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
    pub(super) fn check(&self) -> Result<(), MeasureError> {
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

/// The host's first address; every connection of the run goes there.
pub(super) fn resolve(url: &Url) -> Result<SocketAddr, MeasureError> {
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
pub(super) fn runtime() -> Result<Runtime, MeasureError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("unbloat-http")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| MeasureError::io("starting the HTTP runtime", e))
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
