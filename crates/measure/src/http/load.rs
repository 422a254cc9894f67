//! The HTTP load: parallel large downloads (GET, read, discard, GET again) and uploads (POST
//! of an endless body), added per direction until goodput stops rising ([`super::ramp`]).
//!
//! What callers can rely on:
//! - Goodput per connection is TCP's own count, read from TCP_INFO on a duplicate of the
//!   socket: downloads `tcpi_bytes_received`, uploads `tcpi_bytes_acked` (what the server's
//!   kernel acknowledged), as unbloat's own load streams count. It includes HTTP and TLS framing
//!   (a few percent), and does not depend on when this process reads.
//! - A stream is a slot: when its HTTP/1.1 connection ends (the server closes after a body, or
//!   answers an upload early) the slot reconnects and keeps counting from where it was.
//! - A connection that fails (reset, refused, a non-2xx answer, a stalled body) makes
//!   [`Load::error`] say why; the draft aborts the test then, and so does the timeline.
//! - [`Load::stop`] sets SO_LINGER 0 on every socket and ends every task: connections are
//!   reset, nothing still buffered drains into the idle tail.

use crate::atomic64::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use hyper::client::conn::http2;
use socket2::Socket;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use unbloat_report::Direction;

use super::conn::{self, describe, graceful_end, Conn, Dialer, ReqBody, Sender};
use super::ramp::Ramp;
use super::target::{lock, HttpOptions, HttpTarget};
use super::url::Url;
use crate::farend::{Load, StreamInfo};
use crate::{sockopt, MeasureError};

/// Connections each direction starts with and adds per rising interval: the early revisions of
/// the draft start with 4 and add 4 (later ones add 1, which takes 16 s to reach 16).
const STEP: usize = 4;
/// Size of the upload's repeated chunk.
const UPLOAD_CHUNK: usize = 256 * 1024;

/// HTTP/2 load connections that self probes may send on, shared with the probes.
pub(crate) type Loaded = Arc<Mutex<Vec<http2::SendRequest<ReqBody>>>>;

/// One load stream: a slot that may live over several connections.
struct Slot {
    info: StreamInfo,
    /// Goodput of the slot's earlier connections.
    base: AtomicU64,
    /// A duplicate of the current connection's socket.
    sock: Mutex<Option<Socket>>,
    /// The count at [`Load::stop`].
    frozen: Mutex<Option<u64>>,
}

impl Slot {
    fn counter(&self, sock: &Socket) -> u64 {
        let count = match self.info.direction {
            Direction::Down => sockopt::tcp_bytes_received(sock),
            Direction::Up => sockopt::tcp_bytes_acked(sock),
        };
        count.unwrap_or(0)
    }

    fn bytes(&self) -> u64 {
        if let Some(total) = *lock(&self.frozen) {
            return total;
        }
        let current = lock(&self.sock).as_ref().map_or(0, |s| self.counter(s));
        self.base.load(Ordering::Relaxed) + current
    }

    fn attach(&self, sock: Socket) {
        let mut current = lock(&self.sock);
        if let Some(old) = current.take() {
            self.base.fetch_add(self.counter(&old), Ordering::Relaxed);
        }
        *current = Some(sock);
    }

    /// Final count, and SO_LINGER 0 so the close that follows is a reset.
    fn freeze(&self) {
        let mut current = lock(&self.sock);
        let last = current.as_ref().map_or(0, |s| self.counter(s));
        *lock(&self.frozen) = Some(self.base.load(Ordering::Relaxed) + last);
        if let Some(s) = current.take() {
            let _ = s.set_linger(Some(Duration::ZERO));
        }
    }
}

struct Shared {
    slots: Mutex<Vec<Arc<Slot>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    error: Mutex<Option<String>>,
    stopping: AtomicBool,
    loaded: Loaded,
    saturated: Mutex<Vec<String>>,
}

impl Shared {
    fn fail(&self, why: String) {
        if !self.stopping.load(Ordering::Relaxed) {
            lock(&self.error).get_or_insert(why);
        }
    }
}

/// Everything a slot task needs.
#[derive(Clone)]
struct Job {
    dialer: Arc<Dialer>,
    url: Url,
    direction: Direction,
    dscp: u8,
    shared: Arc<Shared>,
    chunk: Bytes,
}

pub(crate) struct HttpLoad {
    rt: Arc<Runtime>,
    dialer: Arc<Dialer>,
    target: HttpTarget,
    /// The directions of the profile and their DSCP.
    plan: Vec<(Direction, u8)>,
    max: usize,
    interval: Duration,
    shared: Arc<Shared>,
    started: Option<Instant>,
}

impl HttpLoad {
    pub fn new(
        rt: Arc<Runtime>,
        dialer: Arc<Dialer>,
        target: &HttpTarget,
        plan: Vec<(Direction, u8)>,
        opts: &HttpOptions,
        loaded: Loaded,
    ) -> HttpLoad {
        HttpLoad {
            rt,
            dialer,
            target: target.clone(),
            plan,
            max: opts.max_connections,
            interval: opts.ramp_interval,
            shared: Arc::new(Shared {
                slots: Mutex::new(Vec::new()),
                tasks: Mutex::new(Vec::new()),
                error: Mutex::new(None),
                stopping: AtomicBool::new(false),
                loaded,
                saturated: Mutex::new(Vec::new()),
            }),
            started: None,
        }
    }

