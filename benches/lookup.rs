//! The route lookup path: what GET_ROUTEINFO_BY_TOPIC costs once a request is off the socket.
//!
//! - `snapshot_lookup`: snapshot load, one map lookup, a refcount on the shared body;
//! - `get_routeinfo_request`: the real handler behind a decoded JSON request, as the connection calls it,
//!   plus writing the reply head (prefix and header) the way the connection does;
//! - `decode_header/*`: reading each client family's request header.
//!
//! The table: 4 brokers (master + slave each) × 1000 topics, like the comparison load of the perf issue.

use std::cell::RefCell;
use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, criterion_group, criterion_main};
use rocketns::NamesrvConfig;
use rocketns::protocol::json::JsonStyle;
use rocketns::protocol::{DataVersion, RegisterBrokerBody, TopicConfig};
use rocketns::remoting::{ExtFields, FrameDecoder, OutQueue, RemotingCommand, SerializeType, decode_command};
use rocketns::route::{RouteHandle, RouteSnapshot, route_table};
use rocketns::state::ServerState;
use rocketns::testing::client_headers::ClientHeader;
use tokio_util::codec::Decoder;

/// The server's allocator, so that what a decode allocates costs what it costs in the server.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let kv =
        rocketns::store::kvconfig::KvConfigStore::load(&kv_dir.path().join("kvConfig.json")).expect("empty KV store");
    let config = std::sync::Arc::new(arc_swap::ArcSwap::from_pointee(NamesrvConfig::default()));
    let state = ServerState::new(handle.clone(), config, std::sync::Arc::new(kv), None);

    c.bench_function("snapshot_lookup", |b| {
        b.iter(|| {
            let snapshot = handle.load();
            black_box(snapshot.route_body(black_box("topic-517"), JsonStyle::Standard).map(|body| body.own.len()))
        })
    });

    // Moved in and out of its cell, since `process` takes the request mutably.
    let request = RefCell::new(Some(RemotingCommand::request(105, ExtFields::from_iter([("topic", "topic-517")]))));
    // Reused like a connection's reply queue; written to nowhere.
    let out = RefCell::new(Some(OutQueue::new(SerializeType::Json)));
    c.bench_function("get_routeinfo_request", |b| {
        b.to_async(&rt).iter(|| async {
            let mut req = request.take().expect("the request is back in its cell");
            let mut queue = out.take().expect("the queue is back in its cell");
            let code = rocketns::processor::dispatch(
                &state,
                &mut req,
                rocketns::processor::Caller { conn: 1, addr: None },
                &mut queue,
                Default::default(),
            )
            .await;
            queue.flush(&mut tokio::io::sink()).await.expect("the sink takes everything");
            request.replace(Some(req));
            out.replace(Some(queue));
            black_box(code)
        })
    });
}

/// Decoding each client family's GET_ROUTEINFO_BY_TOPIC (`rocketns::testing::client_headers`), frame to
/// command; the Java header also with the opaques a long-lived Java client reaches (ten digits, then
/// negative once its counter wraps).
fn decode(c: &mut Criterion) {
    let mut cases: Vec<(String, ClientHeader, i32)> =
        ClientHeader::ALL.iter().map(|h| (h.name().to_string(), *h, 4711)).collect();
    cases.push(("java_opaque_10_digits".into(), ClientHeader::Java, 2_000_000_123));
    cases.push(("java_opaque_negative".into(), ClientHeader::Java, -2_000_000_123));
    let mut group = c.benchmark_group("decode_header");
    for (name, header, opaque) in cases {
        let mut frame = Vec::new();
        header.put_route_request(&mut frame, "topic-517", opaque);
        let mut buf = BytesMut::from(&frame[..]);
        let raw = FrameDecoder::default().decode(&mut buf).expect("valid frame").expect("whole frame");
        group.bench_function(name, |b| b.iter(|| decode_command(black_box(raw.clone()))));
    }
    group.finish();
}

criterion_group!(benches, lookup, decode);
criterion_main!(benches);
