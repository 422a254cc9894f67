//! One HTTP connection to the far end: TCP (marked with a DSCP), TLS when the URL is https,
//! then HTTP/2 when ALPN chose "h2", HTTP/1.1 otherwise.
//!
//! What callers can rely on:
//! - [`Dialer::connect`] returns the time each step took (the draft's foreign probes time
//!   exactly these) and a duplicate of the TCP socket, taken before TLS wraps it, so TCP_INFO
//!   (goodput) and SO_LINGER (reset at the end) stay reachable whatever owns the stream.
//! - Every step is bounded: connect by `connect_timeout`, the TLS handshake and every response
//!   head by `request_timeout`, response heads by [`MAX_HEAD_BYTES`] (HTTP/1.1) or
//!   [`MAX_HEAD_BYTES`] of header list (HTTP/2), small bodies by the caller's limit. A server that
//!   breaks a bound gets a [`MeasureError::FarEnd`] saying which, never a hang or a panic.
//! - Dropping a [`Conn`] ends its connection task (and so closes the socket once the duplicate
//!   is dropped too).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpSocket;
use tokio::time::timeout;
use tokio_rustls::TlsConnector;

use super::tls::ALPN_H2;
use super::url::{Scheme, Url};
use crate::{sockopt, MeasureError};

/// The most a response head may take: hyper's HTTP/1.1 read buffer (which also bounds the
/// body reads, so it is a read size too) and the HTTP/2 header list. Real servers send < 1 KiB.
pub const MAX_HEAD_BYTES: usize = 128 * 1024;
/// HTTP/2 flow-control windows. The defaults (64 KiB, RFC 9113 §6.9.2) would cap a download at
/// 64 KiB per round trip, 5 Mbit/s at 100 ms: the load must be limited by TCP, not by HTTP/2.
const H2_STREAM_WINDOW: u32 = 16 << 20;
const H2_CONNECTION_WINDOW: u32 = 64 << 20;

/// A request body: nothing (GET) or the same chunk forever (the upload load; cloning `Bytes`
/// is a reference count, so an endless upload costs no copying here).
pub(crate) enum ReqBody {
    Empty,
    Endless(Bytes),
}

impl Body for ReqBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &*self {
            ReqBody::Empty => Poll::Ready(None),
            ReqBody::Endless(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk.clone())))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReqBody::Empty)
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReqBody::Empty => SizeHint::with_exact(0),
            ReqBody::Endless(_) => SizeHint::default(),
        }
    }
}

/// Where and how to connect; one per run, shared by the load and the probes.
pub(crate) struct Dialer {
    pub addr: SocketAddr,
    /// The far end as errors name it: "https://host:port".
    pub server: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
}

/// How long each step of a connection took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    pub connect: Duration,
    pub tls: Option<Duration>,
}

pub(crate) enum Sender {
    H1(http1::SendRequest<ReqBody>),
    H2(http2::SendRequest<ReqBody>),
}

/// An open HTTP connection.
pub(crate) struct Conn {
    pub sender: Sender,
    /// A duplicate of the TCP socket (same kernel socket, another descriptor).
    pub sock: Socket,
    pub timings: Timings,
    _driver: AbortOnDrop,
}

