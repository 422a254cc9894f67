//! The metrics server: `/metrics` for Prometheus, on [`crate::http`]'s server. The keeper's
//! thread never waits for it, nor it for the keeper: a scrape reads the kernel itself, over
//! rtnetlink ([`unbloat_system::tcnl`]: no process, which is what keeps a scrape a second under
//! 1 % of a core), and the counters under their lock.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use unbloat_system::rtnl::Rtnl;
use unbloat_system::state::StateDir;
use unbloat_system::tcnl;

use crate::http::{Handler, Request, Response};
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

/// `/metrics`, read when scraped; answering to the names in `.1` besides addresses and
/// `localhost` (`--web-host`).
struct Metrics(Scrape, Vec<String>);

impl Handler for Metrics {
    /// A foreign `Host` gets 421, as on the page.
    fn early(&self, head: &Request) -> Option<Response> {
        crate::web::host::foreign(head, &self.1).map(|why| Response::text(421, why))
    }

    fn answer(&self, request: Request) -> Response {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET" | "HEAD", "/metrics") => Response::new(200)
                .with_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                .with_body(self.0.text()),
            (_, "/metrics") => {
                Response::text(405, "GET /metrics").with_header("allow", "GET, HEAD")
            }
            _ => Response::text(404, "the metrics are at /metrics"),
        }
    }
}

/// Serves `/metrics` on `addr` from a thread of its own, to requests whose `Host` is an
/// address, `localhost` or one of `hosts`; the bound address.
pub fn metrics(
    addr: SocketAddr,
    scrape: Scrape,
    hosts: Vec<String>,
) -> std::io::Result<SocketAddr> {
    crate::http::spawn(addr, Arc::new(Metrics(scrape, hosts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 53: `/metrics` answered any `Host`, so a web page the admin visits could read it
    /// through DNS rebinding. A foreign name gets 421, as on the page; addresses, localhost and
    /// the `--web-host` names are served.
    #[test]
    fn metrics_refuse_a_foreign_host_name() {
        let scratch = crate::web::scratch::Scratch::new("metrics-host");
        let scrape = Scrape {
            state: StateDir::new(scratch.path().to_path_buf()),
            counters: Arc::default(),
            unread: Arc::default(),
        };
        let metrics = Metrics(scrape, vec!["router.lan".into()]);
        let get = |host: &str| {
            let req = Request::new("GET", "/metrics").with_header("host", host);
            crate::http::respond(&metrics, req, &crate::http::LIMITS)
        };
        let refused = get("rebind.evil.example:9723");
        assert_eq!(refused.status, 421);
        assert!(refused
            .body_text()
            .contains("--web-host rebind.evil.example"));
        assert!(!refused.body_text().contains("unbloat_"));
        for ok in [
            "127.0.0.1:9723",
            "[::1]:9723",
            "localhost",
            "router.lan:9723",
        ] {
            let res = get(ok);
            assert_eq!(res.status, 200, "{ok}");
            assert!(res.body_text().contains("unbloat_"), "{ok}");
        }
    }
}
