//! The page's HTTP surface, called through the server's own decision ([`crate::http::respond`],
//! no socket): the token guards every change, a large body is refused, files stay inside their
//! directory, and a config error lands on its field with nothing written or reloaded.

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;

use serde_json::{json, Value};

use super::*;
use crate::http::{Request as HttpRequest, LIMITS};
use crate::keeper::Reloaded;

const TOKEN: &str = "0123456789abcdef";
const FILE: &str = "[interface.wan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n";

struct Fixture {
    app: Web,
    /// Kept for its drop: the directory goes when the test ends.
    _dir: crate::web::scratch::Scratch,
    config: PathBuf,
    /// Reloads the keeper was asked for.
    reloads: Arc<AtomicUsize>,
}

fn fixture(name: &str) -> Fixture {
    let scratch = crate::web::scratch::Scratch::new(&format!("web-{name}"));
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("run/runs/1-test")).unwrap();
    std::fs::create_dir_all(dir.join("reports/lab1")).unwrap();
    std::fs::write(dir.join("run/runs/1-test/index.html"), "<h1>run</h1>").unwrap();
    std::fs::write(dir.join("reports/lab1/index.html"), "<h1>lab</h1>").unwrap();
    std::fs::write(dir.join("secret"), "not for the web").unwrap();
    std::os::unix::fs::symlink(dir.join("secret"), dir.join("reports/lab1/out")).unwrap();
    let config = dir.join("unbloat.toml");
    std::fs::write(&config, FILE).unwrap();
    let reloads = Arc::new(AtomicUsize::new(0));
    let counted = reloads.clone();
    let ask: Ask = Arc::new(move |r| match r {
        Request::Reload => {
            counted.fetch_add(1, Ordering::SeqCst);
            Some(Answer::Reloaded(Reloaded {
                changed: vec!["wan0".into()],
                ..Reloaded::default()
            }))
        }
        Request::Status => None,
    });
    let setup = Setup {
        state: StateDir::new(dir.join("run")),
        config: config.clone(),
        reports: Some(dir.join("reports")),
        ask,
        exe: PathBuf::from("/bin/false"),
        hosts: vec!["router.lan".into()],
        tune: false,
    };
    Fixture {
        app: Web::new(setup, Token::from_text(TOKEN)),
        _dir: scratch,
        config,
        reloads,
    }
}

fn call(app: &Web, req: HttpRequest) -> (u16, String) {
    let res = http::respond(app, req, &LIMITS);
    (res.status, res.body_text())
}

fn gunzip(body: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(body)
        .read_to_string(&mut text)
        .expect("a gzip stream of UTF-8 text");
    text
}

/// Issue 53: a client that does not take gzip (curl without --compressed, Python's urllib,
/// which sends `identity`) got 406 (before that, gzip it could not read); it gets the files
/// plain, the same bytes as their sources.
#[test]
fn a_client_that_refuses_gzip_gets_the_files_plain() {
    let f = fixture("coding");
    let page = |path, coding| {
        http::respond(
            &f.app,
            get(path).with_header("accept-encoding", coding),
            &LIMITS,
        )
    };
    for refuses in [
        "identity",
        "gzip;q=0, identity",
        "br",
        "*;q=0",
        "deflate, *;q=0",
    ] {
        let res = page("/", refuses);
        assert_eq!(res.status, 200, "{refuses}");
        assert_eq!(res.header("content-encoding"), None, "{refuses}");
        assert_eq!(
            res.body_text(),
            include_str!("assets/index.html"),
            "{refuses}"
        );
    }
    for (path, source) in [
        ("/app.js", include_str!("assets/app.js")),
        ("/chart.js", include_str!("assets/chart.js")),
        ("/forms.js", include_str!("assets/forms.js")),
        ("/style.css", include_str!("assets/style.css")),
    ] {
        assert_eq!(page(path, "identity").body_text(), source, "{path}");
    }
    for takes in [
        "GZIP",
        "x-gzip",
        "br;q=1, gzip;q=0.5",
        "*",
        "identity, *;q=0.1",
    ] {
        let res = page("/", takes);
        assert_eq!(res.status, 200, "{takes}");
        assert_eq!(res.header("content-encoding"), Some("gzip"), "{takes}");
    }
    assert_eq!(inflated(b"\x1f\x8b\x08\x08 not what build.rs writes"), None);
}

