//! LuCI's status view reads unbloat through rpcd's exec plugin
//! (`packaging/openwrt/luci/rpcd/luci.unbloat`, installed as /usr/libexec/rpcd/luci.unbloat).
//! rpcd and LuCI are not here (docs/openwrt.md says why); the plugin is run as rpcd runs it
//! (`list`, then `call status` with the arguments on stdin), in a real kernel where unbloat
//! shapes a device, and what it prints is what rpcd would hand the view:
//! - `list` names `status` and nothing else (the ACL grants exactly that method);
//! - `call status` is one JSON object whose `interfaces` carry each shaped device's tins with
//!   the numbers the view draws (delays, drops, marks), and `exit` 0;
//! - with nothing shaped, an empty list and still a JSON object; an unknown method is refused.

mod common;

use common::Netns;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use unbloat_testbed::real_kernel_test;

/// The plugin's output for `args`, run as rpcd would (stdin: `{}`), in `ns`, with the tests'
/// unbloat first on PATH.
fn plugin(ns: &Netns, args: &[&str]) -> (Option<i32>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging/openwrt/luci/rpcd/luci.unbloat");
    let bin_dir = Path::new(common::UNBLOAT).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "sh"])
        .arg(&script)
        .args(args)
        .env("PATH", path)
        .env("UNBLOAT_RUN_DIR", &ns.run_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{}").unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

real_kernel_test! {
    fn rpcds_plugin_gives_the_status_view_each_tins_numbers() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let ns = Netns::new();
        ns.must("ip link add wan0 type veth peer name peer0");

        let (code, listed) = plugin(&ns, &["list"]);
        assert_eq!(code, Some(0));
        assert_eq!(json(&listed), serde_json::json!({"status": {}}));

        let (code, empty) = plugin(&ns, &["call", "status"]);
        assert_eq!(code, Some(0));
        assert_eq!(json(&empty)["interfaces"], serde_json::json!([]), "{empty}");

        let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit", "--diffserv", "diffserv4"]);
        assert!(out.status.success(), "{}", common::text(&out));
        let (code, text) = plugin(&ns, &["call", "status"]);
        assert_eq!(code, Some(0));
        let status = json(&text);
        assert_eq!(status["exit"], 0, "{text}");
        let wan = &status["interfaces"][0];
        assert_eq!(wan["device"], "wan0", "{text}");
        for dir in ["egress", "ingress"] {
            let tins = wan[dir]["shaper"]["tins"].as_array().unwrap_or_else(|| panic!("no {dir} tins: {text}"));
            assert_eq!(tins.len(), 4, "diffserv4 has four tins: {text}");
            for tin in tins {
                for key in ["name", "avg_delay_us", "peak_delay_us", "sparse_delay_us", "drops", "ecn_marks", "backlog_bytes"] {
                    assert!(!tin[key].is_null(), "{dir} tin without {key}: {tin}");
                }
            }
        }

        let (code, refused) = plugin(&ns, &["call", "stop"]);
        assert_eq!(code, Some(2), "{refused}");
        assert!(json(&refused)["error"].is_string());
    }
}
