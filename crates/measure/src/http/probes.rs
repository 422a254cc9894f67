//! The draft's latency probes against a web server, on an absolute schedule.
//!
//! draft-ietf-ippm-responsiveness, "Measuring Responsiveness": foreign probes open a new
//! connection and time its TCP handshake, its TLS handshake and a GET of the small object on it;
//! self probes send the small GET on a load-generating connection (a new HTTP/2 stream beside the
//! load's), so they wait in the same queues as the load.
//!
//! What callers can rely on:
//! - Foreign probes leave at `start + k * interval` from [`open`](super::open) to
//!   [`Probes::finish`]; self probes half an interval later, only while the load runs and only
//!   over HTTP/2 (over HTTP/1.1 a loaded connection carries one request at a time: a note says
//!   they were skipped). A late start is recorded as the probe's send lag, not shifted.
//! - Every probe appears in the results; one that failed or took longer than `probe_timeout`
//!   is lost (`rtt_ms: None`). A failed TCP connect loses that probe's TLS and GET samples too.
//! - A probe is one connection and a few hundred bytes: five a second cost little next to the
//!   load, so the test measures the link and not this process.

use crate::atomic64::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::Method;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use unbloat_report::{ProbeKind, ProbeSample, ProbeSeries};

use super::conn::{read_bounded, Dialer, ReqBody, Sender};
use super::load::Loaded;
use super::target::{lock, HttpOptions};
use super::url::Url;
use crate::farend::Probes;

#[derive(Debug, Clone, Copy)]
struct Rec {
    t_ns: u64,
    lag_ns: u64,
    rtt_ns: Option<u64>,
}

struct Class {
    name: &'static str,
    kind: ProbeKind,
    records: Mutex<Vec<Rec>>,
    replies: AtomicU64,
}

impl Class {
    fn new(name: &'static str, kind: ProbeKind) -> Arc<Class> {
        Arc::new(Class {
            name,
            kind,
            records: Mutex::new(Vec::new()),
            replies: AtomicU64::new(0),
        })
    }

    /// Records a probe as lost until it is answered; returns its index.
    fn push(&self, t_ns: u64, lag_ns: u64) -> usize {
        let mut r = lock(&self.records);
        r.push(Rec {
            t_ns,
            lag_ns,
            rtt_ns: None,
        });
        r.len() - 1
    }