/// Issue 53: `GET /api/config` gave the whole config to anyone who reached the page, even when
/// the file was root's alone; the config and the runs are read with the token now.
#[test]
fn the_config_and_the_runs_are_read_with_the_token_only() {
    let f = fixture("read-token");
    for path in ["/api/config", "/api/runs"] {
        for token in [None, Some("wrong")] {
            let mut req = get(path);
            if let Some(t) = token {
                req = req.with_header("authorization", &format!("Bearer {t}"));
            }
            let (status, body) = call(&f.app, req);
            assert_eq!(status, 401, "{path} with {token:?}: {body}");
            assert!(!body.contains("20mbit"), "{body}");
        }
        let (status, _) = call(&f.app, authorized(get(path)));
        assert_eq!(status, 200, "{path}");
    }
}

fn authorized(req: HttpRequest) -> HttpRequest {
    req.with_header("authorization", &format!("Bearer {TOKEN}"))
}

/// Issue 53: each status request waited on the keeper from a thread of its own, with no end: a
/// keeper stuck in a long apply gathered one thread per poll. One question waits at a time; the
/// others get 503 at once, and the one waiting gives up after STATUS_WAIT with 503.
#[test]
fn status_gives_up_when_the_keeper_is_busy() {
    let mut f = fixture("busy");
    let (release, stuck) = mpsc::channel::<()>();
    let stuck = Arc::new(Mutex::new(stuck));
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    f.app.setup.ask = Arc::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = stuck.lock().unwrap().recv();
        None
    });
    let app = Arc::new(f.app);
    let first = {
        let app = app.clone();
        std::thread::spawn(move || call(&app, get("/api/status")))
    };
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        let (status, body) = call(&app, get("/api/status"));
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("busy"), "{body}");
    }
    let (status, _) = first.join().unwrap();
    assert_eq!(status, 503, "the first question did not give up");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the keeper was asked more than once"
    );
    release.send(()).unwrap();
}

fn get(uri: &str) -> HttpRequest {
    HttpRequest::new("GET", uri)
}

fn post(uri: &str, token: Option<&str>, body: String) -> HttpRequest {
    let mut r = HttpRequest::new("POST", uri)
        .with_header("content-type", "application/json")
        .with_body(body);
    if let Some(t) = token {
        r = r.with_header("authorization", &format!("Bearer {t}"));
    }
    r
}

fn change(down: &str) -> String {
    json!({"interface": "wan0", "values": {"down": down}}).to_string()
}

#[test]
fn reading_needs_no_token_and_the_page_is_embedded() {
    let f = fixture("read");
    // As a browser asks, and as a client that names no coding: the files compressed, and each
    // the same bytes as its source once decompressed.
    for (path, source) in [
        ("/", include_str!("assets/index.html")),
        ("/app.js", include_str!("assets/app.js")),
        ("/chart.js", include_str!("assets/chart.js")),
        ("/forms.js", include_str!("assets/forms.js")),
        ("/style.css", include_str!("assets/style.css")),
    ] {
        for req in [
            get(path).with_header("accept-encoding", "gzip, deflate, br"),
            get(path),
        ] {
            let res = http::respond(&f.app, req, &LIMITS);
            assert_eq!(res.status, 200, "{path}");
            assert_eq!(res.header("content-encoding"), Some("gzip"), "{path}");
            assert!(res.body.len() < source.len(), "{path} is sent compressed");
            assert_eq!(gunzip(&res.body), source, "{path}");
        }
    }
    let (status, body) = call(&f.app, authorized(get("/api/config")));
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["interfaces"][0]["name"], "wan0");
    assert_eq!(v["interfaces"][0]["values"]["down"], "20mbit");
    let (status, body) = call(&f.app, get("/api/live"));
    assert_eq!(
        (status, body.contains("\"interfaces\":[]")),
        (200, true),
        "{body}"
    );
    let (_, body) = call(&f.app, get("/api/reports"));
    assert!(body.contains("\"name\":\"lab1\""), "{body}");
}

#[test]
fn a_change_without_the_right_token_is_401_and_changes_nothing() {
    let f = fixture("token");
    for token in [None, Some("wrong"), Some(&TOKEN[1..])] {
        for (uri, body) in [
            ("/api/config", change("30mbit")),
            (
                "/api/runs",
                json!({"kind": "test", "server": "x"}).to_string(),
            ),
            ("/api/runs/stop", String::new()),
            ("/api/token", String::new()),
        ] {
            let (status, text) = call(&f.app, post(uri, token, body));
            assert_eq!(status, 401, "{uri} with {token:?}: {text}");
            assert!(text.contains("token"), "{text}");
        }
    }
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 0);
    let (_, runs) = call(&f.app, authorized(get("/api/runs")));
    assert_eq!(runs, "[]");
    let (status, _) = call(&f.app, post("/api/token", Some(TOKEN), String::new()));
    assert_eq!(status, 204);
}

