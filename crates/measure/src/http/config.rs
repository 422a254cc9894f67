//! The networkQuality configuration (`/.well-known/nq`): which URLs to load and probe.
//!
//! The format is networkQuality's, as Apple's servers and goserver (`networkqualityd`) write it:
//! `{"version": 1, "urls": {"small_https_download_url": ..., "large_https_download_url": ...,
//! "https_upload_url": ...}, "test_endpoint": ...}`; goserver also writes the same URLs under
//! `small_download_url`, `large_download_url` and `upload_url`, which are read when the https
//! spellings are missing.
//!
//! What callers can rely on: every URL of a [`HttpTarget`] is http(s) on the host and port the
//! user named. A config (or a redirect on the way to it) that names another host is refused,
//! so the load goes only where the user pointed it. `test_endpoint` (a host to connect to
//! instead) is ignored for the same reason.

use serde::Deserialize;

use super::conn::{location, read_bounded, Dialer, ReqBody};
use super::target::{resolve, runtime, HttpOptions, HttpTarget};
use super::tls;
use super::url::Url;
use crate::MeasureError;

/// The most a config may weigh (real ones are ~500 bytes).
const MAX_CONFIG_BYTES: usize = 64 * 1024;
/// Redirects followed on the way to the config, all on the same host and port.
const MAX_REDIRECTS: usize = 3;

#[derive(Debug, Deserialize)]
struct NqConfig {
    version: Option<u32>,
    urls: NqUrls,
}

#[derive(Debug, Deserialize)]
struct NqUrls {
    small_https_download_url: Option<String>,
    large_https_download_url: Option<String>,
    https_upload_url: Option<String>,
    small_download_url: Option<String>,
    large_download_url: Option<String>,
    upload_url: Option<String>,
}

/// Reads a config document fetched from `from`.
pub fn parse_config(from: &Url, json: &[u8]) -> Result<HttpTarget, String> {
    let config: NqConfig =
        serde_json::from_slice(json).map_err(|e| format!("its config is not valid JSON: {e}"))?;
    if let Some(v) = config.version.filter(|&v| v != 1) {
        return Err(format!(
            "its config has version {v}; unbloat reads version 1"
        ));
    }
    let u = config.urls;
    let pick = |a: Option<String>, b: Option<String>, key: &str| {
        a.or(b)
            .ok_or_else(|| format!("its config has no {key} in \"urls\""))
    };
    let small = pick(
        u.small_https_download_url,
        u.small_download_url,
        "small_https_download_url",
    )?;
    let large = pick(
        u.large_https_download_url,
        u.large_download_url,
        "large_https_download_url",
    )?;
    let upload = pick(u.https_upload_url, u.upload_url, "https_upload_url")?;
    let target = HttpTarget::from_urls(&small, &large, &upload).map_err(|e| e.to_string())?;
    if !target.small.same_origin(from) {
        return Err(format!(
            "its config points to another host ({}); unbloat loads only the host you named \
             ({}:{})",
            target.small.authority(),
            from.host(),
            from.port()
        ));
    }
    Ok(target)
}

/// Fetches and reads the config at `config_url` (see the module doc).
pub fn discover(config_url: &str, opts: &HttpOptions) -> Result<HttpTarget, MeasureError> {
    let named = Url::parse(config_url).map_err(MeasureError::InvalidArgument)?;
    let addr = resolve(&named)?;
    let tls = match named.scheme() {
        super::url::Scheme::Https => Some(tls::client_config(opts.ca_file.as_deref())?),
        super::url::Scheme::Http => None,
    };
    let dialer = Dialer::new(
        &named,
        addr,
        tls,
        opts.connect_timeout,
        opts.request_timeout,
    )?;
    let rt = runtime()?;
    let mut url = named.clone();
    for _ in 0..=MAX_REDIRECTS {
        let fetched = rt.block_on(fetch(&dialer, &url))?;
        match fetched {
            Fetched::Body(json) => {
                return parse_config(&named, &json)
                    .map_err(|why| MeasureError::far_end(&dialer.server, why))
            }
            Fetched::Redirect(to) => {
                let next = url
                    .join(&to)
                    .map_err(|e| MeasureError::far_end(&dialer.server, e))?;
                if !next.same_origin(&named) {
                    return Err(MeasureError::far_end(
                        &dialer.server,
                        format!(
                            "{} redirects to another host ({next}); unbloat follows no \
                             redirect away from the host you named",
                            url.path()
                        ),
                    ));
                }
                url = next;
            }
        }
    }
    Err(MeasureError::far_end(
        &dialer.server,
        format!("more than {MAX_REDIRECTS} redirects on the way to its config"),
    ))
}

