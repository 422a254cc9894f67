//! The daemon's HTTP servers (axum's router on a tokio runtime of their own thread, accepted by
//! [`crate::http`] within its connection cap and timeouts): `/metrics` for Prometheus. The keeper's thread never waits for them, nor they for it: a scrape reads the
//! kernel itself, over rtnetlink ([`unbloat_system::tcnl`]: no process, which is what keeps a
//! scrape a second under 1 % of a core), and the counters under their lock.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use unbloat_system::rtnl::Rtnl;
use unbloat_system::state::StateDir;
use unbloat_system::tcnl;

use crate::metrics::{self, DaemonCounters, Sample};

/// Where the servers listen (the bound addresses: port 0 becomes the one the kernel gave).
#[derive(Debug, Clone, Default)]
pub struct Servers {
    pub metrics: Option<SocketAddr>,
    pub web: Option<SocketAddr>,
}

/// What a scrape reads.
#[derive(Clone)]
pub struct Scrape {
    pub state: StateDir,
    pub counters: Arc<Mutex<DaemonCounters>>,
    /// The last reason each interface could not be read, so a scrape every second says a
    /// reason once, not once a second.
    pub unread: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Scrape {
    /// Every shaped interface as the kernel reports it now, then the text. An interface that
    /// cannot be read (gone between the list and the read) is left out of this scrape.
    pub fn text(&self) -> String {
        // One socket per scrape, opened on the scrape's own thread (a socket stays in the
        // namespace of the thread that opened it, and an `Rtnl` serves one caller at a time).
        let rtnl = Rtnl::open();
        let mut samples = vec![];
        for iface in self.state.list().unwrap_or_default() {
            let Ok(Some(record)) = self.state.load(&iface) else {
                continue;
            };
            let name = iface.to_string();
            let live = match &rtnl {
                Ok(rtnl) => tcnl::read_plan(rtnl, &record.plan).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let mut unread = self.unread.lock().unwrap_or_else(|e| e.into_inner());
            let live = match live {
                Ok(live) => {
                    unread.remove(&name);
                    live
                }
                Err(why) => {
                    if unread.get(&name) != Some(&why) {
                        crate::say::warn(&format!("metrics: {name} left out: {why}"));
                        unread.insert(name.clone(), why);
                    }
                    continue;
                }
            };
            drop(unread);
            samples.push(Sample {
                iface: name,
                live,
                plan: Some(record.plan),
            });
        }
        let counters = self
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        metrics::render(&samples, &counters)
    }
}

/// Serves `/metrics` on `addr` from a thread of its own; the bound address.
pub fn metrics(addr: SocketAddr, scrape: Scrape) -> std::io::Result<SocketAddr> {
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let scrape = scrape.clone();
            async move {
                match tokio::task::spawn_blocking(move || scrape.text()).await {
                    Ok(text) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response(),
                    Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
                }
            }
        }),
    );
    spawn(addr, app)
}

/// Binds now (so a taken port is the caller's error), then serves from a new thread, within
/// [`crate::http::LIMITS`].
pub fn spawn(addr: SocketAddr, app: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            crate::http::serve(listener, app, crate::http::LIMITS).await;
        })
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// Whether the server closed `s` within `wait` (an end of file or a reset).
    fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    fn http_get(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// Issue 36, item 9: ~1,100 idle connections used to take every descriptor the daemon had.
    /// Past the cap a connection is closed at once; an idle one is closed after the timeout; the
    /// server still answers afterwards.
    #[test]
    fn idle_connections_are_capped_and_timed_out() {
        let app = Router::new().route("/", get(|| async { "ok" }));
        let addr = spawn("127.0.0.1:0".parse().unwrap(), app).unwrap();
        let cap = crate::http::LIMITS.connections;
        let idle = crate::http::LIMITS.idle_timeout;
        let mut held: Vec<TcpStream> = (0..cap)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Each taken by the server before the next one comes.
        std::thread::sleep(Duration::from_millis(300));
        let mut over = TcpStream::connect(addr).unwrap();
        assert!(
            closed_within(&mut over, Duration::from_secs(2)),
            "a connection past the cap of {cap} was kept open"
        );
        let t0 = Instant::now();
        for s in &mut held {
            let left = (idle + Duration::from_secs(3)).saturating_sub(t0.elapsed());
            assert!(
                closed_within(s, left.max(Duration::from_millis(10))),
                "an idle connection outlived {idle:?}"
            );
        }
        assert!(
            http_get(addr).starts_with("HTTP/1.1 200"),
            "no answer after the flood"
        );
    }
}