#[test]
fn a_body_over_the_limit_is_413() {
    let f = fixture("limit");
    let huge = json!({"text": "#".repeat(LIMITS.max_body)}).to_string();
    let (status, _) = call(&f.app, post("/api/config", Some(TOKEN), huge));
    assert_eq!(status, 413);
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 0);
}

#[test]
fn files_are_served_from_their_directory_only() {
    let f = fixture("files");
    let (status, body) = call(
        &f.app,
        get("/runs/1-test/index.html").with_header("authorization", &format!("Bearer {TOKEN}")),
    );
    assert_eq!((status, body.as_str()), (200, "<h1>run</h1>"));
    let res = http::respond(&f.app, get("/reports/lab1/"), &LIMITS);
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-security-policy"), Some("sandbox"));
    for uri in [
        "/runs/..%2F..%2Fsecret",
        "/runs/%2e%2e/%2e%2e/secret",
        "/reports/..%2Fsecret",
        "/reports/lab1/out",
        "/reports/%2Fetc%2Fpasswd",
    ] {
        // With the token: the runs' files need it, and what is refused here is the path.
        let authorized = get(uri).with_header("authorization", &format!("Bearer {TOKEN}"));
        let (status, body) = call(&f.app, authorized);
        assert!(matches!(status, 403 | 404), "{uri}: {status} {body}");
        assert!(!body.contains("not for the web"), "{uri}");
    }
}

#[test]
fn a_bad_value_is_its_fields_error_and_nothing_is_written_or_reloaded() {
    let f = fixture("config");
    for (bad, says) in [
        ("-5mbit", "negative"),
        ("20000", "no unit"),
        ("5kbit", "8kbit"),
    ] {
        let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), change(bad)));
        assert_eq!(status, 422, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["errors"][0]["iface"], "wan0", "{body}");
        assert_eq!(v["errors"][0]["key"], "down", "{body}");
        assert!(
            v["errors"][0]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 0);

    let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), change("30mbit")));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["applied"].as_bool(), &v["reloaded"]["changed"][0]),
        (Some(true), &json!("wan0"))
    );
    assert!(std::fs::read_to_string(&f.config)
        .unwrap()
        .contains("down = \"30mbit\""));
    assert_eq!(f.reloads.load(Ordering::SeqCst), 1);
}

#[test]
fn the_toml_editor_is_checked_the_same_way_and_check_writes_nothing() {
    let f = fixture("toml");
    let bad = json!({"text": "[interface.wan0]\ndown = \"20mbit\"\nflowz = 3\n"}).to_string();
    let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), bad));
    assert_eq!(status, 422, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["errors"][0]["key"], "flowz", "{body}");
    assert_eq!(v["errors"][0]["line"], 3, "{body}");

    let good = "[interface.wan0]\ndown = \"40mbit\"\n";
    let check = json!({"text": good, "check": true}).to_string();
    let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), check));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["applied"].as_bool()),
        (Some(true), Some(false))
    );
    assert!(
        v["plans"][0]["summary"][0]
            .as_str()
            .unwrap()
            .contains("40mbit"),
        "{body}"
    );
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 0);

    let apply = json!({ "text": good }).to_string();
    let (status, _) = call(&f.app, post("/api/config", Some(TOKEN), apply));
    assert_eq!(status, 200);
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), good);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 1);
}

#[test]
fn a_foreign_host_name_is_refused_even_for_reads() {
    let f = fixture("host");
    let with_host = |host: &str| authorized(get("/api/config")).with_header("host", host);
    let (status, body) = call(&f.app, with_host("rebind.evil.example:8723"));
    assert_eq!(status, 421, "{body}");
    assert!(body.contains("--web-host rebind.evil.example"), "{body}");
    assert!(!body.contains("20mbit"), "{body}");
    for ok in [
        "127.0.0.1:8723",
        "localhost:8723",
        "[::1]:8723",
        "router.lan:8723",
    ] {
        let (status, body) = call(&f.app, with_host(ok));
        assert_eq!(status, 200, "{ok}: {body}");
    }
    // A change from a foreign name is refused before the token is even looked at.
    let req = post("/api/config", Some(TOKEN), change("30mbit"))
        .with_header("host", "rebind.evil.example");
    assert_eq!(call(&f.app, req).0, 421);
    assert_eq!(f.reloads.load(Ordering::SeqCst), 0);
    assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
}

