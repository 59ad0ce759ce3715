//! Access control over the wire: with `aclEnable`, writes need the RocketMQ ACL signature that Java's
//! `AclClientRPCHook` sends; reads stay open unless `aclProtectReads`; unknown codes fail closed.

mod common;

use bytes::Bytes;
use common::*;
use rocketns::NamesrvConfig;
use rocketns::processor::acl::{ACCESS_KEY, SIGNATURE, signature};
use rocketns::remoting::{RemotingCommand, SerializeType};

const BROKER_KEY: &str = "broker-ak";
const BROKER_SECRET: &str = "broker-secret-12345";

fn acl_config(protect_reads: bool) -> NamesrvConfig {
    let config = test_config();
    let creds = config_dir(&config).join("acl.properties");
    std::fs::write(&creds, format!("# accessKey=secretKey\n{BROKER_KEY}={BROKER_SECRET}\nadmin-ak=admin-secret\n"))
        .expect("write credentials");
    NamesrvConfig {
        acl_enable: true,
        acl_credentials_path: creds.display().to_string(),
        acl_protect_reads: protect_reads,
        ..config
    }
}

/// Signs as `AclClientRPCHook` does: AccessKey goes in first, then the signature over everything.
fn signed(mut cmd: RemotingCommand, access_key: &str, secret: &str) -> RemotingCommand {
    let ext = cmd.ext_fields.get_or_insert_with(Default::default);
    ext.insert(ACCESS_KEY, access_key);
    let sig = signature(secret, ext, &cmd.body);
    cmd.ext_fields.as_mut().expect("ext fields").insert(SIGNATURE, sig);
    cmd
}

fn broker() -> Broker<'static> {
    Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911")
}

fn assert_denied(resp: &RemotingCommand, remark_part: &str) {
    assert_eq!(resp.code, 16, "NO_PERMISSION expected: {:?}", resp.remark);
    let remark = resp.remark.as_deref().unwrap_or_default();
    assert!(remark.contains(remark_part), "remark {remark:?} lacks {remark_part:?}");
}

#[tokio::test]
async fn writes_need_a_valid_signature() {
    let server = start_with(acl_config(false)).await;
    let mut c = Client::connect(server.addr).await;
    let reg = || register_request(&broker(), dv(1), &[("T", 8, 6), ("U", 8, 6)]);

    assert_denied(&c.request(reg()).await, "needs an ACL signature");
    assert_denied(&c.request(signed(reg(), BROKER_KEY, "wrong-secret")).await, "signature check failed");
    assert_denied(&c.request(signed(reg(), "nobody", BROKER_SECRET)).await, "no ACL credentials for AccessKey nobody");
    // The body is signed too: a registration whose body was changed after signing is refused.
    let mut tampered = signed(reg(), BROKER_KEY, BROKER_SECRET);
    tampered.body = Bytes::from(register_body(dv(1), &[("Evil", 8, 6)]));
    assert_denied(&c.request(tampered).await, "signature check failed");
    // A signature that is not Base64 at all.
    let mut garbage = signed(reg(), BROKER_KEY, BROKER_SECRET);
    garbage.ext_fields.as_mut().expect("ext").insert(SIGNATURE, "%%%");
    assert_denied(&c.request(garbage).await, "signature check failed");
    assert!(route(&mut c, "T").await.is_none(), "nothing refused may reach the route table");
    assert!(route(&mut c, "Evil").await.is_none());

    let resp = c.request(signed(reg(), BROKER_KEY, BROKER_SECRET)).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert!(route(&mut c, "T").await.is_some(), "unsigned route reads stay open");

    // Every broker and admin write is protected; none of them changes anything unsigned.
    let addr = "127.0.0.1:10911";
    for cmd in [
        unregister_request(&broker()),
        request(205, &[("brokerName", "broker-a")]),
        request(327, &[("brokerName", "broker-a")]),
        request(216, &[("topic", "T")]),
        kv_put("ns", "k", "v"),
        kv_delete("ns", "k"),
        update_config("orderMessageEnable=true"),
        request(
            322,
            &[("brokerAddr", addr), ("brokerName", "broker-a"), ("brokerId", "0"), ("clusterName", "DefaultCluster")],
        ),
        request(904, &[("brokerAddr", addr), ("brokerName", "broker-a"), ("clusterName", "DefaultCluster")]),
        request(217, &[("topic", "T2")]),
    ] {
        let code = cmd.code;
        let resp = c.request(cmd).await;
        assert_denied(&resp, &format!("request code {code} needs"));
    }
    let r = route(&mut c, "T").await.expect("still routed");
    assert_eq!(queue_perm(&r, "broker-a"), 6, "write permission untouched");
    assert_eq!(c.request(kv_get("ns", "k")).await.code, 22, "no KV written");

    // Signed by any configured account, they work; a binary-header request is checked the same way.
    let put = signed(kv_put("ns", "k", "v"), "admin-ak", "admin-secret");
    c.send(put, SerializeType::RocketMq).await;
    assert_eq!(c.read_response().await.expect("reply").code, 0);
    let resp = c.request(kv_get("ns", "k")).await;
    assert_eq!(resp.ext("value"), Some("v"));
    let resp = c.request(signed(request(205, &[("brokerName", "broker-a")]), "admin-ak", "admin-secret")).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(queue_perm(&route(&mut c, "T").await.expect("routed"), "broker-a"), 4);
}

