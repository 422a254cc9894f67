//! The daemon's web page (issue 14, part 3): see and change shaping without a shell.
//!
//! `unbloat daemon --web 127.0.0.1:PORT` serves one page (its HTML, CSS and JavaScript are in
//! the binary: it works with no internet) and the JSON it polls:
//!
//! | route | what |
//! |---|---|
//! | `GET /api/status` | the daemon's status (asked of the keeper) and each shaped interface's plan |
//! | `GET /api/live` | every shaped interface's counters and cake's per-tin delays, read now ([`live`]) |
//! | `GET /api/config`, `POST /api/config` | the config as a form; a change, validated then reloaded ([`config`]) |
//! | `GET /api/runs`, `POST /api/runs`, `POST /api/runs/stop` | test and tune runs ([`runs`]) |
//! | `GET /api/reports` | the lab reports under `--reports DIR` |
//! | `POST /api/token` | whether a token is the right one (the page checks what it was given) |
//! | `GET /runs/ID/FILE`, `GET /reports/DIR/FILE` | the runs' and reports' files, read-only ([`files`]) |
//!
//! Reading needs nothing but for the config and the runs (the config file may be readable by
//! root alone; a run's command line says where tests go): those, and every other method, need
//! `Authorization: Bearer TOKEN` ([`token`]), or get 401 before a body is even read. Bodies over [`crate::http::LIMITS`]`.max_body` (64 KiB)
//! get 413. A request whose
//! `Host` is a name other than `localhost` or one given with `--web-host` gets 421, reads too
//! ([`host`]: DNS rebinding). The server binds
//! where `--web` says (the flag's help says 127.0.0.1): the token, not the address, is what
//! guards changes.
//!
//! Nothing here touches the kernel: a config change goes through the keeper's reload, the one
//! thread that makes changes; the live reads are reads. Test and tune runs are child processes
//! of this binary, as if typed in a shell.

mod config;
mod fields;
mod files;
pub(crate) mod host;
mod live;
mod runs;
#[cfg(test)]
pub(crate) mod scratch;
#[cfg(test)]
mod tests;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use unbloat_system::state::StateDir;

use crate::control::{Answer, DaemonStatus, Request};
use crate::http::{self, Handler, Response};
pub use token::{Token, TOKEN_FILE};

/// How long the page waits for the keeper's status: it may be applying a change.
const STATUS_WAIT: Duration = Duration::from_secs(5);

/// Asks the daemon's keeper (`KeeperHandle::ask`): its answer, `None` when the daemon ends.
/// Blocking: called on the request's thread.
pub type Ask = Arc<dyn Fn(Request) -> Option<Answer> + Send + Sync>;

/// What the page serves and changes.
pub struct Setup {
    pub state: StateDir,
    /// The config file the daemon keeps applied.
    pub config: PathBuf,
    /// `--reports DIR`: lab reports listed and served read-only.
    pub reports: Option<PathBuf>,
    pub ask: Ask,
    /// The binary started for test and tune runs (this one).
    pub exe: PathBuf,
    /// Names besides IP addresses and `localhost` the page answers to (`--web-host`).
    pub hosts: Vec<String>,
    /// Whether the binary has `unbloat tune` (the router's small build has not).
    pub tune: bool,
}

/// The page: what it serves and changes, and the token that guards changes.
pub struct Web {
    setup: Setup,
    token: Token,
    runs: runs::Runs,
    /// One config change at a time, from reading the old file to the reload's answer.
    config_lock: Mutex<()>,
    /// Whether a status question is with the keeper now: one at a time, so a keeper that is
    /// busy (a slow apply) holds one waiting thread, not one per poll.
    asking: Arc<AtomicBool>,
}

/// Makes a token, writes it to the run directory, serves the page on `addr` from a thread of
/// its own and says where (and where the token is, never the token). The bound address.
pub fn start(addr: SocketAddr, setup: Setup) -> std::io::Result<SocketAddr> {
    let token = Token::generate()?;
    let file = token.write(setup.state.path())?;
    let bound = http::spawn(addr, Arc::new(Web::new(setup, token)))?;
    crate::say::info(&start_line(bound, &file));
    Ok(bound)
}

