//! Registration and snapshot publishing costs, side by side with a bare parse of the same body.
//!
//! - `parse_10k`: decoding a REGISTER_BROKER body of 10k topics, and nothing else (the yardstick);
//! - `noop_reregister_10k`: the periodic re-registration of that broker, unchanged: parse, apply, publish
//!   nothing;
//! - `one_topic_changed_10k`: the same with one topic's queue count changed: one topic re-encoded;
//! - `new_broker_10k`: a second broker joining with the same 10k topics: every topic re-encoded;
//! - `publish_one_change/{1k,10k,100k}`: one changed topic in tables of growing size: the cost follows what
//!   changed, not the table;
//! - `first_snapshot_100k`: building the first snapshot of 100k topics from one registration;
//! - `one_broker_change/{1k,1m}`: a broker of 1,000 topics re-registering with one of them changed, alone in
//!   the table and among 1,000 such brokers (a million routes): what it costs follows the broker, not the
//!   table.
//! - `from_empty/1m`: 1,000 brokers of 1,000 topics each registering one after another on an empty table, each
//!   publishing (as after a restart without a route file): building and copying the table's shards as it
//!   grows to a million routes.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rocketns::protocol::{DataVersion, RegisterBrokerBody, TopicConfig};
use rocketns::route::BrokerRegistration;
use rocketns::route::direct::DirectTable;

/// A 5.x broker's RegisterBrokerBody JSON with `topics` topics; `wide` sets topic `wide`'s queue count.
fn body(topics: usize, counter: i64, wide: Option<usize>) -> Vec<u8> {
    named_body("topic-", topics, counter, wide)
}

/// [`body`] with topics named `{prefix}{i}`.
fn named_body(prefix: &str, topics: usize, counter: i64, wide: Option<usize>) -> Vec<u8> {
    let configs: Vec<TopicConfig> = (0..topics)
        .map(|i| {
            let queues = if wide == Some(i) { 16 } else { 8 };
            TopicConfig::new(format!("{prefix}{i}"), queues, queues, 6)
        })
        .collect();
    let dv = DataVersion { counter, state_version: 0, timestamp: 1_700_000_000_000 };
    rocketns::testing::register_body_json(&dv, &configs)
}

fn registration(name: &str, body: &[u8]) -> BrokerRegistration {
    let body = RegisterBrokerBody::decode(body, false, 479).expect("valid body");
    rocketns::testing::registration("DefaultCluster", name, 0, &format!("{name}:10911"), body)
}

/// The route table after `name` registered `body`.
fn table_with(name: &str, body: &[u8]) -> DirectTable {
    let mut t = DirectTable::new();
    assert!(register(&mut t, name, body), "first registration publishes");
    t
}

/// Decode and apply, as the server does for each REGISTER_BROKER; whether a snapshot was published.
fn register(t: &mut DirectTable, name: &str, body: &[u8]) -> bool {
    let r = registration(name, body);
    t.register(&r).expect("accepted").1
}

fn registration_costs(c: &mut Criterion) {
    let unchanged = body(10_000, 1, None);
    let changed = body(10_000, 2, Some(5_000));
    let mut g = c.benchmark_group("registration");
    g.sample_size(20);
    g.bench_function("parse_10k", |b| b.iter(|| RegisterBrokerBody::decode(black_box(&unchanged), false, 479)));
    let mut t = table_with("broker-a", &unchanged);
    g.bench_function("noop_reregister_10k", |b| {
        b.iter(|| assert!(!register(&mut t, "broker-a", black_box(&unchanged))))
    });
    let t = table_with("broker-a", &unchanged);
    g.bench_function("one_topic_changed_10k", |b| {
        b.iter_batched_ref(
            || t.clone(),
            |t| assert!(register(t, "broker-a", black_box(&changed))),
            criterion::BatchSize::LargeInput,
        )
    });
    g.bench_function("new_broker_10k", |b| {
        b.iter_batched_ref(
            || t.clone(),
            |t| assert!(register(t, "broker-b", black_box(&unchanged))),
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn publish_scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("publish_one_change");
    g.sample_size(20);
    for topics in [1_000usize, 10_000, 100_000] {
        let base = table_with("broker-a", &body(topics, 1, None));
        // The changed topic arrives through REGISTER_TOPIC_IN_NAMESRV: one topic, no body to parse.
        let queue = rocketns::protocol::QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: 6,
            topic_sys_flag: 0,
        };
        g.bench_with_input(BenchmarkId::from_parameter(topics), &topics, |b, _| {
            b.iter_batched_ref(
                || base.clone(),
                |t| assert!(black_box(t.register_topic("topic-7", vec![queue.clone()])), "changed"),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
    let big = body(100_000, 1, None);
    let mut g = c.benchmark_group("first_snapshot");
    g.sample_size(10);
    g.bench_function("100k_topics", |b| b.iter(|| black_box(table_with("broker-a", &big).snapshot().topics.len())));
    g.finish();
}

/// The JSON body of broker `b` of the million-route table (1,000 topics of its own); `wide` as in [`body`].
fn own_body(b: usize, counter: i64, wide: Option<usize>) -> Vec<u8> {
    named_body(&format!("t{b}-"), 1_000, counter, wide)
}

fn one_broker_change(c: &mut Criterion) {
    let mut g = c.benchmark_group("one_broker_change");
    g.sample_size(20);
    // `cargo test` runs each bench once to see that it works; building a million routes in a debug build
    // takes a minute of the test command for nothing the 1k case does not show.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    for (label, brokers) in [("1k", 1usize), ("1m", 1_000)] {
        if brokers > 1 && !benchmarking {
            continue;
        }
        let mut t = DirectTable::new();
        for b in 0..brokers {
            assert!(register(&mut t, &format!("broker-{b}"), &own_body(b, 1, None)));
        }
        assert_eq!(t.snapshot().topics.len(), brokers * 1_000);
        // Broker 0's topic 7 goes to 16 queues and back, a new DataVersion each time: one route changes.
        let bodies = [own_body(0, 2, Some(7)), own_body(0, 3, None)];
        let mut turn = 0;
        g.bench_function(label, |b| {
            b.iter(|| {
                assert!(register(&mut t, "broker-0", black_box(&bodies[turn % 2])), "one topic changed");
                turn += 1;
            })
        });
    }
    g.finish();
}

fn from_empty(c: &mut Criterion) {
    let mut g = c.benchmark_group("from_empty");
    g.sample_size(10);
    // As in `one_broker_change`: the million only when benchmarking.
    let brokers = if std::env::args().any(|a| a == "--bench") { 1_000 } else { 10 };
    let all: Vec<BrokerRegistration> =
        (0..brokers).map(|b| registration(&format!("broker-{b}"), &own_body(b, 1, None))).collect();
    let label = if brokers == 1_000 { "1m" } else { "10k" };
    g.bench_function(label, |b| {
        b.iter(|| {
            let mut t = DirectTable::new();
            for r in &all {
                assert!(t.register(black_box(r)).expect("accepted").1, "a new broker publishes");
            }
            black_box(t.snapshot().topics.len())
        })
    });
    g.finish();
}

criterion_group!(benches, registration_costs, publish_scaling, one_broker_change, from_empty);
criterion_main!(benches);
