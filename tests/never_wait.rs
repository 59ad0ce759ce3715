//! Route lookups never wait for the route writer, in time as well as in data: while a registration of
//! 100,000 topics is decoded, applied and encoded, lookups on another connection are answered as usual.
//!
//! The server runs in this test's current-thread runtime, so any of the registration's work done on a runtime
//! thread (decoding the body in the handler itself, or applying the batch in the writer task itself) would
//! hold every lookup until the registration is done, and this test fails. With `aclEnable` too, where the
//! registration's signature is an HMAC over its 15 MB body.

mod common;

use std::time::Duration;

use common::*;
use rocketns::remoting::SerializeType;
use tokio::time::Instant;

const BIG_TOPICS: usize = 100_000;

#[tokio::test]
async fn lookups_are_answered_while_a_large_registration_is_applied() {
    lookups_go_on_during_a_large_registration(test_config(), None).await;
}

/// The same, the registration signed (`aclEnable`): its HMAC over 15 MB is computed off the runtime's
/// threads too (with it computed in the handler, the slowest lookup waited for all of it).
#[tokio::test]
async fn lookups_are_answered_while_a_large_signed_registration_is_checked() {
    let config = test_config();
    let credentials = config_dir(&config).join("acl.properties");
    std::fs::write(&credentials, "ak=sk\n").unwrap();
    let config =
        rocketns::NamesrvConfig { acl_enable: true, acl_credentials_path: credentials.display().to_string(), ..config };
    lookups_go_on_during_a_large_registration(config, Some(("ak", "sk"))).await;
}

/// Signs `cmd` as a Java client with these credentials does.
fn sign(cmd: &mut rocketns::remoting::RemotingCommand, (access_key, secret): (&str, &str)) {
    let fields = cmd.ext_fields.get_or_insert_with(Default::default);
    fields.insert(rocketns::processor::acl::ACCESS_KEY, access_key);
    let signature = rocketns::processor::acl::signature(secret, fields, &cmd.body);
    cmd.ext_fields.as_mut().unwrap().insert(rocketns::processor::acl::SIGNATURE, signature);
}

async fn lookups_go_on_during_a_large_registration(config: rocketns::NamesrvConfig, signer: Option<(&str, &str)>) {
    let server = start_with(config).await;
    let mut client = Client::connect(server.addr).await;
    let mut small =
        register_request(&Broker::new("c", "small", 0, "10.0.0.1:10911"), dv(1), &[("TopicA", 8, 6), ("TopicB", 8, 6)]);
    if let Some(signer) = signer {
        sign(&mut small, signer);
    }
    assert_eq!(client.request(small).await.code, 0);

    let names: Vec<String> = (0..BIG_TOPICS).map(|i| format!("big-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 6)).collect();
    let mut big = register_request(&Broker::new("c", "big", 0, "10.0.0.2:10911"), dv(1), &topics);
    if let Some(signer) = signer {
        sign(&mut big, signer);
    }
    let mut frame = bytes::BytesMut::new();
    big.encode(SerializeType::Json, &mut frame);
    let mut broker = Client::connect(server.addr).await;

    let started = Instant::now();
    let registration = tokio::spawn(async move {
        broker.send_raw(&frame).await;
        let reply = broker.read_response().await.expect("a reply to the registration");
        assert_eq!(reply.code, 0, "{:?}", reply.remark);
        started.elapsed()
    });
    let (mut answered, mut slowest) = (0u32, Duration::ZERO);
    while !registration.is_finished() {
        let asked = Instant::now();
        assert_eq!(client.request(route_request("TopicA", 479)).await.code, 0);
        slowest = slowest.max(asked.elapsed());
        answered += 1;
    }
    let took = registration.await.expect("registration task");
    eprintln!("{answered} lookups answered during a registration of {took:?}, the slowest in {slowest:?}");
    assert!(route(&mut client, "big-99999").await.is_some(), "the registration is visible once acknowledged");
    // Every lookup answered while the writer worked, none held for a noticeable part of its work.
    assert!(answered >= 20, "only {answered} lookups answered during a registration of {took:?}");
    assert!(
        slowest < took / 10,
        "a lookup waited {slowest:?} during a registration of {took:?} ({answered} lookups answered)"
    );
}
