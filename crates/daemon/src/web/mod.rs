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
//! Reading needs nothing; every other method needs `Authorization: Bearer TOKEN` ([`token`]), or
//! gets 401 before its body is even read. Bodies over [`MAX_BODY`] get 413. A request whose
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
mod host;
mod live;
mod runs;
#[cfg(test)]
pub(crate) mod scratch;
#[cfg(test)]
mod tests;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, Request as HttpRequest, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use unbloat_system::state::StateDir;

use crate::control::{Answer, DaemonStatus, Request};
pub use token::{Token, TOKEN_FILE};

/// The largest request body taken (a whole config from the TOML editor fits many times).
pub const MAX_BODY: usize = 64 * 1024;
/// How long the page waits for the keeper's status: it may be applying a change.
const STATUS_WAIT: Duration = Duration::from_secs(5);

/// Asks the daemon's keeper (`KeeperHandle::ask`): its answer, `None` when the daemon ends.
/// Blocking: called on tokio's blocking threads.
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
}

struct App {
    setup: Setup,
    token: Token,
    runs: runs::Runs,
    /// One config change at a time, from reading the old file to the reload's answer.
    config_lock: tokio::sync::Mutex<()>,
}

/// Makes a token, writes it to the run directory, serves the page on `addr` from a thread of
/// its own and says where (and where the token is, never the token). The bound address.
pub fn start(addr: SocketAddr, setup: Setup) -> std::io::Result<SocketAddr> {
    let token = Token::generate()?;
    let file = token.write(setup.state.path())?;
    let bound = crate::serve::spawn(addr, router(setup, token.clone()))?;
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

/// The page's routes over `setup`, changes guarded by `token`.
pub fn router(setup: Setup, token: Token) -> Router {
    let runs = runs::Runs::new(setup.exe.clone(), setup.state.path().join("runs"));
    let app = Arc::new(App {
        setup,
        token,
        runs,
        config_lock: tokio::sync::Mutex::new(()),
    });
    Router::new()
        .route("/", get(|| asset("index.html")))
        .route("/app.js", get(|| asset("app.js")))
        .route("/chart.js", get(|| asset("chart.js")))
        .route("/forms.js", get(|| asset("forms.js")))
        .route("/style.css", get(|| asset("style.css")))
        .route("/api/status", get(status))
        .route("/api/live", get(live))
        .route("/api/config", get(config_view).post(config_change))
        .route("/api/runs", get(runs_list).post(runs_start))
        .route("/api/runs/stop", post(runs_stop))
        .route("/api/reports", get(reports))
        .route("/api/token", post(|| async { StatusCode::NO_CONTENT }))
        .route("/runs/{*path}", get(run_file))
        .route("/reports/{*path}", get(report_file))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(middleware::from_fn_with_state(app.clone(), host::guard))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// Changes need the token: anything but GET and HEAD without it is answered 401 unread.
async fn guard(State(app): State<Arc<App>>, req: HttpRequest, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if app.token.authorizes(given) {
        return next.run(req).await;
    }
    let why = if given.is_some() {
        "the token is not this daemon's (a restart makes a new one)"
    } else {
        "changes need the token: Authorization: Bearer TOKEN"
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"unbloat\"")],
        Json(ErrorBody {
            error: format!("{why}; root can read it in the daemon's run directory (web-token; the daemon's start line says where)"),
        }),
    )
        .into_response()
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

fn error(status: u16, text: impl Into<String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(ErrorBody { error: text.into() })).into_response()
}

