//! The daemon's web page driven by Debian's Chromium, headless, in a real kernel (issue 14):
//! `unbloat daemon --web` shapes a veth with cake, and Chromium, through chromedriver
//! (WebDriver), loads the page and
//!
//! 1. sees the graphs move: two reads of the upload's graphs 2.5 s apart differ while a UDP
//!    flood goes through cake, and the upload's drop count on the page rises above 0;
//! 2. submits bad download rates (`-5mbit`, then `20000` without a unit) and sees each one's
//!    error beside the `down` field, with nothing applied: the kernel's qdiscs and the file are
//!    as they were;
//! 3. submits a good one (`30mbit`) and sees it applied: the page says so and its interface card
//!    shows the new plan, tc shows the new bandwidth, and the file says it;
//! 4. sees the interface's card say it is left to another process, and which (`unbloat tune`,
//!    holding the interface's controller lock), then shaped again once that lock is free.
//!
//! Screenshots of each step go to `target/test-reports/web/`.

mod common;

use common::{in_ns, udp_flood, wait_until, Netns, UNBLOAT};
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use unbloat_system::lock::ControllerLock;
use unbloat_testbed::browser::{self, until, Client, Locator};
use unbloat_testbed::real_kernel_test;

const CONFIG: &str = "[interface.wan0]\ndown = \"20mbit\"\nup = \"2mbit\"\n";
/// In the test's own network namespace: no other test's port.
const WEB: &str = "127.0.0.1:19724";
const DRIVER_PORT: u16 = 19515;

fn shots_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/test-reports/web"
    ))
}

/// A child ended with SIGTERM when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn start_in(ns: &Netns, argv: &[&str], log: &str) -> Running {
    let log = std::fs::File::create(ns.run_dir.join(log)).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(argv)
        .env("UNBLOAT_RUN_DIR", &ns.run_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    Running(child)
}

/// The WAN's shaping as tc shows it (settings, no counters), read from the calling thread's
/// namespace (a process inherits its thread's).
fn shaping_here() -> String {
    common::text(&common::sh(
        "tc qdisc show dev wan0; tc qdisc show dev ifb4wan0; tc filter show dev wan0 ingress",
    ))
}

async fn shot(c: &Client, name: &str) {
    browser::shot(c, &shots_dir(), name).await;
}

