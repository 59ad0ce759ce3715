//! Optional TLS on the remoting port (`tls.server.mode`, off by default), as Java's NettyRemotingServer does it:
//! the first byte of a connection tells a TLS ClientHello (a handshake record, 0x16) from a plain frame.
//! `permissive` serves both on the same port, `enforcing` closes plain connections. (A plain frame cannot
//! start with 0x16: its length would be over 350 MB, far past any frame cap.)
//!
//! Unlike Java, rocketns never makes up a self-signed "test mode" certificate: TLS needs
//! `tls.server.certPath` and `tls.server.keyPath`.

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;

use crate::config::NamesrvConfig;

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;
/// A client that opened a TLS connection has this long to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls.server.mode={0} needs tls.server.certPath and tls.server.keyPath")]
    MissingFiles(String),
    #[error("cannot read {what} {path}: {message}")]
    Read { what: &'static str, path: String, message: String },
    #[error("TLS certificate or key rejected: {0}")]
    Rejected(#[from] rustls::Error),
}

/// A new connection, once told apart.
pub enum Accepted {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// Closed: plain in enforcing mode, a failed handshake, or silence.
    Refused,
}

pub struct TlsServer {
    acceptor: TlsAcceptor,
    enforcing: bool,
}

impl TlsServer {
    /// `None` when `tls.server.mode` is `disabled`; the mode itself was checked by the config's validation.
    pub fn from_config(config: &NamesrvConfig) -> Result<Option<Self>, TlsError> {
        let mode = config.tls_server_mode.as_str();
        if mode == "disabled" {
            return Ok(None);
        }
        let (cert_path, key_path) = (&config.tls_server_cert_path, &config.tls_server_key_path);
        if cert_path.is_empty() || key_path.is_empty() {
            return Err(TlsError::MissingFiles(mode.to_string()));
        }
        let read_error = |what, path: &String, message: String| TlsError::Read { what, path: path.clone(), message };
        let certs = CertificateDer::pem_file_iter(cert_path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| read_error("certificate", cert_path, e.to_string()))?;
        if certs.is_empty() {
            return Err(read_error("certificate", cert_path, "no certificate in it".into()));
        }
        let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| read_error("key", key_path, e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        Ok(Some(TlsServer { acceptor: TlsAcceptor::from(Arc::new(server_config)), enforcing: mode == "enforcing" }))
    }

    /// Looks at the first byte (waiting at most `idle_timeout` for it) and does the TLS handshake if it
    /// starts one.
    pub async fn accept(&self, stream: TcpStream, idle_timeout: Duration) -> Accepted {
        let mut first = [0u8; 1];
        match tokio::time::timeout(idle_timeout, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return Accepted::Refused,
        }
        if first[0] != TLS_HANDSHAKE {
            if self.enforcing {
                crate::limits::throttle::client_log!(warn, "plain connection refused: tls.server.mode=enforcing");
                return Accepted::Refused;
            }
            return Accepted::Plain(stream);
        }
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Accepted::Tls(Box::new(tls)),
            Ok(Err(e)) => {
                crate::limits::throttle::client_log!(warn, error = %e, "TLS handshake failed");
                Accepted::Refused
            }
            Err(_) => {
                crate::limits::throttle::client_log!(warn, "TLS handshake timed out");
                Accepted::Refused
            }
        }
    }
}