/// The start line: where the page is, where its token is, and a command that opens the page
/// with it. Never the token itself: the journal is readable by the adm and systemd-journal
/// groups, the token file by root alone (issue 36).
fn start_line(bound: SocketAddr, file: &std::path::Path) -> String {
    let file = file.display();
    format!(
        "web page on http://{bound}/ (changes need its token, which only root can read, in {file}; \
         as root, `echo \"http://{bound}/#token=$(cat {file})\"` prints the page's address with it)"
    )
}

impl Web {
    /// The page over `setup`, changes guarded by `token`.
    pub fn new(setup: Setup, token: Token) -> Web {
        let runs = runs::Runs::new(setup.exe.clone(), setup.state.path().join("runs"));
        Web {
            setup,
            token,
            runs,
            config_lock: Mutex::new(()),
            asking: Arc::default(),
        }
    }
}

impl Handler for Web {
    /// A foreign `Host` gets 421, reads too ([`host`]); a change without the token 401.
    fn early(&self, head: &http::Request) -> Option<Response> {
        host::refusal(head, &self.setup.hosts).or_else(|| self.unauthorized(head))
    }

    fn answer(&self, req: http::Request) -> Response {
        let read = req.is_read();
        let path = req.path.as_str();
        if let Some(rest) = path.strip_prefix("/runs/") {
            return file(read, Some(self.runs.dir()), rest);
        }
        if let Some(rest) = path.strip_prefix("/reports/") {
            return file(read, self.setup.reports.as_deref(), rest);
        }
        let asset = match path {
            "/" => Some("index.html"),
            "/app.js" | "/chart.js" | "/forms.js" | "/style.css" => Some(&path[1..]),
            _ => None,
        };
        if let Some(name) = asset {
            return if read {
                self::asset(name, req.header("accept-encoding"))
            } else {
                not_allowed("GET, HEAD")
            };
        }
        match (req.method.as_str(), path) {
            (_, "/api/status") if read => self.status(),
            (_, "/api/live") if read => Response::json(200, &live::read(&self.setup.state))
                .with_header("cache-control", "no-store"),
            (_, "/api/config") if read => Response::json(200, &config::view(&self.setup.config)),
            ("POST", "/api/config") => self.config_change(&req),
            (_, "/api/runs") if read => {
                Response::json(200, &self.runs.list()).with_header("cache-control", "no-store")
            }
            ("POST", "/api/runs") => self.runs_start(&req),
            ("POST", "/api/runs/stop") => match self.runs.stop() {
                Ok(()) => Response::new(202),
                Err(runs::NotStarted(status, why)) => error(status, why),
            },
            (_, "/api/reports") if read => Response::json(
                200,
                &self
                    .setup
                    .reports
                    .as_deref()
                    .map(files::reports)
                    .unwrap_or_default(),
            ),
            // The token was checked before (a change): the cookie lets the runs' files be read.
            ("POST", "/api/token") => {
                Response::new(204).with_header("set-cookie", self.token.cookie())
            }
            (_, "/api/config" | "/api/runs") => not_allowed("GET, HEAD, POST"),
            (_, "/api/runs/stop" | "/api/token") => not_allowed("POST"),
            (_, "/api/status" | "/api/live" | "/api/reports") => not_allowed("GET, HEAD"),
            _ => error(404, format!("no such page: {path}")),
        }
    }
}

impl Web {
    /// Changes need the token, and so do reads of the config and the runs (their list, and
    /// their files, which the page's links and images read with the token's cookie): without it,
    /// 401 unread.
    fn unauthorized(&self, head: &http::Request) -> Option<Response> {
        let given = head.header("authorization");
        let run_file = head.is_read() && head.path.starts_with("/runs/");
        let guarded = !head.is_read()
            || run_file
            || matches!(head.path.as_str(), "/api/config" | "/api/runs");
        if !guarded
            || self.token.authorizes(given)
            || (run_file && self.token.in_cookie(head.header("cookie")))
        {
            return None;
        }
        let why = if given.is_some() {
            "the token is not this daemon's (a restart makes a new one)"
        } else {
            "changes, the config and the runs need the token: Authorization: Bearer TOKEN (the runs' files: the cookie POST /api/token sets)"
        };
        Some(
            error(401, format!("{why}; root can read it in the daemon's run directory (web-token; the daemon's start line says where)"))
                .with_header("www-authenticate", "Bearer realm=\"unbloat\""),
        )
    }

