//! The daemon's HTTP servers (axum on a tokio runtime of their own thread): `/metrics` for
//! Prometheus. The keeper's thread never waits for them, nor they for it: a scrape reads the
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
        for name in self.state.list().unwrap_or_default() {
            let Ok(Some(record)) = self.state.load(&name) else {
                continue;
            };
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

/// Binds now (so a taken port is the caller's error), then serves from a new thread.
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
            if let Err(e) = axum::serve(listener, app).await {
                crate::say::error(&format!("the HTTP server on {bound} stopped: {e}"));
            }
        })
    });
    Ok(bound)
}
