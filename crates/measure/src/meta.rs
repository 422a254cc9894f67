//! The context a results file carries: kernel, hostname, and the qdiscs on the interface the
//! test traffic leaves by, as `tc -j -s` reports them (kept as tc's words for the file and read
//! with shaper's model of them: see `unbloat_report::qdiscs`).
//!
//! What callers can rely on: nothing here fails a test. A missing `ip` or `tc`, or output that
//! does not parse, gives `None` or [`EgressQdiscs::not_read`] plus a note saying what could not
//! be read.
//!
//! This module runs `ip` and `tc` itself (read-only queries) rather than through
//! unbloat-system's runner. The crate is not apart from the shaping side for that:
//! [`crate::backlog`] reads qdiscs over unbloat-system's rtnetlink, and the profiles are read by
//! unbloat-shaper's TOML reader.

use std::net::IpAddr;
use std::process::Command;
use unbloat_report::EgressQdiscs;

/// What the metadata collection found, with notes about what it could not.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    pub kernel: String,
    pub hostname: String,
    pub egress_iface: Option<String>,
    /// The router the route to the remote goes through (`via`); `None` on the remote's own
    /// link, or when the route could not be read.
    pub gateway: Option<IpAddr>,
    pub qdiscs: EgressQdiscs,
    pub notes: Vec<String>,
}

fn proc_text(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn run_json(argv: &[&str]) -> Result<serde_json::Value, String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| format!("`{}` could not run: {e}", argv.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`{}` printed no JSON: {e}", argv.join(" ")))
}

/// The device of the first route in `ip -j route get` output.
pub fn egress_from_route_json(route: &serde_json::Value) -> Option<String> {
    route
        .as_array()?
        .first()?
        .get("dev")?
        .as_str()
        .map(str::to_string)
}

/// The gateway of the first route in `ip -j route get` output (its `gateway`, which iproute2
/// prints for a route `via` a router).
pub fn gateway_from_route_json(route: &serde_json::Value) -> Option<IpAddr> {
    route
        .as_array()?
        .first()?
        .get("gateway")?
        .as_str()?
        .parse()
        .ok()
}

/// Collects the host's context for a test against `remote`.
pub fn collect(remote: IpAddr) -> HostInfo {
    let mut notes = Vec::new();
    let remote_text = remote.to_string();
    let (egress, gateway) = match run_json(&["ip", "-j", "route", "get", &remote_text]) {
        Ok(route) => {
            let dev = egress_from_route_json(&route);
            if dev.is_none() {
                notes.push(format!(
                    "no egress interface in `ip -j route get {remote_text}`"
                ));
            }
            (dev, gateway_from_route_json(&route))
        }
        Err(e) => {
            notes.push(format!("egress interface unknown: {e}"));
            (None, None)
        }
    };
    let qdiscs = match &egress {
        Some(dev) => {
            let argv = ["tc", "-j", "-s", "qdisc", "show", "dev", dev];
            let read = run_json(&argv).and_then(|v| {
                EgressQdiscs::from_tc_json(v).map_err(|e| format!("`{}`: {e}", argv.join(" ")))
            });
            read.unwrap_or_else(|e| {
                notes.push(format!("qdiscs not recorded: {e}"));
                EgressQdiscs::not_read()
            })
        }
        None => EgressQdiscs::not_read(),
    };
    HostInfo {
        kernel: proc_text("/proc/sys/kernel/osrelease"),
        // "(none)" is the kernel's word for a hostname nobody set (a fresh User-Mode Linux
        // guest): recorded as unknown, not as a name.
        hostname: Some(proc_text("/proc/sys/kernel/hostname"))
            .filter(|h| h != "(none)")
            .unwrap_or_default(),
        egress_iface: egress,
        gateway,
        qdiscs,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_device_comes_from_the_first_route() {
        // As printed by iproute2 6.x for `ip -j route get 10.0.0.2`.
        let text = r#"[{"dst":"10.0.0.2","dev":"veth0","prefsrc":"10.0.0.1","flags":[],"uid":0,"cache":[]}]"#;
        let v: serde_json::Value = serde_json::from_str(text).expect("json");
        assert_eq!(egress_from_route_json(&v).as_deref(), Some("veth0"));
        assert_eq!(egress_from_route_json(&serde_json::json!([])), None);
        assert_eq!(
            egress_from_route_json(&serde_json::json!({"dev": "x"})),
            None
        );
    }

    #[test]
    fn the_gateway_is_the_routes_via() {
        let via = r#"[{"dst":"8.8.8.8","gateway":"192.0.2.1","dev":"eth0","prefsrc":"192.0.2.2","flags":[],"uid":0,"cache":[]}]"#;
        let v: serde_json::Value = serde_json::from_str(via).expect("json");
        assert_eq!(
            gateway_from_route_json(&v),
            Some("192.0.2.1".parse().unwrap())
        );
        let v6 = serde_json::json!([{"dst": "2001:db8::1", "gateway": "fe80::1", "dev": "eth0"}]);
        assert_eq!(
            gateway_from_route_json(&v6),
            Some("fe80::1".parse().unwrap())
        );
        // On the remote's own link there is no router between.
        let on_link = serde_json::json!([{"dst": "10.0.0.2", "dev": "veth0"}]);
        assert_eq!(gateway_from_route_json(&on_link), None);
    }

    #[test]
    fn loopback_is_found_and_never_fails() {
        let info = collect("127.0.0.1".parse().expect("ip"));
        assert!(!info.kernel.is_empty());
        // Where ip and tc exist (they do in CI), loopback's device is lo.
        if info.notes.is_empty() {
            assert_eq!(info.egress_iface.as_deref(), Some("lo"));
            assert!(info.qdiscs.was_read(), "{:?}", info.qdiscs);
        }
    }
}
