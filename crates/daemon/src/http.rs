//! The daemon's HTTP/1.1 server (metrics, web page): blocking, one thread per connection, the
//! request head parsed by `httparse` (hyper's parser). Issue 37: axum, hyper and tokio cost the
//! router build 307 KB for a page polled once a second by one browser and a scrape every
//! few seconds; this is a few hundred lines, with the limits that matter on a router (issue 36,
//! item 9).
//!
//! Without them, ~1,100 idle local connections took every descriptor the daemon had (the soft
//! limit is 1024), and the keeper's next apply could not open a netlink socket or start `tc`.
//! So each server:
//!
//! - holds at most [`LIMITS`]`.connections` connections, `per_client` of them from one client
//!   (an IPv4 address or an IPv6 /64) and `per_group` from one IPv6 /56
//!   ([`unbloat_system::clients`]); one more is accepted and answered 503 with `Retry-After` at
//!   once (not left in the kernel's queue, where its client would wait without an answer).
//!   Issue 53: 64 slow clients, from one address, took the page and the metrics down;
//! - closes a connection whose request head has not arrived within `header_timeout` of its
//!   first byte or the end of the last answer (a client that sends a byte now and then);
//! - closes a connection that moves no byte for `idle_timeout` while no request is being
//!   answered (a keep-alive connection left open by a browser tab, or opened and never used);
//! - gives a request body the same time, and its whole answer that time and a second more per
//!   `min_rate` bytes, however the client reads it (one deadline, not one per `write()`: a
//!   client that reads a few bytes every 9 s is cut off);
//! - takes a body only with one `Content-Length` of digits alone, at most `max_body` bytes (413
//!   otherwise, unread);
//! - sends a file's body from the file, [`CHUNK`] bytes at a time, never whole in memory;
//! - on an accept error (EMFILE, ENFILE: descriptors are short anyway) waits a moment instead
//!   of spinning.
//!
//! Two servers at 64 each bound what HTTP can hold to 128 descriptors, well under the 1024 the
//! daemon gets, so the keeper always has the few it needs for an apply. The page polls every
//! second or two, so 10 s of idleness is a closed tab; a request that takes long (a reload in a
//! slow kernel) keeps its connection, since only idleness without a request counts.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use unbloat_system::clients;

/// What one server allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections held at once.
    pub connections: usize,
    /// Connections held at once from one client (an IPv4 address, an IPv6 /64).
    pub per_client: usize,
    /// Connections held at once from one IPv6 /56.
    pub per_group: usize,
    /// From a connection's first byte, or the end of the last answer, to a whole request head;
    /// the same again for its body, and for the client to read the answer.
    pub header_timeout: Duration,
    /// No byte either way and no request being answered for this long: closed.
    pub idle_timeout: Duration,
    /// The largest request body taken.
    pub max_body: usize,
    /// An answer's deadline grows by a second for each this many bytes: a large file reaches a
    /// client on a slow link, a client that reads slower than this is cut off.
    pub min_rate: u64,
}

/// The daemon's limits, per server.
pub const LIMITS: Limits = Limits {
    connections: 64,
    // A browser opens up to 6 to one server; the page, a second tab and a scraper fit.
    per_client: 16,
    per_group: 32,
    header_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    max_body: 64 * 1024,
    min_rate: 32 * 1024,
};

/// After an accept error, this long before the next accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// A request head larger than this is refused (431): browsers send about 1 KiB.
const MAX_HEAD: usize = 16 * 1024;
/// Header lines taken in one head.
const MAX_HEADERS: usize = 64;
/// How long a closing connection reads away what its client still sends.
const LINGER: Duration = Duration::from_secs(1);
/// A streamed body's bytes read and written at a time.
pub const CHUNK: usize = 16 * 1024;
/// The most digits a Content-Length may have (`max_body` is far below 10^9).
const MAX_LENGTH_DIGITS: usize = 9;
/// What a client over a cap is told to wait before it tries again.
const RETRY_AFTER_S: u32 = 5;

/// A request: its head, and its body once read.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    /// The path, without the query (nothing here takes one).
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_string(),
            path: path.to_string(),
            ..Request::default()
        }
    }

    /// Adds a header (tests; the server fills them from the wire).
    pub fn with_header(mut self, name: &str, value: &str) -> Request {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// The first header called `name` (any case); a value that is not UTF-8 reads as empty.
    pub fn header(&self, name: &str) -> Option<&str> {
        first(&self.headers, name)
    }

    /// GET and HEAD: the methods that change nothing.
    pub fn is_read(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD")
    }
}