/// Aborts a task when dropped: a connection's I/O task must not outlive its owner.
pub(crate) struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Dialer {
    pub fn new(
        base: &Url,
        addr: SocketAddr,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Dialer, MeasureError> {
        let tls = match (base.scheme(), tls) {
            (Scheme::Https, Some(config)) => {
                let name = ServerName::try_from(base.host().to_string()).map_err(|e| {
                    MeasureError::InvalidArgument(format!("{}: bad TLS name: {e}", base.host()))
                })?;
                Some((TlsConnector::from(config), name))
            }
            _ => None,
        };
        Ok(Dialer {
            addr,
            server: format!("{}://{}", base.scheme().as_str(), base.authority()),
            tls,
            connect_timeout,
            request_timeout,
        })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    fn fail(&self, why: impl AsRef<str>) -> MeasureError {
        MeasureError::far_end(&self.server, why)
    }

    /// Opens a connection: TCP, TLS, the HTTP handshake; see the module doc.
    pub async fn connect(&self, dscp: u8) -> Result<Conn, MeasureError> {
        let addr = self.addr;
        let io_err = |what: &str, e: std::io::Error| MeasureError::io(what.to_string(), e);
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .map_err(|e| io_err("opening a TCP socket", e))?;
        sockopt::set_dscp(&sock, dscp, addr.is_ipv6()).map_err(|e| io_err("marking DSCP", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| io_err("non-blocking socket", e))?;
        let dup = sock
            .try_clone()
            .map_err(|e| io_err("duplicating a socket", e))?;
        let tcp = TcpSocket::from_std_stream(std::net::TcpStream::from(sock));
        let started = Instant::now();
        let stream = match timeout(self.connect_timeout, tcp.connect(addr)).await {
            Err(_) => {
                let why = format!("no answer within {:?}", self.connect_timeout);
                let source = std::io::Error::new(std::io::ErrorKind::TimedOut, why);
                return Err(MeasureError::Unreachable { addr, source });
            }
            Ok(Err(source)) => return Err(MeasureError::Unreachable { addr, source }),
            Ok(Ok(s)) => s,
        };
        let connect = started.elapsed();
        let _ = stream.set_nodelay(true);
        let Some((connector, name)) = &self.tls else {
            let timings = Timings { connect, tls: None };
            return self
                .handshake(TokioIo::new(stream), false, dup, timings)
                .await;
        };
        let started = Instant::now();
        let tls = match timeout(
            self.request_timeout,
            connector.connect(name.clone(), stream),
        )
        .await
        {
            Err(_) => return Err(self.stalled("the TLS handshake")),
            Ok(Err(e)) => return Err(self.fail(format!("TLS handshake failed: {e}"))),
            Ok(Ok(s)) => s,
        };
        let timings = Timings {
            connect,
            tls: Some(started.elapsed()),
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(ALPN_H2);
        self.handshake(TokioIo::new(tls), h2, dup, timings).await
    }

    async fn handshake<I>(
        &self,
        io: I,
        h2: bool,
        sock: Socket,
        timings: Timings,
    ) -> Result<Conn, MeasureError>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, driver) = if h2 {
            let mut b = http2::Builder::new(TokioExecutor::new());
            b.initial_stream_window_size(H2_STREAM_WINDOW)
                .initial_connection_window_size(H2_CONNECTION_WINDOW)
                .max_header_list_size(MAX_HEAD_BYTES as u32);
            let (sender, conn) = match timeout(self.request_timeout, b.handshake(io)).await {
                Err(_) => return Err(self.stalled("the HTTP/2 handshake")),
                Ok(r) => r.map_err(|e| self.fail(format!("HTTP/2 handshake: {}", describe(&e))))?,
            };
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            (Sender::H2(sender), driver)
        } else {
            let mut b = http1::Builder::new();
            b.max_buf_size(MAX_HEAD_BYTES);
            let (sender, conn) = b
                .handshake(io)
                .await
                .map_err(|e| self.fail(format!("HTTP/1.1 handshake: {}", describe(&e))))?;
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            (Sender::H1(sender), driver)
        };
        Ok(Conn {
            sender,
            sock,
            timings,
            _driver: AbortOnDrop(driver),
        })
    }

    pub fn stalled(&self, step: &str) -> MeasureError {
        self.fail(format!(
            "stalled: {step} did not finish within {:?}",
            self.request_timeout
        ))
    }

    /// Checks a response's status: 2xx passes; a redirect, a busy answer (429, 503) or any
    /// other status is an error naming it. Redirects are never followed here.
    pub fn check(
        &self,
        what: &str,
        url: &Url,
        resp: &Response<Incoming>,
    ) -> Result<(), MeasureError> {
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        if status.is_redirection() {
            let to = location(resp).unwrap_or_else(|| "nowhere".into());
            return Err(self.fail(format!(
                "{what} {} redirects to {to}; give the final URL (unbloat follows no redirects \
                 for load or probes)",
                url.path()
            )));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(MeasureError::FarEndBusy {
                server: self.server.clone(),
                why: format!("it answered {status} to {what} {}", url.path()),
            });
        }
        Err(self.fail(format!("answered {status} to {what} {}", url.path())))
    }
}

/// A redirect's `Location`, made safe to print.
pub(crate) fn location(resp: &Response<Incoming>) -> Option<String> {
    let value = resp.headers().get(header::LOCATION)?;
    Some(crate::protocol::printable(&String::from_utf8_lossy(
        value.as_bytes(),
    )))
}

impl Sender {
    pub fn is_h2(&self) -> bool {
        matches!(self, Sender::H2(_))
    }

    /// Sends a request and waits for the response head (no timeout here: callers bound it).
    pub async fn send(
        &mut self,
        method: Method,
        url: &Url,
        body: ReqBody,
    ) -> Result<Response<Incoming>, hyper::Error> {
        let agent = concat!("unbloat/", env!("CARGO_PKG_VERSION"));
        match self {
            Sender::H1(s) => {
                // HTTP/1.1 wants the path in the request line and the host in a header.
                let req = Request::builder()
                    .method(method)
                    .uri(url.path())
                    .header(header::HOST, url.authority())
                    .header(header::USER_AGENT, agent)
                    .body(body)
                    .unwrap_or_else(|_| Request::new(ReqBody::Empty));
                s.ready().await?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                // HTTP/2 takes scheme and authority from the absolute URI (:scheme, :authority).
                let req = Request::builder()
                    .method(method)
                    .uri(url.to_string())
                    .header(header::USER_AGENT, agent)
                    .body(body)
                    .unwrap_or_else(|_| Request::new(ReqBody::Empty));
                s.ready().await?;
                s.send_request(req).await
            }
        }
    }
}

/// Reads a whole body of at most `limit` bytes.
pub(crate) async fn read_bounded(body: Incoming, limit: usize) -> Result<Bytes, String> {
    if body.size_hint().lower() > limit as u64 {
        return Err(format!(
            "announced a body of {} bytes, more than the {limit} a small object may have",
            body.size_hint().lower()
        ));
    }
    let mut body = body;
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| describe(&e))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(format!(
                    "sent more than the {limit} bytes a small object may have"
                ));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

/// Reads and throws away a body (the download load); returns when it ends.
pub(crate) async fn discard(mut body: Incoming) -> Result<(), String> {
    while let Some(frame) = body.frame().await {
        frame.map_err(|e| describe(&e))?;
    }
    Ok(())
}

/// Whether an error only ends the connection in good order: closed, or an HTTP/2 GOAWAY or
/// stream reset that says "no error" (nginx says so after `http2_max_requests`, and resets an
/// upload stream it answered early). The load then opens a new connection.
pub(crate) fn graceful_end(e: &hyper::Error) -> bool {
    if e.is_closed() || e.is_canceled() || e.is_incomplete_message() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2e) = s.downcast_ref::<h2::Error>() {
            return matches!(
                h2e.reason(),
                Some(h2::Reason::NO_ERROR) | Some(h2::Reason::REFUSED_STREAM)
            );
        }
        source = s.source();
    }
    false
}

/// A hyper error with its causes, in words: "message head is too large", "connection reset".
pub(crate) fn describe(e: &hyper::Error) -> String {
    if e.is_parse() && e.to_string().contains("too large") {
        return format!(
            "sent a response head larger than {} KiB",
            MAX_HEAD_BYTES / 1024
        );
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
