//! What saving the route file costs beyond the table: counted by this test binary's allocator on the thread
//! that saves. The save runs every routeSnapshotIntervalSeconds after any change, whatever clients do, so its
//! cost adds to every other peak (it was most of the slow-reader test's excess on a busy machine, issue 31).
//! Made to fail once by saving as before (a copy of the table's names and queue data, then the whole JSON
//! in memory, then the write): 100,000 topics took 25 MiB; now 1.6 MiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rocketns::route::RouteSnapshot;
use rocketns::route::dump::{RoutesToSave, parse};

/// The system allocator, counting what each thread holds and its peak.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = HELD.try_with(|held| {
        held.set(held.get() + delta);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(held.get())));
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; the counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A route file of one broker with `topics` topics, in format 1 (each topic's queue datas in the topic): all
/// with the same queue data, or (`distinct`) each with read queues of its own, so each its own list.
fn route_file(topics: usize, distinct: bool) -> Vec<u8> {
    let topic_list: Vec<String> = (0..topics)
        .map(|i| {
            let read = if distinct { i } else { 8 };
            format!(
                r#"{{"topic":"topic-{i}","queueDatas":[{{"brokerName":"broker-a","readQueueNums":{read},"writeQueueNums":8,"perm":6,"topicSysFlag":0}}]}}"#
            )
        })
        .collect();
    format!(
        r#"{{"format":"{}","brokers":[{{"cluster":"c","brokerName":"broker-a","brokerAddrs":{{"0":"10.0.0.1:10911"}},"zoneName":null,"enableActingMaster":false}}],"clusters":{{"c":["broker-a"]}},"topics":[{}],"filterServers":[],"mappings":{{}},"liveBrokers":[{{"cluster":"c","brokerAddr":"10.0.0.1:10911","haServerAddr":"","dataVersion":{{"stateVersion":0,"timestamp":1,"counter":1}},"timeoutMillis":120000}}]}}"#,
        "rocketns-routes/1",
        topic_list.join(",")
    )
    .into_bytes()
}

const MIB: isize = 1 << 20;

/// Restores `file`, saves it, checks the save restores every topic; returns the saved bytes and what the
/// save held at its peak beyond what was held before it.
fn save(file: &[u8], topics: usize) -> (Vec<u8>, isize) {
    let (routes, _writer) =
        rocketns::route::route_table(RouteSnapshot::default(), Some(parse(file).expect("a route file")), 16);
    let snapshot = routes.load_full();
    assert_eq!(snapshot.topics.len(), topics, "the file is restored");
    let to_save = RoutesToSave { snapshot, live: Vec::new() };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routeSnapshot.json");

    let start = HELD.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    rocketns::store::fsutil::write_atomically_with(&path, |out| rocketns::route::dump::write(&to_save, out))
        .expect("saved");
    let peak = PEAK.with(Cell::get) - start;

    let saved = std::fs::read(&path).expect("the route file");
    let (again, _writer) =
        rocketns::route::route_table(RouteSnapshot::default(), Some(parse(&saved).expect("saved")), 16);
    assert_eq!(again.load().topics.len(), topics, "the saved file restores every topic");
    eprintln!("route file of {} bytes saved holding {} KiB at the peak", saved.len(), peak / 1024);
    (saved, peak)
}

#[test]
fn saving_a_hundred_thousand_topics_holds_a_write_buffer_not_a_copy_of_the_table() {
    let (saved, peak) = save(&route_file(100_000, false), 100_000);
    let lists = String::from_utf8_lossy(&saved).matches(r#"{"brokerName":"broker-a","readQueueNums":8"#).count();
    assert_eq!(lists, 1, "the list all topics share is written once");
    assert!(peak < 2 * MIB, "saving {} bytes of routes held {} KiB at its peak", saved.len(), peak / 1024);
}

/// SECURITY.md's 48 bytes a distinct queue list, at its worst: every topic a list of its own (5.8 MiB at
/// 100,000 of them).
#[test]
fn a_list_of_its_own_for_each_topic_costs_the_save_at_most_48_bytes_a_list() {
    let (saved, peak) = save(&route_file(100_000, true), 100_000);
    assert!(
        peak < 2 * MIB + 100_000 * 48,
        "saving {} bytes of routes held {} KiB at its peak",
        saved.len(),
        peak / 1024
    );
}