#[tokio::test]
async fn unknown_codes_fail_closed() {
    let server = start_with(acl_config(false)).await;
    let mut c = Client::connect(server.addr).await;
    assert_denied(&c.request(request(99999, &[])).await, "request code 99999 needs");
    let resp = c.request(signed(request(99999, &[]), BROKER_KEY, BROKER_SECRET)).await;
    assert_eq!(resp.code, 3, "signed, an unknown code gets Java's REQUEST_CODE_NOT_SUPPORTED");
}

/// Access control cannot be switched off remotely, not even by a signed config update.
#[tokio::test]
async fn a_config_update_cannot_turn_it_off() {
    let server = start_with(acl_config(false)).await;
    let mut c = Client::connect(server.addr).await;
    for text in ["aclEnable=false", "aclCredentialsPath=/tmp/other", "aclProtectReads=true"] {
        let resp = c.request(signed(update_config(text), BROKER_KEY, BROKER_SECRET)).await;
        assert_eq!(resp.code, 16, "{text}: {:?}", resp.remark);
    }
    assert_denied(&c.request(kv_put("n", "k", "v")).await, "needs");
    assert_eq!(c.request(route_request("T", 479)).await.code, 17, "reads still open");
}

#[tokio::test]
async fn protected_reads() {
    let server = start_with(acl_config(true)).await;
    let mut c = Client::connect(server.addr).await;
    assert_denied(&c.request(route_request("T", 479)).await, "request code 105 needs");
    assert_denied(&c.request(request(106, &[])).await, "request code 106 needs");
    let resp = c.request(signed(route_request("T", 479), BROKER_KEY, BROKER_SECRET)).await;
    assert_eq!(resp.code, 17, "signed, the read is answered: {:?}", resp.remark);
}

#[tokio::test]
async fn off_by_default() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker(), dv(1), &[("T", 8, 6), ("U", 8, 6)]).await;
    // A signature nobody can check is ignored, as by the Java NameServer.
    let resp = c.request(signed(kv_put("n", "k", "v"), "x", "y")).await;
    assert_eq!(resp.code, 0);
}

#[tokio::test]
async fn enabling_without_credentials_fails_start_up() {
    let mut config = acl_config(false);
    config.acl_credentials_path = String::new();
    let err = rocketns::NameServer::bind(config, None).await.err().expect("must not start");
    assert!(err.to_string().contains("aclCredentialsPath"), "{err}");

    let mut config = acl_config(false);
    config.acl_credentials_path.push_str(".missing");
    let err = rocketns::NameServer::bind(config, None).await.err().expect("must not start");
    assert!(err.to_string().contains("cannot read ACL credentials"), "{err}");
}
