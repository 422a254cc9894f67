//! The accept loop under both HTTP servers (metrics, web page), with the limits axum's own
//! `serve` does not have (issue 36, item 9).
//!
//! Without them, ~1,100 idle local connections took every descriptor the daemon had (the soft
//! limit is 1024), and the keeper's next apply could not open a netlink socket or start `tc`.
//! So each server:
//!
//! - holds at most [`LIMITS`]`.connections` connections; one more is accepted and closed at once
//!   (not left in the kernel's queue, where its client would wait without an answer);
//! - closes a connection whose request head has not arrived within `header_timeout` (a client
//!   that sends a byte now and then: hyper's `header_read_timeout`);
//! - closes a connection idle for `idle_timeout` with no request being answered (a keep-alive
//!   connection left open by a browser tab, or opened and never used);
//! - on an accept error (EMFILE, ENFILE: descriptors are short anyway) waits a moment instead
//!   of spinning.
//!
//! Two servers at 64 each bound what HTTP can hold to 128 descriptors, well under the 1024 the
//! daemon gets, so the keeper always has the few it needs for an apply. The page polls every
//! second or two, so 10 s of idleness is a closed tab; a request that takes long (a reload in a
//! slow kernel) keeps its connection, since only idleness without a request counts.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// What one server allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections held at once.
    pub connections: usize,
    /// From a connection's first byte, or the end of the last answer, to a whole request head.
    pub header_timeout: Duration,
    /// No byte either way and no request being answered for this long: closed.
    pub idle_timeout: Duration,
}

/// The daemon's limits, per server.
pub const LIMITS: Limits = Limits {
    connections: 64,
    header_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
};

/// After an accept error, this long before the next accept (axum's `serve` waits 1 s).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` for ever, within `limits`.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        // Over the cap: closed now (the client reads an end of file at once).
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            connection(stream, app, limits).await;
            drop(slot);
        });
    }
}

/// When a connection last moved a byte, and how many of its requests are being answered.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// Counts a request as being answered until it is dropped (answered or abandoned).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Busy {
        activity.busy.fetch_add(1, Ordering::Relaxed);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connection(stream: TcpStream, app: Router, limits: Limits) {
    let activity = Arc::new(Activity {
        start: Instant::now(),
        last_ms: AtomicU64::new(0),
        busy: AtomicUsize::new(0),
    });
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let app = TowerToHyperService::new(app);
    let counted = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = Busy::new(&counted);
        let answer = hyper::service::Service::call(&app, req);
        async move {
            let out = answer.await;
            drop(busy);
            out
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(io, service);
    tokio::pin!(conn);
    loop {
        let deadline = activity.last() + limits.idle_timeout;
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        let idle = activity.busy.load(Ordering::Relaxed) == 0
            && activity.last().elapsed() >= limits.idle_timeout;
        if idle {
            // Nothing is being answered: hyper closes at once; a last second for it to do so.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
            return;
        }
    }
}

/// The connection's socket, noting each byte read or written in its [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn noted<T>(&self, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Ok(_)) = &poll {
            self.activity.touch();
        }
        poll
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.noted(poll)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.noted(poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use std::io::{Read, Write};

    fn start(limits: Limits) -> std::net::SocketAddr {
        let app = Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "done"
            }),
        );
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                serve(listener, app, limits).await
            });
        });
        addr
    }

    const SHORT: Limits = Limits {
        connections: 4,
        header_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_millis(500),
    };

    /// A request that takes longer than the idle timeout is answered: only idleness with
    /// nothing being answered closes a connection.
    #[test]
    fn a_slow_answer_is_not_idleness() {
        let addr = start(SHORT);
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("done"),
            "{out:?}"
        );
    }

    /// A client that sends its request head a byte at a time, each well within the idle
    /// timeout, is closed once the head is late.
    #[test]
    fn a_request_head_dribbled_in_is_cut_off() {
        let addr = start(SHORT);
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let t0 = Instant::now();
        let mut closed = None;
        for b in b"GET /slow HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            .iter()
            .cycle()
        {
            if s.write_all(&[*b]).is_err() {
                closed = Some(t0.elapsed());
                break;
            }
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let mut buf = [0u8; 256];
            // Any answer, or the end of the stream: the server is done with it.
            if s.read(&mut buf).is_ok() {
                closed = Some(t0.elapsed());
                break;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        let closed = closed.expect("a dribbling client kept its connection 5 s");
        assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
    }
}