    fn answer(&self, i: usize, t_ns: u64, rtt: Duration) {
        if let Some(rec) = lock(&self.records).get_mut(i) {
            rec.t_ns = t_ns;
            rec.rtt_ns = Some(rtt.as_nanos() as u64);
            self.replies.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What every probe task shares.
struct Ctx {
    dialer: Arc<Dialer>,
    small: Url,
    limit: usize,
    bound: Duration,
    epoch: Instant,
    tcp: Arc<Class>,
    tls: Option<Arc<Class>>,
    new_get: Arc<Class>,
    loaded_get: Option<Arc<Class>>,
    loaded: Loaded,
    inflight: AtomicUsize,
    latest_us: AtomicU64,
}

impl Ctx {
    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }
}

pub(crate) struct HttpProbes {
    rt: Arc<Runtime>,
    ctx: Arc<Ctx>,
    interval: Duration,
    scheduler: JoinHandle<()>,
    notes: Vec<String>,
}

impl HttpProbes {
    /// Starts probing at once; `h2` says whether the server speaks HTTP/2 (self probes).
    pub fn start(
        rt: Arc<Runtime>,
        dialer: Arc<Dialer>,
        small: Url,
        h2: bool,
        loaded: Loaded,
        opts: &HttpOptions,
        epoch: Instant,
    ) -> HttpProbes {
        let mut notes = Vec::new();
        if !h2 {
            notes.push(format!(
                "HTTP GET loaded: skipped; self probes need HTTP/2 and {} speaks HTTP/1.1 only \
                 (a loaded HTTP/1.1 connection carries one request at a time)",
                dialer.server
            ));
        }
        let tls = dialer.is_tls();
        let ctx = Arc::new(Ctx {
            dialer,
            small,
            limit: opts.small_limit,
            bound: opts.probe_timeout,
            epoch,
            tcp: Class::new("TCP connect", ProbeKind::TcpConnect),
            tls: tls.then(|| Class::new("TLS handshake", ProbeKind::TlsHandshake)),
            new_get: Class::new("HTTP GET new", ProbeKind::HttpNew),
            loaded_get: h2.then(|| Class::new("HTTP GET loaded", ProbeKind::HttpLoaded)),
            loaded,
            inflight: AtomicUsize::new(0),
            latest_us: AtomicU64::new(0),
        });
        let interval = opts.probe_interval;
        let c = Arc::clone(&ctx);
        let scheduler = rt.spawn(schedule(c, interval));
        HttpProbes {
            rt,
            ctx,
            interval,
            scheduler,
            notes,
        }
    }

    fn classes(&self) -> Vec<&Arc<Class>> {
        let c = &self.ctx;
        let mut all = vec![&c.tcp];
        all.extend(c.tls.as_ref());
        all.push(&c.new_get);
        all.extend(c.loaded_get.as_ref());
        all
    }
}

async fn schedule(ctx: Arc<Ctx>, interval: Duration) {
    let start = tokio::time::Instant::now();
    let mut round: u64 = 0;
    for k in 0u64.. {
        let foreign_at = start + interval * k as u32;
        tokio::time::sleep_until(foreign_at).await;
        spawn_probe(&ctx, foreign_at.into_std(), None);
        if ctx.loaded_get.is_none() {
            continue;
        }
        let self_at = foreign_at + interval / 2;
        tokio::time::sleep_until(self_at).await;
        // Only while the load runs: the load registers its HTTP/2 connections, stop clears them.
        let sender = {
            let mut senders = lock(&ctx.loaded);
            senders.retain(|s| !s.is_closed());
            if senders.is_empty() {
                continue;
            }
            round += 1;
            senders[(round as usize) % senders.len()].clone()
        };
        spawn_probe(&ctx, self_at.into_std(), Some(sender));
    }
}

fn spawn_probe(
    ctx: &Arc<Ctx>,
    due: Instant,
    loaded: Option<hyper::client::conn::http2::SendRequest<ReqBody>>,
) {
    let now = Instant::now();
    let (t, lag) = (
        ctx.ns(now),
        now.saturating_duration_since(due).as_nanos() as u64,
    );
    ctx.inflight.fetch_add(1, Ordering::Relaxed);
    let c = Arc::clone(ctx);
    match loaded {
        None => {
            let idx = (
                c.tcp.push(t, lag),
                c.tls.as_ref().map(|k| k.push(t, 0)),
                c.new_get.push(t, 0),
            );
            tokio::spawn(async move {
                let _ = timeout(c.bound, foreign(&c, idx)).await;
                c.inflight.fetch_sub(1, Ordering::Relaxed);
            });
        }
        Some(sender) => {
            let Some(class) = c.loaded_get.clone() else {
                return;
            };
            let i = class.push(t, lag);
            tokio::spawn(async move {
                let mut sender = Sender::H2(sender);
                let sent = Instant::now();
                if let Ok(Some(())) = timeout(c.bound, get_small(&c, &mut sender)).await {
                    class.answer(i, c.ns(sent), sent.elapsed());
                }
                c.inflight.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }
}

/// One foreign probe: connect (TCP, TLS), GET the small object, close.
async fn foreign(c: &Ctx, (tcp, tls, get): (usize, Option<usize>, usize)) {
    let started = Instant::now();
    let Ok(mut conn) = c.dialer.connect(0).await else {
        return;
    };
    let connect = conn.timings.connect;
    c.tcp.answer(tcp, c.ns(started), connect);
    c.latest_us
        .store(connect.as_micros().max(1) as u64, Ordering::Relaxed);
    if let (Some(class), Some(i), Some(took)) = (&c.tls, tls, conn.timings.tls) {
        class.answer(i, c.ns(started + connect), took);
    }
    let sent = Instant::now();
    if get_small(c, &mut conn.sender).await.is_some() {
        c.new_get.answer(get, c.ns(sent), sent.elapsed());
    }
}

/// GETs the small object; `Some` when it arrived whole, 2xx and within the size bound.
async fn get_small(c: &Ctx, sender: &mut Sender) -> Option<()> {
    let resp = sender
        .send(Method::GET, &c.small, ReqBody::Empty)
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    read_bounded(resp.into_body(), c.limit).await.ok()?;
    Some(())
}

impl Probes for HttpProbes {
    fn counts(&self, kind: ProbeKind) -> (usize, u64) {
        self.classes()
            .into_iter()
            .filter(|c| c.kind == kind)
            .fold((0, 0), |(s, a), c| {
                (
                    s + lock(&c.records).len(),
                    a + c.replies.load(Ordering::Relaxed),
                )
            })
    }

    fn replies(&self) -> u64 {
        self.classes()
            .iter()
            .map(|c| c.replies.load(Ordering::Relaxed))
            .sum()
    }

    fn latest_rtt_ms(&self) -> Option<f64> {
        match self.ctx.latest_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(us as f64 / 1000.0),
        }
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn finish(self: Box<Self>, grace: Duration, _idle_end_ns: u64) -> Vec<ProbeSeries> {
        self.scheduler.abort();
        let until = Instant::now() + grace;
        while self.ctx.inflight.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let series = self
            .classes()
            .into_iter()
            .map(|c| ProbeSeries {
                name: c.name.to_string(),
                kind: c.kind,
                dscp: 0,
                interval_ms: self.interval.as_secs_f64() * 1e3,
                hop: Default::default(),
                samples: lock(&c.records)
                    .iter()
                    .map(|r| ProbeSample {
                        t: r.t_ns as f64 / 1e9,
                        rtt_ms: r.rtt_ns.map(|ns| ns as f64 / 1e6),
                        owd_up_ms: None,
                        owd_down_ms: None,
                        send_lag_ms: r.lag_ns as f64 / 1e6,
                    })
                    .collect(),
            })
            .collect();
        drop(self.rt);
        series
    }
}
