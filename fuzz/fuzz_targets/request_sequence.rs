//! Whole request sequences through the real dispatcher, on a fresh route table each time: the input is cut
//! into frames (a leading byte picks the connection each arrives on; 0xFF closes one), every request is
//! processed, and the resulting snapshot must hold together: every topic has queues, every queue's broker
//! exists, every route names only brokers of its queues, and every pre-encoded body is valid JSON; every
//! reply written is a well-formed response frame.
#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rocketns::NamesrvConfig;
use rocketns::protocol::json::JsonStyle;
use rocketns::remoting::{FrameDecoder, OutQueue, SerializeType, decode_command};
use rocketns::route::{RouteMutation, RouteSnapshot, route_table};
use rocketns::state::ServerState;
use rocketns::store::kvconfig::KvConfigStore;
use tokio_util::codec::Decoder;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime"))
}

fn check(snapshot: &RouteSnapshot) {
    for (topic, route) in snapshot.topics.iter() {
        assert!(!route.queue_datas.is_empty(), "{topic} kept without queues");
        for q in route.queue_datas.iter() {
            assert!(
                snapshot.brokers.contains_key(&q.broker_name),
                "{topic}: queue of unknown broker {}",
                q.broker_name
            );
        }
        let Some(standard) = snapshot.route_body(topic, JsonStyle::Standard) else { continue };
        let v: serde_json::Value = serde_json::from_slice(&standard.to_vec()).expect("standard body parses");
        for b in v["brokerDatas"].as_array().expect("brokerDatas") {
            let name = b["brokerName"].as_str().expect("name");
            assert!(route.queue_datas.iter().any(|q| &*q.broker_name == name), "{topic}: stray broker {name}");
        }
        let legacy = snapshot.route_body(topic, JsonStyle::Fastjson).expect("both styles").to_vec();
        let legacy = rocketns::protocol::lenient::quote_bare_keys(&legacy).unwrap_or(legacy);
        serde_json::from_slice::<serde_json::Value>(&legacy).expect("fastjson body parses");
    }
}

fuzz_target!(|data: &[u8]| {
    runtime().block_on(async {
        let dir = std::env::temp_dir().join(format!("rocketns-fuzz-{}", std::process::id()));
        let kv = Arc::new(KvConfigStore::load(&dir.join("kv.json")).expect("kv"));
        let (routes, writer) = route_table(RouteSnapshot::default(), None, 64);
        let writer = tokio::spawn(writer.run());
        let config = Arc::new(arc_swap::ArcSwap::from_pointee(NamesrvConfig::default()));
        let state = ServerState::new(routes.clone(), config, kv, None);
        let mut out = OutQueue::new(SerializeType::Json);
        let mut rest = data;
        while let Some((&conn, tail)) = rest.split_first() {
            if conn == 0xFF {
                let _ = routes
                    .submit(RouteMutation::ConnectionClosed(u64::from(tail.first().copied().unwrap_or(0) % 4)))
                    .await;
                rest = tail.get(1..).unwrap_or(&[]);
                continue;
            }
            let mut buf = BytesMut::from(tail);
            let Ok(Some(frame)) = FrameDecoder::new(1 << 20).decode(&mut buf) else { break };
            rest = &tail[tail.len() - buf.len()..];
            if let Ok(mut cmd) = decode_command(frame) {
                let _ = rocketns::processor::dispatch(
                    &state,
                    &mut cmd,
                    rocketns::processor::Caller { conn: u64::from(conn % 4), addr: None },
                    &mut out,
                    Default::default(),
                )
                .await;
            }
        }
        // Every reply written is a well-formed response frame.
        let mut written = Vec::new();
        out.flush(&mut written).await.expect("a Vec takes every byte");
        let mut replies = BytesMut::from(&written[..]);
        while !replies.is_empty() {
            let frame = FrameDecoder::new(usize::MAX).decode(&mut replies).expect("a reply frame").expect("whole");
            assert!(decode_command(frame).expect("a reply header").is_response());
        }
        // Let queued unregistrations land, then look.
        let _ = routes.apply(|done| RouteMutation::DeleteTopic { topic: String::new(), cluster: None, done }).await;
        check(&routes.load());
        writer.abort();
    });
});
