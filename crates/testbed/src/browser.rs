//! Debian's Chromium, headless, driven through chromedriver (WebDriver) by the tests that look
//! at a page: the daemon's web page (`crates/cli/tests/web.rs`) and the lab's report
//! (`crates/lab/tests/lab.rs`). Behind the `browser` feature, which only tests turn on: the lab's
//! binary links this crate without it.
//!
//! The test starts chromedriver itself (in its network namespace, if it has one) and waits for
//! its port; this module holds what is the same for every such test: the programs' check, the
//! Chromium options that work in a User-Mode Linux guest, the session, waiting for the page and
//! screenshots.

use std::path::Path;
use std::time::{Duration, Instant};

pub use fantoccini::{Client, Locator};
use serde_json::{json, Value};

/// Fails, saying which Debian package to install, unless Chromium and chromedriver are there.
pub fn check_installed() {
    for (program, package) in [
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/chromedriver", "chromium-driver"),
    ] {
        assert!(
            Path::new(program).exists(),
            "{program} is missing: scripts/install-deps installs Debian's {package}"
        );
    }
}

/// A Chromium session through the chromedriver listening on `127.0.0.1:driver_port`, with a
/// window of `width` x `height` and its profile in `profile` (a fresh directory).
pub async fn connect(driver_port: u16, profile: &Path, width: u32, height: u32) -> Client {
    // A process costs 50-100 ms to start in User-Mode Linux and Chromium starts many: no zygote
    // saves some. Not --single-process: it halved the start once, but Chromium 156 (Debian's,
    // 2026-11) dies in it on its first page (SIGTRAP). No sandbox: Chromium refuses to run as
    // root with one, and the guest is thrown away.
    let caps = json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--no-zygote",
                     "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     format!("--window-size={width},{height}"),
                     format!("--user-data-dir={}", profile.display())],
        }
    });
    let Value::Object(caps) = caps else {
        unreachable!("a JSON object")
    };
    fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a Chromium session through chromedriver")
}

/// Evaluates `js` (a function body that returns a value) until it returns something truthy.
pub async fn until(c: &Client, what: &str, js: &str, limit: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        let v = c.execute(js, vec![]).await.unwrap_or(Value::Null);
        let truthy = !matches!(&v, Value::Null | Value::Bool(false))
            && v.as_str() != Some("")
            && v.as_f64() != Some(0.0);
        if truthy {
            return v;
        }
        assert!(
            t0.elapsed() < limit,
            "waited {limit:?} for {what}; last {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Saves what the window shows as `dir/name` (a PNG).
pub async fn shot(c: &Client, dir: &Path, name: &str) {
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::create_dir_all(dir).expect("the screenshots' directory");
    std::fs::write(dir.join(name), png).expect("a screenshot written");
}