async fn set_down(c: &Client, value: &str) {
    let input = c
        .find(Locator::Css(r#"input[name="wan0/down"]"#))
        .await
        .expect("the down field of wan0's card");
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
    c.find(Locator::Css(
        r#"form.config-card[data-iface="wan0"] button[type="submit"]"#,
    ))
    .await
    .expect("wan0's Apply button")
    .click()
    .await
    .unwrap();
}

/// The graphs' drawings of the upload, as the page has them now.
const GRAPHS: &str = r#"return ["rate", "delay", "drops"]
    .map((k) => document.querySelector(`svg[data-chart="wan0/up/${k}"]`).innerHTML).join("\n");"#;
/// The upload's qdisc drop count in its table on the page.
const UP_DROPS: &str = r#"const row = document.querySelector('.side[data-direction="up"] tr.total');
    return row ? Number(row.children[4].textContent) : 0;"#;
const DOWN_ERROR: &str =
    r#"return document.querySelector('[data-error="wan0/down"]').textContent;"#;
const RESULT: &str = r#"const r = document.querySelector('[data-result="wan0"]');
    return r && r.textContent.startsWith("Applied") ? r.textContent : "";"#;

real_kernel_test! {
    fn chromium_sees_graphs_move_a_fields_error_and_a_change_applied() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let t0 = Instant::now();
        browser::check_installed();
        let ns = Netns::new();
        let _far = ns.wan_to_far_end();
        std::fs::create_dir_all(&ns.run_dir).unwrap();
        let config = ns.run_dir.join("unbloat.toml");
        std::fs::write(&config, CONFIG).unwrap();
        // Checked every 10 s: step 4 waits for one.
        let daemon = start_in(&ns, &[UNBLOAT, "daemon", "--config", config.to_str().unwrap(), "--web", WEB, "--check-every", "10"], "daemon.log");
        let up = in_ns(&ns.name.clone(), || wait_until(Duration::from_secs(30), || std::net::TcpStream::connect(WEB).is_ok()));
        assert!(up.is_some(), "the daemon's web page did not open");
        assert!(wait_until(Duration::from_secs(30), || ns.tc("qdisc show dev ifb4wan0").contains("bandwidth 20Mbit")).is_some(),
            "the daemon did not shape wan0");
        let token = std::fs::read_to_string(ns.run_dir.join("web-token")).expect("the token file").trim().to_string();
        let log = std::fs::read_to_string(ns.run_dir.join("daemon.log")).unwrap();
        // Issue 36: the journal is readable by more than root; the token stays in its file.
        assert!(!log.contains(&token), "the token was logged: {log}");
        let token_file = ns.run_dir.join("web-token");
        assert!(log.contains(&format!("web page on http://{WEB}/ (changes need its token, which only root can read, in {}", token_file.display())), "{log}");

        let _driver = start_in(&ns, &["chromedriver", &format!("--port={DRIVER_PORT}")], "chromedriver.log");
        let d2 = format!("127.0.0.1:{DRIVER_PORT}");
        assert!(in_ns(&ns.name.clone(), move || wait_until(Duration::from_secs(30), || std::net::TcpStream::connect(&d2).is_ok()).is_some()),
            "chromedriver did not start: {}", std::fs::read_to_string(ns.run_dir.join("chromedriver.log")).unwrap_or_default());
        let kernel_before = ns.snapshot();
        eprintln!("daemon and chromedriver up after {:.1?}", t0.elapsed());

        let profile = ns.run_dir.join("chromium-profile");
        let config_path = config.clone();
        let run_dir = ns.run_dir.clone();
        let url = format!("http://{WEB}/#token={token}");
        in_ns(&ns.name.clone(), move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let shaping_before = shaping_here();
            assert!(shaping_before.contains("bandwidth 20Mbit"), "{shaping_before}");
            rt.block_on(async move {
                let c = browser::connect(DRIVER_PORT, &profile, 1280, 1000).await;
                eprintln!("Chromium started after {:.1?}", t0.elapsed());
                c.goto(&url).await.unwrap();
                eprintln!("page opened after {:.1?}", t0.elapsed());
                let daemon = until(&c, "the daemon's status line", "const t = document.querySelector('#daemon').textContent; return t.startsWith('pid') ? t : '';", Duration::from_secs(30)).await;
                eprintln!("page loaded after {:.1?}: {daemon}", t0.elapsed());
                let state = c.execute("return document.querySelector('#token-state').textContent;", vec![]).await.unwrap();
                assert_eq!(state, "changes allowed (token set)", "the token from the URL was taken");
                let hash = c.execute("return location.hash;", vec![]).await.unwrap();
                assert_eq!(hash, "", "the token must leave the address bar");
                // Issue 53: the runs' files need the token; the page has the daemon set it as a
                // cookie for /runs/ alone, which its scripts cannot read. A missing run is then
                // 404, not 401.
                let cookie = c.execute("return document.cookie;", vec![]).await.unwrap();
                assert!(!cookie.to_string().contains(&token), "the token cookie is readable by scripts: {cookie}");
                let run_file = until(&c, "a run's file read with the cookie",
                    "return fetch('/runs/none/index.html').then(r => r.status === 401 ? '' : String(r.status));",
                    Duration::from_secs(10)).await;
                assert_eq!(run_file, "404", "a run's file without the cookie's token");

                // 1. The graphs move under a UDP flood through the upload's cake (6 Mbit/s into
                // 2 Mbit/s: its queue fills, delays rise, it drops).
                until(&c, "two samples drawn", r#"return document.querySelector('svg[data-chart="wan0/up/rate"] path.line') !== null;"#, Duration::from_secs(20)).await;
                // Started from a thread in the namespace: this thread is in it too.
                let flood = std::thread::spawn(|| udp_flood(6e6, Duration::from_secs(8)));
                tokio::time::sleep(Duration::from_secs(2)).await;
                let first = c.execute(GRAPHS, vec![]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2500)).await;
                let second = c.execute(GRAPHS, vec![]).await.unwrap();
                assert_ne!(first, second, "the graphs did not change in 2.5 s under load");
                let drops = until(&c, "upload drops on the page", UP_DROPS, Duration::from_secs(10)).await;
                eprintln!("graphs moved; the page shows {drops} upload drops ({:.1?})", t0.elapsed());
                shot(&c, "1-live-graphs.png").await;
                flood.join().unwrap();

                // 2. Bad values: the field's error, nothing applied (checked outside, below).
                c.execute(r#"document.querySelector('form.config-card[data-iface="wan0"]').scrollIntoView();"#, vec![]).await.unwrap();
                for (bad, says, name) in [("-5mbit", "negative", "2-bad-negative.png"), ("20000", "no unit", "3-bad-no-unit.png")] {
                    set_down(&c, bad).await;
                    let js = format!("const t = document.querySelector('[data-error=\"wan0/down\"]').textContent; return t.includes('{says}') ? t : '';");
                    let error = until(&c, &format!("the error of down = {bad}"), &js, Duration::from_secs(20)).await;
                    eprintln!("down = {bad}: the page says {error}");
                    let invalid = c.execute(r#"return document.querySelector('input[name="wan0/down"]').classList.contains('invalid');"#, vec![]).await.unwrap();
                    assert_eq!(invalid, json!(true), "the field is marked");
                    shot(&c, name).await;
                    assert_eq!(shaping_here(), shaping_before, "a refused value changed the kernel");
                    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), CONFIG, "a refused value was written");
                }

                // 3. A good value: applied by the daemon's reload, and the page says so.
                set_down(&c, "30mbit").await;
                let said = until(&c, "the reload's answer", RESULT, Duration::from_secs(30)).await;
                eprintln!("down = 30mbit: the page says {said} ({:.1?})", t0.elapsed());
                let error = c.execute(DOWN_ERROR, vec![]).await.unwrap();
                assert_eq!(error, "", "no error left beside the field");
                c.execute(r#"document.querySelector('form.config-card[data-iface="wan0"]').scrollIntoView();"#, vec![]).await.unwrap();
                shot(&c, "4-applied.png").await;
                // The interface's card shows the new plan, read back from the daemon.
                until(&c, "the new rate on wan0's card", r#"const s = document.querySelector('.iface-card[data-iface="wan0"] .summary').textContent;
                    return s.includes("cake 30mbit") ? s : "";"#, Duration::from_secs(15)).await;
                c.execute("window.scrollTo(0, 0);", vec![]).await.unwrap();
                tokio::time::sleep(Duration::from_secs(2)).await;
                shot(&c, "5-new-rate-live.png").await;

                // 4. Another process moves wan0's rates (as `unbloat tune` holds its controller
                // lock for its run): at its next check the daemon leaves wan0 to it, and the card
                // says so and by whom; once it is done, shaped again.
                let tune = ControllerLock::acquire(&run_dir, "wan0", "unbloat tune").expect("the lock is free");
                let held = until(&c, "wan0 left to the tune", r#"const c = document.querySelector('.iface-card[data-iface="wan0"]');
                    const b = c.querySelector('.health').textContent, d = c.querySelector('.health-detail').textContent;
                    return b === "left to another process" && d.startsWith("unbloat tune, pid") ? d : "";"#, Duration::from_secs(30)).await;
                eprintln!("wan0's card: {held} ({:.1?})", t0.elapsed());
                shot(&c, "6-left-to-a-tune.png").await;
                drop(tune);
                until(&c, "wan0 shaped again", r#"const c = document.querySelector('.iface-card[data-iface="wan0"]');
                    return c.querySelector('.health').textContent === "shaped" && c.querySelector('.health-detail').textContent === "" ? "yes" : "";"#,
                    Duration::from_secs(30)).await;
                c.close().await.unwrap();
            });
        });
        // The good value changed the download's rate and nothing else.
        let q = ns.tc("qdisc show dev ifb4wan0");
        assert!(q.contains("bandwidth 30Mbit"), "{q}");
        let file = std::fs::read_to_string(&config).unwrap();
        assert_eq!(file, CONFIG.replace("20mbit", "30mbit"));
        assert_eq!(ns.snapshot(), kernel_before.replace("bandwidth 20Mbit", "bandwidth 30Mbit"),
            "only the download's bandwidth changed");
        // SIGTERM: the daemon ends cleanly, and its token goes with it.
        drop(daemon);
        assert!(!ns.run_dir.join("web-token").exists(), "the token file outlived the daemon");
        eprintln!("done in {:.1?}; screenshots in {}", t0.elapsed(), shots_dir().display());
    }
}
