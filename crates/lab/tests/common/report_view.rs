//! A lab report as a new user sees it (issue 57): headless Chromium (testbed's `browser`) opens
//! the run's `index.html` at a laptop's 1300x900 and a phone's 390x844. The first screen must
//! show every strategy's grade and the whole comparison plot, and nothing may stick out
//! sideways (`document.documentElement.scrollWidth` within the window). The report's SVGs must
//! parse as XML, the comparison carrying every strategy's series. Screenshots and a copy of the
//! page go to `target/test-reports/lab-report/`. Included with `#[path]` by `lab.rs` only.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use unbloat_testbed::browser;

/// Where the screenshots and the page's copy go: a person looks at them after the run.
pub fn shots_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/test-reports/lab-report"
    ))
}

/// What the page shows in the first screen, read in the browser.
const FIRST_SCREEN: &str = r#"
    const grades = [...document.querySelectorAll('.card')].map((c) => {
        const g = c.querySelector('.grade'), r = g.getBoundingClientRect();
        const series = document.querySelectorAll(`#compare polyline[data-series="${c.dataset.strategy}"]`).length;
        return [c.dataset.strategy, g.textContent, r.bottom, r.right, series];
    });
    const p = document.querySelector('#compare svg').getBoundingClientRect();
    return { width: window.innerWidth, height: window.innerHeight,
             scroll: document.documentElement.scrollWidth, grades,
             plot: [p.top, p.bottom, p.right, p.width],
             headline: document.querySelector('.headline').textContent };"#;

/// Parses `path` as XML, failing with the parser's reason.
fn parse(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if let Err(e) = roxmltree::Document::parse(&text) {
        panic!("{} is not XML: {e}", path.display());
    }
    text
}

/// Every SVG of the report in `out` parses; `compare.svg` has a series per strategy.
pub fn check_svgs(out: &Path, strategies: &[String]) {
    let compare = parse(&out.join("compare.svg"));
    for s in strategies {
        assert!(
            compare.contains(&format!("data-series=\"{s}\"")),
            "{s} not in compare.svg"
        );
        let dir = std::fs::read_dir(out.join(s)).expect("the strategy's directory");
        for e in dir
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        {
            parse(&e.path());
        }
    }
}

/// A port nobody listens on now, for chromedriver.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    l.local_addr().expect("its address").port()
}

/// chromedriver, ended when the view is done however it ends.
struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Opens `out/index.html` in Chromium at each size and checks the first screen (see the module).
pub fn look_at_the_report(out: &Path, strategies: &[String]) {
    browser::check_installed();
    let shots = shots_dir();
    std::fs::create_dir_all(&shots).expect("the screenshots' directory");
    for f in ["index.html", "compare.svg"] {
        std::fs::copy(out.join(f), shots.join(f)).expect("a copy of the report");
    }
    let port = free_port();
    let log = std::fs::File::create(out.join("chromedriver.log")).expect("chromedriver's log");
    let _driver = Driver(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("chromedriver"),
    );
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("file://{}", out.join("index.html").display());
    let profile = out.join("chromium-profile");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let c = browser::connect(port, &profile, 1300, 900).await;
        for (w, h) in [(1300u32, 900u32), (390, 844)] {
            // The window's size is its outside: grow it by what its frame takes, so that the
            // page itself gets w x h.
            c.set_window_size(w, h).await.expect("the window's size");
            let inner = c
                .execute("return [window.innerWidth, window.innerHeight];", vec![])
                .await
                .expect("the window's inside");
            let px = |i: usize| inner[i].as_u64().unwrap_or(0) as u32;
            let (dw, dh) = (w.saturating_sub(px(0)), h.saturating_sub(px(1)));
            c.set_window_size(w + dw, h + dh)
                .await
                .expect("the window's size");
            c.goto(&url).await.expect("the report opens");
            let seen = browser::until(
                &c,
                "the report's first screen",
                FIRST_SCREEN,
                Duration::from_secs(20),
            )
            .await;
            let name = format!("{w}x{h}.png");
            browser::shot(&c, &shots, &name).await;
            eprintln!("{w}x{h}: {seen}");
            let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
            let (width, height) = (num(&seen["width"]), num(&seen["height"]));
            assert_eq!(
                (width, height),
                (f64::from(w), f64::from(h)),
                "the page's window: {seen}"
            );
            assert!(
                num(&seen["scroll"]) <= width,
                "the page scrolls sideways at {w} px: {seen}"
            );
            let grades = seen["grades"].as_array().expect("the cards");
            for s in strategies {
                let card = grades
                    .iter()
                    .find(|g| g[0] == s.as_str())
                    .unwrap_or_else(|| panic!("no card for {s} at {w} px: {seen}"));
                let grade = card[1].as_str().unwrap_or_default();
                assert!(
                    ["A+", "A", "B", "C", "D", "F"].contains(&grade),
                    "{s}'s grade {grade:?} at {w} px"
                );
                assert!(
                    num(&card[2]) <= height && num(&card[3]) <= width,
                    "{s}'s grade is off the first screen at {w}x{h}: {seen}"
                );
                assert!(
                    num(&card[4]) >= 2.0,
                    "{s} has no line in the comparison plot: {seen}"
                );
            }
            let plot = seen["plot"].as_array().expect("the plot's box");
            let (top, bottom, right, pw) =
                (num(&plot[0]), num(&plot[1]), num(&plot[2]), num(&plot[3]));
            assert!(
                top >= 0.0 && bottom <= height && right <= width,
                "the comparison is not all in the first screen at {w}x{h}: {seen}"
            );
            assert!(
                pw >= 0.8 * width,
                "the comparison is drawn small ({pw} px) at {w} px"
            );
        }
        c.close().await.expect("the session ends");
    });
    eprintln!("the report's screenshots are in {}", shots.display());
}
