//! A validated `http://` or `https://` URL: scheme, host, port and path, nothing else.
//!
//! What callers can rely on: a [`Url`] always has a scheme of `http` or `https`, a host and a
//! port (the scheme's default when none was written), no user name, and a path that starts with
//! `/`. [`Url::same_origin`] is the one check that keeps load on the host the user named.

use std::fmt;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// An absolute http(s) URL, checked (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Url {
    scheme: Scheme,
    /// Lower case; an IPv6 literal without its brackets.
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    path: String,
}

impl Url {
    /// Parses an absolute URL; anything but http(s) with a host is refused, saying why.
    pub fn parse(text: &str) -> Result<Url, String> {
        let uri: http::Uri = text
            .trim()
            .parse()
            .map_err(|e| format!("{:?} is not a URL: {e}", crate::protocol::printable(text)))?;
        let scheme = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            Some(other) => return Err(format!("{text:?}: scheme {other:?} is not http or https")),
            None => return Err(format!("{text:?} is not an absolute http(s) URL")),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{text:?} has no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!("{text:?}: user names in URLs are not supported"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() {
            return Err(format!("{text:?} has no host"));
        }
        let port = uri.port_u16().unwrap_or(scheme.default_port());
        let path = match uri.path_and_query() {
            Some(pq) if pq.as_str().starts_with('/') => pq.as_str().to_string(),
            _ => "/".to_string(),
        };
        Ok(Url {
            scheme,
            host,
            port,
            path,
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Path and query, starting with `/`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `host:port` as a Host header or `:authority` writes it (IPv6 in brackets, the port left
    /// out when it is the scheme's default).
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The same host and port (the scheme may differ only if the port is the same, which no
    /// sane server does; the port decides where the bytes go).
    pub fn same_origin(&self, other: &Url) -> bool {
        self.host == other.host && self.port == other.port
    }

    /// Where a redirect's `Location` points, resolved against this URL: absolute URLs and
    /// absolute paths; anything else is refused.
    pub fn join(&self, location: &str) -> Result<Url, String> {
        if location.starts_with("//") {
            return Url::parse(&format!("{}:{location}", self.scheme.as_str()));
        }
        if location.starts_with('/') {
            let mut next = self.clone();
            next.path = location.to_string();
            return Ok(next);
        }
        Url::parse(location)
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.path
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_servers_write() {
        let u = Url::parse("https://Example.net:4043/large?x=1").unwrap();
        assert_eq!(u.scheme(), Scheme::Https);
        assert_eq!(
            (u.host(), u.port(), u.path()),
            ("example.net", 4043, "/large?x=1")
        );
        assert_eq!(u.to_string(), "https://example.net:4043/large?x=1");
        let u = Url::parse("http://[::1]/").unwrap();
        assert_eq!(
            (u.host(), u.port(), u.authority()),
            ("::1", 80, "[::1]".into())
        );
        assert_eq!(Url::parse("https://h").unwrap().path(), "/");
    }

    #[test]
    fn refuses_what_is_not_http() {
        for bad in [
            "ftp://h/x",
            "/relative",
            "https://user@h/",
            "",
            "h:80",
            "https://",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn origin_is_host_and_port() {
        let a = Url::parse("https://h:4043/a").unwrap();
        assert!(a.same_origin(&Url::parse("https://H:4043/b").unwrap()));
        assert!(!a.same_origin(&Url::parse("https://h/b").unwrap()));
        assert!(!a.same_origin(&Url::parse("https://evil:4043/b").unwrap()));
        assert_eq!(a.join("/x").unwrap().to_string(), "https://h:4043/x");
        assert_eq!(a.join("//evil/x").unwrap().host(), "evil");
        assert!(a.join("relative").is_err());
    }
}