/// Issue 36, item 1: the journal is readable by the adm and systemd-journal groups, the token
/// file by root alone; the start line says where the file is and how to open the page with it.
#[test]
fn the_start_line_names_the_token_file_never_the_token() {
    let file = std::path::Path::new("/run/unbloat/web-token");
    let line = start_line("127.0.0.1:8723".parse().unwrap(), file);
    let hex_run = line
        .split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max();
    assert!(hex_run < Some(32), "a token-like run of hex digits: {line}");
    assert!(line.contains("http://127.0.0.1:8723/"), "{line}");
    assert!(
        line.contains("$(cat /run/unbloat/web-token)"),
        "no command that opens the page: {line}"
    );
}

/// Issue 36, item 1b: the daemon runs as root, and a config posted here names the file its
/// autorate log is written to. Only a name in the daemon's log directory is taken; anything
/// else is refused with nothing written and no reload.
#[test]
fn an_autorate_log_outside_the_log_directory_is_refused() {
    let f = fixture("autorate-log");
    let text = |log: &str| {
        format!("{FILE}\n[autorate.wan0]\nmin = \"2mbit\"\nmax = \"40mbit\"\nlog = \"{log}\"\n")
    };
    for log in [
        "/etc/motd",
        "../../etc/motd",
        "/var/log/unbloat/../../../etc/motd",
    ] {
        let body = json!({ "text": text(log) }).to_string();
        let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), body));
        assert_eq!(status, 422, "{log}: {body}");
        assert!(body.contains("/var/log/unbloat"), "{log}: {body}");
        assert_eq!(std::fs::read_to_string(&f.config).unwrap(), FILE);
        assert_eq!(f.reloads.load(Ordering::SeqCst), 0);
    }
    for log in ["wan0.autorate.log", "/var/log/unbloat/wan0.autorate.log"] {
        let check = json!({ "text": text(log), "check": true }).to_string();
        let (status, body) = call(&f.app, post("/api/config", Some(TOKEN), check));
        assert_eq!(status, 200, "{log}: {body}");
    }
}

/// A build without `tune` (the router's small one) says so: the status tells the page to hide
/// tune runs, and one asked for anyway is refused with why, nothing started.
#[test]
fn a_build_without_tune_refuses_tune_runs_and_says_so() {
    let f = fixture("no-tune");
    let (status, body) = call(&f.app, get("/api/status"));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["tune"], json!(false), "{body}");
    let run = json!({"kind": "tune", "server": "x", "iface": "wan0"}).to_string();
    let (status, body) = call(&f.app, post("/api/runs", Some(TOKEN), run));
    assert_eq!(status, 501, "{body}");
    assert!(body.contains("no tune"), "{body}");
    assert_eq!(call(&f.app, authorized(get("/api/runs"))).1, "[]");
}

/// Issue 53: a run's files are read with the token, in the header or in the cookie that
/// `POST /api/token` sets (links and images cannot send a header); the cookie reads runs only.
#[test]
fn the_runs_files_need_the_token_and_its_cookie_reads_them_only() {
    let f = fixture("run-files");
    let run = "/runs/1-test/index.html";
    let (status, body) = call(&f.app, get(run));
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("<h1>run</h1>"));
    let (status, _) = call(&f.app, get(run).with_header("cookie", "unbloat-token=0123"));
    assert_eq!(status, 401, "a wrong cookie");

    let res = http::respond(
        &f.app,
        post("/api/token", Some(TOKEN), String::new()),
        &LIMITS,
    );
    assert_eq!(res.status, 204);
    let set = res
        .header("set-cookie")
        .expect("POST /api/token sets the cookie")
        .to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/runs/"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let (status, body) = call(
        &f.app,
        get(run).with_header("cookie", &format!("theme=dark; {cookie}")),
    );
    assert_eq!((status, body.as_str()), (200, "<h1>run</h1>"));

    // The cookie is no token elsewhere: not for the config, not for a change.
    let (status, _) = call(&f.app, get("/api/config").with_header("cookie", &cookie));
    assert_eq!(status, 401);
    let mut change = post("/api/config", None, json!({"text": FILE}).to_string());
    change = change.with_header("cookie", &cookie);
    let (status, _) = call(&f.app, change);
    assert_eq!(status, 401);
    // Without the token the post is refused, and sets nothing.
    let res = http::respond(&f.app, post("/api/token", None, String::new()), &LIMITS);
    assert_eq!((res.status, res.header("set-cookie")), (401, None));
}
