//! TLS on the remoting port: `permissive` serves TLS and plain clients on one port (told apart by the first
//! byte, as Java does), `enforcing` closes plain connections, and a broken handshake closes only its own
//! connection. The certificate is made fresh for each test with rcgen.

mod common;

use std::sync::Arc;

use common::*;
use rocketns::NamesrvConfig;
use rocketns::remoting::SerializeType;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

struct Tls {
    config: NamesrvConfig,
    cert: CertificateDer<'static>,
}

fn tls_config(mode: &str) -> Tls {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let config = test_config();
    let dir = config_dir(&config);
    let (cert_path, key_path) = (dir.join("server.crt"), dir.join("server.key"));
    std::fs::write(&cert_path, key.cert.pem()).expect("write cert");
    std::fs::write(&key_path, key.signing_key.serialize_pem()).expect("write key");
    let config = NamesrvConfig {
        tls_server_mode: mode.into(),
        tls_server_cert_path: cert_path.display().to_string(),
        tls_server_key_path: key_path.display().to_string(),
        ..config
    };
    Tls { config, cert: key.cert.der().clone() }
}

async fn tls_connect(server: &TestServer, cert: &CertificateDer<'static>) -> Client<TlsStream<TcpStream>> {
    let mut roots = RootCertStore::empty();
    roots.add(cert.clone()).expect("trust the test certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS handshake");
    Client::over(tls)
}

fn broker() -> Broker<'static> {
    Broker::new("DefaultCluster", "broker-tls", 0, "127.0.0.1:10911")
}

#[tokio::test]
async fn permissive_serves_tls_and_plain_on_one_port() {
    let tls = tls_config("permissive");
    let server = start_with(tls.config.clone()).await;
    let mut secure = tls_connect(&server, &tls.cert).await;
    let resp = secure.request(register_request(&broker(), dv(1), &[("T", 8, 6), ("U", 8, 6)])).await;
    assert_eq!(resp.code, 0, "registered over TLS");

    let mut plain = Client::connect(server.addr).await;
    let r = route(&mut plain, "T").await.expect("a plain client sees the route registered over TLS");
    assert_eq!(broker_addrs(&r, "broker-tls"), vec![(0, "127.0.0.1:10911".to_string())]);
    let resp = secure.request(route_request("T", 479)).await;
    assert_eq!(resp.code, 0);

    // The broker's TLS connection closing removes it, as for a plain one.
    drop(secure);
    wait_route_gone(&mut plain, "T").await;
}

#[tokio::test]
async fn enforcing_closes_plain_connections() {
    let tls = tls_config("enforcing");
    let server = start_with(tls.config.clone()).await;
    let mut plain = Client::connect(server.addr).await;
    plain.send(route_request("T", 479), SerializeType::Json).await;
    assert!(plain.read_frame_bytes().await.is_none(), "plain connection must be closed");

    let mut secure = tls_connect(&server, &tls.cert).await;
    let resp = secure.request(route_request("T", 479)).await;
    assert_eq!(resp.code, 17);
}

#[tokio::test]
async fn a_broken_handshake_closes_only_its_connection() {
    let tls = tls_config("permissive");
    let server = start_with(tls.config.clone()).await;
    let mut secure = tls_connect(&server, &tls.cert).await;
    assert_eq!(secure.request(route_request("T", 479)).await.code, 17);

    // A handshake record header followed by garbage.
    let mut bad = TcpStream::connect(server.addr).await.expect("connect");
    bad.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).await.expect("write");
    let mut sink = Vec::new();
    let _ = bad.read_to_end(&mut sink).await;
    // Only a TLS alert may come back, never a remoting frame; and the connection is closed.
    assert!(sink.is_empty() || sink[0] == 0x15, "unexpected bytes {sink:?}");

    assert_eq!(secure.request(route_request("T", 479)).await.code, 17, "still served");
    let mut plain = Client::connect(server.addr).await;
    assert!(route(&mut plain, "T").await.is_none());
}

#[tokio::test]
async fn disabled_by_default_and_checked_at_start_up() {
    // By default a ClientHello is just an oversized frame: the connection is closed, others are served.
    let server = start().await;
    let mut hello = TcpStream::connect(server.addr).await.expect("connect");
    hello.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.expect("write");
    let mut sink = Vec::new();
    let _ = hello.read_to_end(&mut sink).await;
    assert!(sink.is_empty());
    let mut plain = Client::connect(server.addr).await;
    assert!(route(&mut plain, "T").await.is_none());

    let mut config = tls_config("enforcing").config;
    config.tls_server_key_path = String::new();
    let err = rocketns::NameServer::bind(config, None).await.err().expect("must not start");
    assert!(err.to_string().contains("tls.server.keyPath"), "{err}");

    let mut config = tls_config("permissive").config;
    config.tls_server_cert_path = config.tls_server_key_path.clone();
    let err = rocketns::NameServer::bind(config, None).await.err().expect("a key is no certificate");
    assert!(err.to_string().contains("certificate"), "{err}");

    let mut config = test_config();
    assert!(config.apply_properties("tls.server.mode=sometimes\n", "test").is_ok());
    assert!(config.validate().is_err(), "an unknown mode is refused");
}