    fn job(&self, direction: Direction, dscp: u8) -> Job {
        let url = match direction {
            Direction::Down => self.target.large.clone(),
            Direction::Up => self.target.upload.clone(),
        };
        let mut chunk = vec![0u8; UPLOAD_CHUNK];
        crate::server::fill_pattern(&mut chunk);
        Job {
            dialer: Arc::clone(&self.dialer),
            url,
            direction,
            dscp,
            shared: Arc::clone(&self.shared),
            chunk: Bytes::from(chunk),
        }
    }
}

/// Adds a slot and starts its task (with a connection already made, or one it makes).
fn add_slot(job: &Job, first: Option<Conn>) {
    let mut slots = lock(&job.shared.slots);
    let n = slots
        .iter()
        .filter(|s| s.info.direction == job.direction)
        .count();
    let word = match job.direction {
        Direction::Down => "download",
        Direction::Up => "upload",
    };
    let slot = Arc::new(Slot {
        info: StreamInfo {
            name: format!("HTTP {word} {}", n + 1),
            direction: job.direction,
            dscp: job.dscp,
        },
        base: AtomicU64::new(0),
        sock: Mutex::new(None),
        frozen: Mutex::new(None),
    });
    slots.push(Arc::clone(&slot));
    drop(slots);
    let job2 = job.clone();
    let task = tokio::spawn(async move {
        if let Err(e) = run_slot(&job2, &slot, first).await {
            job2.shared.fail(format!("{}: {e}", slot.info.name));
        }
    });
    lock(&job.shared.tasks).push(task);
}

async fn run_slot(job: &Job, slot: &Slot, first: Option<Conn>) -> Result<(), MeasureError> {
    let mut conn = match first {
        Some(c) => c,
        None => job.dialer.connect(job.dscp).await?,
    };
    loop {
        let dup = conn
            .sock
            .try_clone()
            .map_err(|e| MeasureError::io("duplicating a socket", e))?;
        slot.attach(dup);
        if let Sender::H2(s) = &conn.sender {
            lock(&job.shared.loaded).push(s.clone());
        }
        match job.direction {
            Direction::Down => download(job, &mut conn).await?,
            Direction::Up => upload(job, &mut conn).await?,
        }
        conn = job.dialer.connect(job.dscp).await?;
    }
}

/// GETs the large object again and again on one connection; returns when the connection is
/// done (HTTP/1.1 closed by the server), so the slot reconnects.
async fn download(job: &Job, conn: &mut Conn) -> Result<(), MeasureError> {
    let d = &job.dialer;
    loop {
        let resp = match timeout(
            d.request_timeout,
            conn.sender.send(Method::GET, &job.url, ReqBody::Empty),
        )
        .await
        {
            Err(_) => return Err(d.stalled("the answer to GET of the large object")),
            Ok(Err(e)) if graceful_end(&e) => return Ok(()),
            Ok(Err(e)) => return Err(MeasureError::far_end(&d.server, describe(&e))),
            Ok(Ok(r)) => r,
        };
        d.check("GET", &job.url, &resp)?;
        let mut body = resp.into_body();
        loop {
            use http_body_util::BodyExt;
            match timeout(d.request_timeout, body.frame()).await {
                Err(_) => return Err(d.stalled("the large object's body")),
                Ok(None) => break,
                Ok(Some(Err(e))) if graceful_end(&e) => return Ok(()),
                Ok(Some(Err(e))) => {
                    let why = format!("download broke: {}", describe(&e));
                    return Err(MeasureError::far_end(&d.server, why));
                }
                Ok(Some(Ok(_))) => {}
            }
        }
        if !still_open(d, &mut conn.sender).await {
            return Ok(());
        }
    }
}

/// POSTs an endless body. A server that reads it never answers; one that answers early (2xx)
/// is asked again, on the same HTTP/2 connection or a new HTTP/1.1 one.
async fn upload(job: &Job, conn: &mut Conn) -> Result<(), MeasureError> {
    let d = &job.dialer;
    loop {
        let body = ReqBody::Endless(job.chunk.clone());
        let resp = match conn.sender.send(Method::POST, &job.url, body).await {
            Err(e) if graceful_end(&e) => return Ok(()),
            Err(e) if closed_under_us(&e) => {
                let why = format!(
                    "closed the connection in the middle of an upload ({}): its upload URL \
                     must read an endless POST body; a body size limit (nginx's \
                     client_max_body_size, a 413 answer) ends it like this",
                    describe(&e)
                );
                return Err(MeasureError::far_end(&d.server, why));
            }
            Err(e) => {
                let why = format!("upload broke: {}", describe(&e));
                return Err(MeasureError::far_end(&d.server, why));
            }
            Ok(r) => r,
        };
        d.check("POST", &job.url, &resp)?;
        let _ = timeout(d.request_timeout, conn::discard(resp.into_body())).await;
        if !conn.sender.is_h2() {
            return Ok(());
        }
    }
}