    /// The daemon's status and the shaped interfaces; 503 while the keeper does not answer
    /// (it is applying a change), at once while an earlier question still waits on it.
    fn status(&self) -> Response {
        let busy = || {
            error(
                503,
                "the daemon is busy (applying a change): its status follows when it is done",
            )
            .with_header("retry-after", "2")
        };
        if self.asking.swap(true, Ordering::AcqRel) {
            return busy();
        }
        let daemon = match ask_within(&self.setup.ask, Request::Status, &self.asking) {
            Err(Busy) => return busy(),
            Ok(Some(Answer::Status(s))) => Some(s),
            Ok(_) => None,
        };
        let state = &self.setup.state;
        let interfaces = state
            .list()
            .unwrap_or_default()
            .iter()
            .filter_map(|n| state.load(n).ok().flatten())
            .map(|r| Shaped {
                iface: r.iface.to_string(),
                summary: r.plan.summary(),
                fairness: r.fairness,
                applied_unix: r.applied_at_unix,
            })
            .collect();
        Response::json(
            200,
            &StatusView {
                daemon,
                interfaces,
                tune: self.setup.tune,
            },
        )
    }

    fn config_change(&self, req: &http::Request) -> Response {
        let change: config::Change = match json_body(req) {
            Ok(c) => c,
            Err(refused) => return refused,
        };
        let _one_at_a_time = self.config_lock.lock().unwrap_or_else(|e| e.into_inner());
        let ask = self.setup.ask.clone();
        let (status, outcome) =
            config::apply(&self.setup.config, &change, &move || ask(Request::Reload));
        Response::json(status, &outcome)
    }

    fn runs_start(&self, req: &http::Request) -> Response {
        let run: runs::RunRequest = match json_body(req) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        if run.kind == runs::RunKind::Tune && !self.setup.tune {
            return error(
                501,
                "this build of unbloat has no tune (the router's small build): run `unbloat tune` \
                 from a full build, on this link",
            );
        }
        match self.runs.start(&run) {
            Ok(view) => Response::json(202, &view),
            Err(runs::NotStarted(status, why)) => error(status, why),
        }
    }
}

/// A file under `base` (`GET /runs/PATH`, `/reports/PATH`), its path percent-decoded.
fn file(read: bool, base: Option<&std::path::Path>, rest: &str) -> Response {
    if !read {
        return not_allowed("GET, HEAD");
    }
    match percent_decoded(rest) {
        Some(rel) => files::answer(base, &rel),
        None => error(400, "the path is not percent-encoded UTF-8"),
    }
}

/// The keeper did not answer within [`STATUS_WAIT`].
struct Busy;

/// Clears its flag when dropped.
struct Clear(Arc<AtomicBool>);

