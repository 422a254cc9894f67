//! Which `Host` the page and the metrics answer to: an IP address, `localhost`, or a name the
//! user allowed (`--web-host NAME`). Anything else gets 421 before any route runs.
//!
//! Why: the token guards changes, but reads need none, and a page on 127.0.0.1 is readable by
//! any web site through DNS rebinding: the attacker's name first resolves to their server, then
//! to 127.0.0.1, and the browser, which judges by name, lets their script read our answers. The
//! browser still sends the attacker's name as `Host`, which is what this refuses. A request
//! without `Host` (HTTP/1.0, a test) did not come from a browser and is let through.

use std::net::IpAddr;

use super::error;
use crate::http::{Request, Response};

/// 421 when `Host` names anything but an address, `localhost` or one of `extra`.
pub(super) fn refusal(req: &Request, extra: &[String]) -> Option<Response> {
    foreign(req, extra).map(|why| error(421, why))
}

/// Why a request's `Host` is refused (issue 53: `/metrics` too, which a page the admin visits
/// could otherwise read through DNS rebinding), or None.
pub(crate) fn foreign(req: &Request, extra: &[String]) -> Option<String> {
    let host = req.header("host")?;
    if allowed(host, extra) {
        return None;
    }
    Some(format!(
        "this server answers to its IP address and localhost, not {host:?}; to reach it by \
         that name, start the daemon with --web-host {}",
        name(host)
    ))
}

/// `Host` without its port (`[::1]:8723` is `::1`).
fn name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

fn allowed(host: &str, extra: &[String]) -> bool {
    let n = name(host).trim_end_matches('.');
    n.parse::<IpAddr>().is_ok()
        || n.eq_ignore_ascii_case("localhost")
        || extra.iter().any(|e| e.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_localhost_pass_and_other_names_only_when_allowed() {
        let none: &[String] = &[];
        for ok in [
            "127.0.0.1:8723",
            "[::1]:8723",
            "localhost:8723",
            "LOCALHOST",
            "10.0.0.1",
        ] {
            assert!(allowed(ok, none), "{ok}");
        }
        for bad in [
            "evil.example:8723",
            "127.0.0.1.evil.example",
            "localhost.evil",
            "",
        ] {
            assert!(!allowed(bad, none), "{bad}");
        }
        let router = ["router.lan".to_string()];
        assert!(allowed("Router.LAN:8723", &router));
        assert!(allowed("router.lan.", &router));
        assert!(!allowed("evil.example", &router));
    }
}
