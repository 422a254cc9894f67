//! The TLS client configuration: the system's trust roots, plus an optional CA file (PEM), and
//! ALPN offering HTTP/2 before HTTP/1.1.
//!
//! What callers can rely on: certificates are verified as a browser would (rustls with webpki,
//! the ring provider); nothing here turns verification off. A lab or a private server is trusted
//! by giving its CA with `ca_file`.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::MeasureError;

/// ALPN protocol ids (RFC 7301; "h2" from RFC 9113 §3.2).
pub(crate) const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Builds the client configuration once per run; every connection shares it.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, MeasureError> {
    let mut roots = RootCertStore::empty();
    // The system's roots; a machine without any (a minimal container) can still test a lab
    // server whose CA is given, so a missing store is not an error here.
    let native = rustls_native_certs::load_native_certs();
    let (_, _) = roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad_ca(path, &e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad_ca(path, &e.to_string()))?;
        if certs.is_empty() {
            return Err(bad_ca(path, "no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| bad_ca(path, &e.to_string()))?;
        }
    }
    if roots.is_empty() {
        return Err(MeasureError::InvalidArgument(
            "no trusted CA: the system has no root certificates and no CA file was given".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| MeasureError::InvalidArgument(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(Arc::new(config))
}

fn bad_ca(path: &Path, why: &str) -> MeasureError {
    MeasureError::InvalidArgument(format!("CA file {}: {why}", path.display()))
}