/// The embedded files, with a policy that lets the page load only its own scripts and styles.
async fn asset(name: &str) -> Response {
    let (body, kind) = match name {
        "index.html" => (
            include_str!("assets/index.html"),
            "text/html; charset=utf-8",
        ),
        "app.js" => (include_str!("assets/app.js"), "text/javascript"),
        "chart.js" => (include_str!("assets/chart.js"), "text/javascript"),
        "forms.js" => (include_str!("assets/forms.js"), "text/javascript"),
        _ => (include_str!("assets/style.css"), "text/css; charset=utf-8"),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

/// Runs `f` on a blocking thread (tc reads, file writes, the keeper's answers).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| error(500, format!("the request's thread failed: {e}")))
}

#[derive(Serialize)]
struct StatusView {
    /// None while the keeper does not answer within [`STATUS_WAIT`] (it is applying a change).
    daemon: Option<DaemonStatus>,
    interfaces: Vec<Shaped>,
}

#[derive(Serialize)]
struct Shaped {
    iface: String,
    summary: Vec<String>,
    fairness: Option<String>,
    applied_unix: u64,
}

async fn status(State(app): State<Arc<App>>) -> Response {
    let ask = app.setup.ask.clone();
    let asked = tokio::time::timeout(STATUS_WAIT, blocking(move || ask(Request::Status))).await;
    let daemon = match asked {
        Ok(Ok(Some(Answer::Status(s)))) => Some(s),
        _ => None,
    };
    let state = app.setup.state.clone();
    let interfaces = blocking(move || {
        let names = state.list().unwrap_or_default();
        names
            .iter()
            .filter_map(|n| state.load(n).ok().flatten())
            .map(|r| Shaped {
                iface: r.iface.to_string(),
                summary: r.plan.summary(),
                fairness: r.fairness,
                applied_unix: r.applied_at_unix,
            })
            .collect()
    })
    .await;
    match interfaces {
        Ok(interfaces) => Json(StatusView { daemon, interfaces }).into_response(),
        Err(e) => e,
    }
}

async fn live(State(app): State<Arc<App>>) -> Response {
    let state = app.setup.state.clone();
    match blocking(move || live::read(&state)).await {
        Ok(l) => ([(header::CACHE_CONTROL, "no-store")], Json(l)).into_response(),
        Err(e) => e,
    }
}

async fn config_view(State(app): State<Arc<App>>) -> Response {
    let path = app.setup.config.clone();
    match blocking(move || config::view(&path)).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e,
    }
}

async fn config_change(
    State(app): State<Arc<App>>,
    Json(change): Json<config::Change>,
) -> Response {
    let _one_at_a_time = app.config_lock.lock().await;
    let app2 = app.clone();
    let done = blocking(move || {
        let ask = app2.setup.ask.clone();
        config::apply(&app2.setup.config, &change, &move || ask(Request::Reload))
    })
    .await;
    match done {
        Ok((status, outcome)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, Json(outcome)).into_response()
        }
        Err(e) => e,
    }
}

async fn runs_list(State(app): State<Arc<App>>) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Json(app.runs.list())).into_response()
}

async fn runs_start(State(app): State<Arc<App>>, Json(req): Json<runs::RunRequest>) -> Response {
    let app2 = app.clone();
    match blocking(move || app2.runs.start(&req)).await {
        Ok(Ok(view)) => (StatusCode::ACCEPTED, Json(view)).into_response(),
        Ok(Err(runs::NotStarted(status, why))) => error(status, why),
        Err(e) => e,
    }
}

async fn runs_stop(State(app): State<Arc<App>>) -> Response {
    match app.runs.stop() {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(runs::NotStarted(status, why)) => error(status, why),
    }
}

async fn reports(State(app): State<Arc<App>>) -> Response {
    let Some(dir) = app.setup.reports.clone() else {
        return Json(Vec::<files::Report>::new()).into_response();
    };
    match blocking(move || files::reports(&dir)).await {
        Ok(list) => Json(list).into_response(),
        Err(e) => e,
    }
}

async fn run_file(State(app): State<Arc<App>>, Path(path): Path<String>) -> Response {
    let dir = app.runs.dir().to_path_buf();
    blocking(move || files::answer(Some(&dir), &path))
        .await
        .unwrap_or_else(|e| e)
}

async fn report_file(State(app): State<Arc<App>>, Path(path): Path<String>) -> Response {
    let dir = app.setup.reports.clone();
    blocking(move || files::answer(dir.as_deref(), &path))
        .await
        .unwrap_or_else(|e| e)
}