/// An answer: status, headers (`Content-Length` is added when sent) and body: in memory, or
/// the first `len` bytes of a file, read as they are sent.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub file: Option<(File, u64)>,
}

impl Response {
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: vec![],
            body: vec![],
            file: None,
        }
    }

    pub fn text(status: u16, text: impl Into<String>) -> Response {
        Response::new(status)
            .with_header("content-type", "text/plain; charset=utf-8")
            .with_body(text.into())
    }

    pub fn json<T: Serialize + ?Sized>(status: u16, value: &T) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::new(status)
                .with_header("content-type", "application/json")
                .with_body(body),
            Err(e) => Response::text(500, format!("the answer could not be written: {e}")),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Response {
        self.body = body.into();
        self
    }

    /// The body is the first `len` bytes of `file`, sent a chunk at a time.
    pub fn with_file(mut self, file: File, len: u64) -> Response {
        self.file = Some((file, len));
        self
    }

    /// The body's length, in memory or in its file.
    pub fn body_len(&self) -> u64 {
        self.file
            .as_ref()
            .map_or(self.body.len() as u64, |(_, len)| *len)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        first(&self.headers, name)
    }

    /// The whole body as text (tests: a file body is read here, whole).
    pub fn body_text(&self) -> String {
        let mut bytes = self.body.clone();
        if let Some((file, len)) = &self.file {
            let _ = file.take(*len).read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The value of the first header called `name`, in any case (header names are not
/// case-sensitive).
fn first<'a, N: AsRef<str>>(headers: &'a [(N, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// What a server answers with.
pub trait Handler: Send + Sync + 'static {
    /// Called once the head is read, before the body: an answer here is sent without reading
    /// the body (a change without its token is refused before its body arrives).
    fn early(&self, _head: &Request) -> Option<Response> {
        None
    }

    /// The answer to a whole request.
    fn answer(&self, request: Request) -> Response;
}

/// The server's whole decision for a request it has read: the early answer, the body limit,
/// then the handler's answer (tests call this with no socket).
pub fn respond(handler: &dyn Handler, request: Request, limits: &Limits) -> Response {
    if let Some(early) = before_body(handler, &request, request.body.len(), limits) {
        return early;
    }
    handler.answer(request)
}

fn before_body(
    handler: &dyn Handler,
    head: &Request,
    length: usize,
    limits: &Limits,
) -> Option<Response> {
    handler.early(head).or_else(|| {
        (length > limits.max_body)
            .then(|| Response::text(413, format!("the body is over {} bytes", limits.max_body)))
    })
}

/// Binds now (so a taken port is the caller's error), then serves from a new thread within
/// [`LIMITS`]; the bound address.
pub fn spawn(addr: SocketAddr, handler: Arc<dyn Handler>) -> std::io::Result<SocketAddr> {
    spawn_with(addr, handler, LIMITS)
}

pub fn spawn_with(
    addr: SocketAddr,
    handler: Arc<dyn Handler>,
    limits: Limits,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || serve(listener, handler, limits))?;
    Ok(bound)
}

/// Serves on `listener` for ever, within `limits`.
pub fn serve(listener: TcpListener, handler: Arc<dyn Handler>, limits: Limits) {
    let tally = clients::Shared::new(clients::Caps {
        total: limits.connections,
        per_client: limits.per_client,
        per_group: limits.per_group,
    });
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(_) => {
                std::thread::sleep(ACCEPT_PAUSE);
                continue;
            }
        };
        let counted = match tally.admit(peer.ip()) {
            Ok(counted) => counted,
            Err(why) => {
                refuse(stream, &why);
                continue;
            }
        };
        let handler = handler.clone();
        let started = std::thread::Builder::new()
            .name("http-conn".into())
            .spawn(move || {
                let _counted = counted;
                let _ = Connection::new(stream, limits).run(&*handler);
            });
        // No thread to be had (the process's limit): the stream and the count went with the
        // closure, dropped.
        if started.is_err() {
            std::thread::sleep(ACCEPT_PAUSE);
        }
    }
}

/// A connection over a cap: 503 with `Retry-After`, written without waiting (a fresh socket's
/// buffer takes it whole; a client that has filled its window gets nothing), then closed. On
/// the accepting thread: no thread is spent on a refusal.
fn refuse(mut stream: TcpStream, why: &clients::Refusal) {
    let text = format!("busy: {why} (connections); try again in a few seconds\n");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: {RETRY_AFTER_S}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        text.len()
    );
    if stream.set_nonblocking(true).is_ok() {
        let _ = stream.write_all((head + &text).as_bytes());
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

/// One connection: its socket and the bytes read past the last request.
struct Connection {
    stream: TcpStream,
    limits: Limits,
    buf: Vec<u8>,
}

/// Why a connection ends without an answer to send (closed, timed out, or unreadable).
type Closed = ();

impl Connection {
    fn new(stream: TcpStream, limits: Limits) -> Connection {
        Connection {
            stream,
            limits,
            buf: Vec::with_capacity(1024),
        }
    }

    /// Requests one after another until the client closes, asks to, or times out.
    fn run(mut self, handler: &dyn Handler) -> Result<(), Closed> {
        self.stream
            .set_write_timeout(Some(self.limits.header_timeout))
            .map_err(drop)?;
        loop {
            let (head, length, close) = match self.head()? {
                Ok(head) => head,
                Err(refusal) => return self.send(refusal, false, true),
            };
            let head_only = head.method == "HEAD";
            if let Some(early) = before_body(handler, &head, length, &self.limits) {
                // The body, if any, is left unread: the connection cannot go on after it.
                let close = close || length > 0;
                self.send(early, head_only, close)?;
                if close {
                    return Ok(());
                }
                continue;
            }
            if head
                .header("expect")
                .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
            {
                self.stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .map_err(drop)?;
            }
            let body = self.body(length)?;
            let answer = handler.answer(Request { body, ..head });
            self.send(answer, head_only, close)?;
            if close {
                return Ok(());
            }
        }
    }

    /// Reads until a whole head is in: the head, its body's length and whether the connection
    /// ends after this request; or the refusal to send (400, 411, 431, 501).
    #[allow(clippy::type_complexity)]
    fn head(&mut self) -> Result<Result<(Request, usize, bool), Response>, Closed> {
        let deadline = Instant::now() + self.limits.header_timeout;
        loop {
            if let Some((n, head)) = parse_head(&self.buf) {
                self.buf.drain(..n);
                return Ok(head);
            }
            self.fill(deadline)?;
        }
    }

    /// The request's head from what httparse read, checked for what this server takes.
    fn take(parsed: &httparse::Request) -> Result<(Request, usize, bool), Response> {
        let (Some(method), Some(target), Some(version)) =
            (parsed.method, parsed.path, parsed.version)
        else {
            return Err(Response::text(400, "bad request line"));
        };
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                let value = std::str::from_utf8(h.value).unwrap_or("");
                (h.name.to_ascii_lowercase(), value.trim().to_string())
            })
            .collect();
        let head = Request {
            method: method.to_string(),
            path: target.split('?').next().unwrap_or("").to_string(),
            headers,
            body: vec![],
        };
        if head.header("transfer-encoding").is_some() {
            return Err(Response::text(
                501,
                "chunked bodies are not taken: send Content-Length",
            ));
        }
        let length = content_length(&head.headers)?;
        let asked = head.header("connection").unwrap_or("");
        let close = if version == 0 {
            !asked.eq_ignore_ascii_case("keep-alive")
        } else {
            asked.eq_ignore_ascii_case("close")
        };
        Ok((head, length, close))
    }

    /// The body's `length` bytes (at most the limit, checked before), within the head's time.
    fn body(&mut self, length: usize) -> Result<Vec<u8>, Closed> {
        let deadline = Instant::now() + self.limits.header_timeout;
        while self.buf.len() < length {
            self.fill(deadline)?;
        }
        Ok(self.buf.drain(..length).collect())
    }

    /// Reads what has come, waiting at most until `deadline` and at most the idle timeout.
    fn fill(&mut self, deadline: Instant) -> Result<(), Closed> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(());
        }
        let wait = left.min(self.limits.idle_timeout);
        self.stream.set_read_timeout(Some(wait)).map_err(drop)?;
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Err(()),
            }
        }
    }

    /// Writes `answer` (without its body for HEAD) by one deadline for the whole of it; closes
    /// the connection when `close`.
    fn send(&mut self, answer: Response, head_only: bool, close: bool) -> Result<(), Closed> {
        let len = answer.body_len();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-length: {len}\r\n",
            answer.status,
            reason(answer.status),
        );
        for (name, value) in &answer.headers {
            // A value is ours, but a line break in one would split the answer: never sent.
            if !value.contains(['\r', '\n']) {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        if close {
            out.push_str("connection: close\r\n");
        }
        out.push_str("\r\n");
        let seconds = if head_only {
            0
        } else {
            len / self.limits.min_rate.max(1)
        };
        let deadline = Instant::now() + self.limits.header_timeout + Duration::from_secs(seconds);
        let mut bytes = out.into_bytes();
        if !head_only {
            bytes.extend_from_slice(&answer.body);
        }
        self.write_by(&bytes, deadline)?;
        if let (Some((file, len)), false) = (answer.file, head_only) {
            self.send_file(file, len, deadline)?;
        }
        if close {
            self.linger();
        }
        Ok(())
    }

    /// The first `len` bytes of `file`, [`CHUNK`] at a time. A file that ends sooner (cut
    /// short since it was opened) ends the connection: its length was promised.
    fn send_file(&mut self, mut file: File, len: u64, deadline: Instant) -> Result<(), Closed> {
        let mut chunk = vec![0u8; CHUNK];
        let mut left = len;
        while left > 0 {
            let want = chunk.len().min(usize::try_from(left).unwrap_or(CHUNK));
            let n = match file.read(&mut chunk[..want]) {
                Ok(0) | Err(_) => return Err(()),
                Ok(n) => n,
            };
            self.write_by(&chunk[..n], deadline)?;
            left -= n as u64;
        }
        Ok(())
    }

    /// Writes all of `bytes` by `deadline`: each `write()` may wait only what is left of it.
    fn write_by(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), Closed> {
        while !bytes.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(());
            }
            self.stream.set_write_timeout(Some(left)).map_err(drop)?;
            match self.stream.write(bytes) {
                Ok(0) => return Err(()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        Ok(())
    }

    /// Ends the connection after an answer: our side first, then what the client still sends
    /// (an unread body) is read away for a moment. Closing with unread bytes would send a reset,
    /// which can reach the client before it has read the answer (a 413 or 401 it never sees).
    fn linger(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        let until = Instant::now() + LINGER;
        let mut sink = [0u8; 4096];
        let mut left = 4 * self.limits.max_body;
        while left > 0 {
            let wait = until.saturating_duration_since(Instant::now());
            if wait.is_zero() || self.stream.set_read_timeout(Some(wait)).is_err() {
                return;
            }
            match self.stream.read(&mut sink) {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    }
}

/// What a server decides from the bytes a connection has sent so far: `None` while the head is
/// incomplete; else how many bytes the head took and the head (its body's length and whether the
/// connection ends after it), or the refusal to send. Public for the fuzz targets (fuzz/).
#[doc(hidden)]
#[allow(clippy::type_complexity)]
pub fn parse_head(buf: &[u8]) -> Option<(usize, Result<(Request, usize, bool), Response>)> {
    if buf.is_empty() {
        return None;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    // A refusal ends the connection, so what it took does not matter.
    let refused = |status, text: String| Some((0, Err(Response::text(status, text))));
    match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => {
            refused(431, "the request head is too large".into())
        }
        Ok(httparse::Status::Complete(n)) => Some((n, Connection::take(&parsed))),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            refused(431, "the request head is too large".into())
        }
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => refused(431, "too many header lines".into()),
        Err(e) => refused(400, format!("bad request: {e}")),
    }
}

/// The body's length from `Content-Length`: 0 without one; refused (400) when there are several
/// (a proxy in front may have read another one: request smuggling) or when it is anything but
/// [`MAX_LENGTH_DIGITS`] digits at most (Rust's parse takes a `+`; RFC 9110, 8.6, does not).
fn content_length(headers: &[(String, String)]) -> Result<usize, Response> {
    let mut given = headers.iter().filter(|(n, _)| n == "content-length");
    let Some((_, value)) = given.next() else {
        return Ok(0);
    };
    if given.next().is_some() {
        return Err(Response::text(400, "more than one Content-Length"));
    }
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    match value.parse::<usize>() {
        Ok(n) if digits && value.len() <= MAX_LENGTH_DIGITS => Ok(n),
        _ => Err(Response::text(400, "bad Content-Length: give digits alone")),
    }
}

/// The reason phrase of the statuses the daemon sends.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests;