impl Drop for Clear {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Asks the keeper on a thread of its own, waiting at most [`STATUS_WAIT`] (it may be applying
/// a change); `asking` is cleared when the keeper has answered, however long that takes. The
/// answer, None when the daemon ends.
fn ask_within(
    ask: &Ask,
    request: Request,
    asking: &Arc<AtomicBool>,
) -> Result<Option<Answer>, Busy> {
    let (tx, rx) = mpsc::channel();
    let (ask, flag) = (ask.clone(), asking.clone());
    let started = std::thread::Builder::new()
        .name("web-ask".into())
        .spawn(move || {
            // Cleared however the question ends, a panic's unwinding too.
            let asked = Clear(flag);
            let answer = ask(request);
            drop(asked);
            let _ = tx.send(answer);
        });
    if started.is_err() {
        asking.store(false, Ordering::Release);
        return Err(Busy);
    }
    match rx.recv_timeout(STATUS_WAIT) {
        Ok(answer) => Ok(answer),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Busy),
        Err(mpsc::RecvTimeoutError::Disconnected) => Ok(None),
    }
}

/// A JSON body: 415 when it is not said to be JSON, 400 when it is not JSON, 422 when it is
/// not what the route takes.
fn json_body<T: DeserializeOwned>(req: &http::Request) -> Result<T, Response> {
    let kind = req.header("content-type").unwrap_or("");
    if !kind
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("application/json")
    {
        return Err(error(
            415,
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    serde_json::from_slice(&req.body).map_err(|e| {
        let status = if e.is_data() { 422 } else { 400 };
        error(status, format!("the body is not what this takes: {e}"))
    })
}

/// `%XX` escapes decoded (`/runs/..%2Fx` is `../x`, which [`files`] refuses); None when an
/// escape is broken or the result is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

fn error(status: u16, text: impl Into<String>) -> Response {
    Response::json(status, &ErrorBody { error: text.into() })
}

fn not_allowed(allow: &'static str) -> Response {
    error(405, format!("this takes {allow}")).with_header("allow", allow)
}

/// An embedded file of the page, gzip-compressed at build time (build.rs) and sent as it is,
/// with a policy that lets the page load only its own scripts and styles; inflated for a
/// client that does not take gzip (curl without --compressed, Python's urllib: issue 53).
fn asset(name: &str, accept_encoding: Option<&str>) -> Response {
    macro_rules! gz {
        ($name:literal) => {
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".gz")).as_slice()
        };
    }
    let (body, kind) = match name {
        "index.html" => (gz!("index.html"), "text/html; charset=utf-8"),
        "app.js" => (gz!("app.js"), "text/javascript"),
        "chart.js" => (gz!("chart.js"), "text/javascript"),
        "forms.js" => (gz!("forms.js"), "text/javascript"),
        _ => (gz!("style.css"), "text/css; charset=utf-8"),
    };
    let answer = if takes_gzip(accept_encoding) {
        Response::new(200)
            .with_header("content-encoding", "gzip")
            .with_body(body)
    } else {
        match inflated(body) {
            Some(plain) => Response::new(200).with_body(plain),
            None => return error(500, "the page's file in this binary is not gzip as built"),
        }
    };
    answer
        .with_header("content-type", kind)
        .with_header("vary", "accept-encoding")
        .with_header(
            "content-security-policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        )
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "no-referrer")
}

/// What build.rs compressed, inflated: a gzip member with no optional fields (RFC 1952: a
/// 10-byte header whose flags are 0, the deflate stream, CRC-32 and length). At most the length
/// its trailer gives (the page's files are a few KiB); None when it is not that.
fn inflated(gz: &[u8]) -> Option<Vec<u8>> {
    let (head, rest) = gz.split_at_checked(10)?;
    let (deflate, trailer) = rest.split_at_checked(rest.len().checked_sub(8)?)?;
    if head[..4] != [0x1f, 0x8b, 8, 0] {
        return None;
    }
    let size = u32::from_le_bytes(trailer[4..].try_into().ok()?) as usize;
    // Into a buffer of the trailer's length, in one call: miniz_oxide's core, without its
    // growing buffers and checksums (the router build is counted in bytes).
    use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
    let mut plain = vec![0u8; size];
    let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let (status, _, written) = decompress(
        &mut Box::<DecompressorOxide>::default(),
        deflate,
        &mut plain,
        0,
        flags,
    );
    (status == miniz_oxide::inflate::TINFLStatus::Done && written == size).then_some(plain)
}

/// Whether a client that sent this Accept-Encoding takes gzip: one that sent none takes any
/// coding (RFC 9110, 12.5.3); otherwise gzip's own entry decides, else `*`'s, and `q=0` refuses.
fn takes_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(header) = accept_encoding else {
        return true;
    };
    let mut star = false;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            let p = p.trim().to_ascii_lowercase();
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q == 0.0)
        });
        match coding.as_str() {
            "gzip" | "x-gzip" => return !refused,
            "*" => star = !refused,
            _ => {}
        }
    }
    star
}

#[derive(Serialize)]
struct StatusView {
    /// None while the keeper does not answer within [`STATUS_WAIT`] (it is applying a change).
    daemon: Option<DaemonStatus>,
    interfaces: Vec<Shaped>,
    /// Whether tune runs can be started (the page hides them otherwise).
    tune: bool,
}

#[derive(Serialize)]
struct Shaped {
    iface: String,
    summary: Vec<String>,
    fairness: Option<String>,
    applied_unix: u64,
}