/// A write the far end's kernel refused: it closed or reset the connection while we sent.
fn closed_under_us(e: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            return matches!(io.kind(), BrokenPipe | ConnectionReset);
        }
        source = s.source();
    }
    false
}

async fn still_open(d: &Dialer, sender: &mut Sender) -> bool {
    match sender {
        Sender::H1(s) => matches!(timeout(d.request_timeout, s.ready()).await, Ok(Ok(()))),
        Sender::H2(s) => !s.is_closed(),
    }
}

/// Adds connections each interval while goodput rises (see [`super::ramp`]).
async fn ramp(jobs: Vec<Job>, max: usize, interval: Duration) {
    let shared = Arc::clone(&jobs[0].shared);
    let mut ramps: Vec<Ramp> = jobs.iter().map(|_| Ramp::new(STEP, max)).collect();
    let total = |dir: Direction| -> (u64, usize) {
        let slots = lock(&shared.slots);
        let mine = slots.iter().filter(|s| s.info.direction == dir);
        mine.fold((0, 0), |(b, n), s| (b + s.bytes(), n + 1))
    };
    let mut last: Vec<u64> = jobs.iter().map(|j| total(j.direction).0).collect();
    let mut tick = tokio::time::interval(interval);
    tick.tick().await;
    let started = Instant::now();
    loop {
        tick.tick().await;
        for (i, job) in jobs.iter().enumerate() {
            let (bytes, open) = total(job.direction);
            let bps = bytes.saturating_sub(last[i]) as f64 * 8.0 / interval.as_secs_f64();
            last[i] = bytes;
            let was = ramps[i].saturated_at();
            for _ in 0..ramps[i].next(bps, open) {
                add_slot(job, None);
            }
            if let (None, Some(n)) = (was, ramps[i].saturated_at()) {
                lock(&shared.saturated).push(format!(
                    "HTTP {:?} load: goodput stopped rising at {n} connections after {:.0} s \
                     ({:.1} Mbit/s)",
                    job.direction,
                    started.elapsed().as_secs_f64(),
                    bps / 1e6
                ));
            }
        }
    }
}

impl Load for HttpLoad {
    fn start(&mut self) -> Result<(), MeasureError> {
        let jobs: Vec<Job> = self.plan.iter().map(|&(d, s)| self.job(d, s)).collect();
        if jobs.is_empty() {
            return Ok(());
        }
        let initial = STEP.min(self.max);
        let first = self.rt.block_on(async {
            let mut pending = Vec::new();
            for job in &jobs {
                for _ in 0..initial {
                    let d = Arc::clone(&job.dialer);
                    let dscp = job.dscp;
                    pending.push(tokio::spawn(async move { d.connect(dscp).await }));
                }
            }
            let mut conns = Vec::new();
            for p in pending {
                match p.await {
                    Ok(Ok(c)) => conns.push(c),
                    Ok(Err(e)) => return Err(e),
                    Err(e) => return Err(MeasureError::io("a load task", e.into())),
                }
            }
            Ok(conns)
        })?;
        let _guard = self.rt.enter();
        let mut conns = first.into_iter();
        for job in &jobs {
            for conn in conns.by_ref().take(initial) {
                add_slot(job, Some(conn));
            }
        }
        let task = tokio::spawn(ramp(jobs, self.max, self.interval));
        lock(&self.shared.tasks).push(task);
        self.started = Some(Instant::now());
        Ok(())
    }

    fn streams(&self) -> Vec<StreamInfo> {
        lock(&self.shared.slots)
            .iter()
            .map(|s| s.info.clone())
            .collect()
    }

    fn bytes(&self) -> Vec<u64> {
        lock(&self.shared.slots).iter().map(|s| s.bytes()).collect()
    }

    fn error(&self) -> Option<String> {
        lock(&self.shared.error).clone()
    }

    fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        for slot in lock(&self.shared.slots).iter() {
            slot.freeze();
        }
        lock(&self.shared.loaded).clear();
        let tasks: Vec<JoinHandle<()>> = lock(&self.shared.tasks).drain(..).collect();
        for t in &tasks {
            t.abort();
        }
        // Wait (briefly) until every task is gone, so every socket is closed: reset now.
        self.rt.block_on(async {
            for t in tasks {
                let _ = timeout(Duration::from_secs(1), t).await;
            }
        });
    }

    fn finish(&mut self) -> Result<Vec<String>, MeasureError> {
        let slots = lock(&self.shared.slots);
        let count = |d| slots.iter().filter(|s| s.info.direction == d).count();
        let mut notes = vec![format!(
            "HTTP load on {}: {} download and {} upload connections at most",
            self.dialer.server,
            count(Direction::Down),
            count(Direction::Up)
        )];
        notes.extend(lock(&self.shared.saturated).iter().cloned());
        Ok(notes)
    }
}