enum Fetched {
    Body(bytes::Bytes),
    Redirect(String),
}

async fn fetch(dialer: &Dialer, url: &Url) -> Result<Fetched, MeasureError> {
    let mut conn = dialer.connect(0).await?;
    let get = conn.sender.send(http::Method::GET, url, ReqBody::Empty);
    let resp = match tokio::time::timeout(dialer.request_timeout, get).await {
        Err(_) => return Err(dialer.stalled("the answer to GET of its config")),
        Ok(Err(e)) => {
            let why = format!("GET {}: {}", url.path(), super::conn::describe(&e));
            return Err(MeasureError::far_end(&dialer.server, why));
        }
        Ok(Ok(r)) => r,
    };
    if resp.status().is_redirection() {
        let to = location(&resp).ok_or_else(|| {
            MeasureError::far_end(&dialer.server, "a redirect without a Location")
        })?;
        return Ok(Fetched::Redirect(to));
    }
    dialer.check("GET", url, &resp)?;
    let body = read_bounded(resp.into_body(), MAX_CONFIG_BYTES);
    match tokio::time::timeout(dialer.request_timeout, body).await {
        Err(_) => Err(dialer.stalled("its config's body")),
        Ok(Err(why)) => Err(MeasureError::far_end(
            &dialer.server,
            format!("config: {why}"),
        )),
        Ok(Ok(b)) => Ok(Fetched::Body(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named() -> Url {
        Url::parse("https://nq.example:4043/.well-known/nq").unwrap()
    }

    #[test]
    fn reads_networkquality_and_goserver_spellings() {
        let apple = br#"{"version":1,"urls":{
            "small_https_download_url":"https://nq.example:4043/small",
            "large_https_download_url":"https://nq.example:4043/large",
            "https_upload_url":"https://nq.example:4043/slurp"},
            "test_endpoint":"elsewhere.example"}"#;
        let t = parse_config(&named(), apple).unwrap();
        assert_eq!(t.large.path(), "/large");
        let goserver = br#"{"version":1,"urls":{
            "small_download_url":"https://nq.example:4043/small",
            "large_download_url":"https://nq.example:4043/large",
            "upload_url":"https://nq.example:4043/slurp"}}"#;
        assert_eq!(
            parse_config(&named(), goserver).unwrap().upload.path(),
            "/slurp"
        );
    }

    #[test]
    fn refuses_other_hosts_garbage_and_gaps() {
        let elsewhere = br#"{"version":1,"urls":{
            "small_https_download_url":"https://victim.example/small",
            "large_https_download_url":"https://victim.example/large",
            "https_upload_url":"https://victim.example/slurp"}}"#;
        let err = parse_config(&named(), elsewhere).unwrap_err();
        assert!(err.contains("another host"), "{err}");
        let mixed = br#"{"urls":{
            "small_https_download_url":"https://nq.example:4043/small",
            "large_https_download_url":"https://victim.example/large",
            "https_upload_url":"https://nq.example:4043/slurp"}}"#;
        assert!(parse_config(&named(), mixed).is_err());
        assert!(parse_config(&named(), b"<html>")
            .unwrap_err()
            .contains("JSON"));
        assert!(parse_config(&named(), br#"{"urls":{}}"#)
            .unwrap_err()
            .contains("small"));
        let ftp = br#"{"urls":{"small_download_url":"ftp://nq.example:4043/s",
            "large_download_url":"ftp://nq.example:4043/l","upload_url":"ftp://nq.example:4043/u"}}"#;
        assert!(parse_config(&named(), ftp).is_err());
    }
}
