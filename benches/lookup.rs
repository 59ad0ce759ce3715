//! The route lookup path: what GET_ROUTEINFO_BY_TOPIC costs once a request is off the socket.
//!
//! - `snapshot_lookup`: snapshot load, one map lookup, a refcount on the shared body;
//! - `get_routeinfo_request`: the real handler behind a decoded JSON request, as the connection calls it,
//!   plus writing the reply head (prefix and header) the way the connection does;
//! - `decode_json_header` / `decode_binary_header`: reading a Java client's request header.
//!
//! The table: 4 brokers (master + slave each) × 1000 topics, like the comparison load of the perf issue.

use std::cell::RefCell;
use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, criterion_group, criterion_main};
use rocketns::NamesrvConfig;
use rocketns::json::JsonStyle;
use rocketns::protocol::{DataVersion, RegisterBrokerBody, TopicConfig};
use rocketns::remoting::{ExtFields, RemotingCommand, SerializeType};
use rocketns::route::{RouteHandle, RouteSnapshot, route_table};
use rocketns::state::ServerState;

const BROKERS: usize = 4;
const TOPICS: usize = 1000;

async fn populated_table() -> RouteHandle {
    let (handle, writer) = route_table(RouteSnapshot::default(), None, 1024);
    tokio::spawn(writer.run());
    let topic_configs: Vec<TopicConfig> =
        (0..TOPICS).map(|i| TopicConfig::new(format!("topic-{i}"), 8, 8, 6)).collect();
    for b in 0..BROKERS {
        for id in 0..2 {
            let body = RegisterBrokerBody {
                data_version: DataVersion { counter: 1, ..Default::default() },
                topic_configs: topic_configs.clone(),
                filter_server_list: Some(vec![]),
                topic_queue_mappings: Vec::new(),
            };
            let r = rocketns::testing::registration(
                "DefaultCluster",
                &format!("broker-{b}"),
                id,
                &format!("10.0.0.{b}:{}", 10911 + id),
                body,
            );
            handle.register(r).await.expect("writer running").expect("registered");
        }
    }
    handle
}

fn lookup(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let handle = rt.block_on(populated_table());
    let kv_dir = tempfile::tempdir().expect("temp dir");
    let kv = rocketns::kvconfig::KvConfigStore::load(&kv_dir.path().join("kvConfig.json")).expect("empty KV store");
    let config = std::sync::Arc::new(arc_swap::ArcSwap::from_pointee(NamesrvConfig::default()));
    let state = ServerState::new(handle.clone(), config, std::sync::Arc::new(kv), None);

    c.bench_function("snapshot_lookup", |b| {
        b.iter(|| {
            let snapshot = handle.snapshot.load();
            black_box(snapshot.route_body(black_box("topic-517"), JsonStyle::Standard))
        })
    });

    // Moved in and out of its cell, since `process` takes the request mutably.
    let request = RefCell::new(Some(RemotingCommand::request(105, ExtFields::from_iter([("topic", "topic-517")]))));
    // Reused like a connection's write buffer.
    let out = RefCell::new(BytesMut::with_capacity(64 * 1024));
    c.bench_function("get_routeinfo_request", |b| {
        b.to_async(&rt).iter(|| async {
            let mut req = request.take().expect("the request is back in its cell");
            let resp = rocketns::processor::dispatch(&state, &mut req, 1).await;
            request.replace(Some(req));
            let mut out = out.borrow_mut();
            out.clear();
            resp.encode_head(SerializeType::Json, &mut out);
            black_box((resp.body.len(), out.len()))
        })
    });
}

/// Decoding a Java client's GET_ROUTEINFO_BY_TOPIC header, in each encoding.
fn decode(c: &mut Criterion) {
    let request = RemotingCommand::request(105, ExtFields::from_iter([("topic", "topic-517")]));
    for (name, ty) in [("decode_json_header", SerializeType::Json), ("decode_binary_header", SerializeType::RocketMq)] {
        let mut frame = BytesMut::new();
        request.encode(ty, &mut frame);
        let header = bytes::Bytes::copy_from_slice(&frame[8..]);
        c.bench_function(name, |b| {
            b.iter(|| match ty {
                SerializeType::Json => rocketns::remoting::decode::decode_json_header(black_box(&header)),
                SerializeType::RocketMq => rocketns::remoting::decode::decode_binary_header(black_box(header.clone())),
            })
        });
    }
}

criterion_group!(benches, lookup, decode);
criterion_main!(benches);
