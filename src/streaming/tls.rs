//! TLS for the streaming server, from certificate and key files the operator provides, and
//! for clients of it.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::crypto::{aws_lc_rs, CryptoProvider};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn invalid(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(aws_lc_rs::default_provider())
}

/// The PEM certificates in `path`; a file without any is an error.
pub fn read_certificates(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(path, e))?;
    if certs.is_empty() {
        return Err(invalid(path, "no certificate in the file"));
    }
    Ok(certs)
}

/// An acceptor for the PEM certificate chain in `cert` and the private key in `key`.
pub fn acceptor(cert: &Path, key: &Path) -> io::Result<TlsAcceptor> {
    let chain = read_certificates(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| invalid(key, e))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(cert, e))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| invalid(cert, format!("certificate and key do not go together: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A client connector that trusts `roots`, with the server's crypto and protocol versions.
pub fn connector(roots: RootCertStore) -> io::Result<TlsConnector> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}
