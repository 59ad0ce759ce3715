//! The controller at the wire (`enableControllerInNamesrv`): three rocketns nodes in one process, each
//! with its own store, replicating on openraft over their `controllerDLegerPeers` ports. A broker group
//! goes through what a Java 5.3.3 broker in controller mode sends (ReplicasManager: 1005 to find the
//! leader, 1012/1013 for an id, 904, 1003, 1002, 1001), its master's connection closes, the leader elects
//! the other broker and tells it (1008, received here); the leader node stops and the state is on the new
//! leader. The bodies are fastjson's rendering of Java 5.3.3's SyncStateSet, ElectMasterResponseBody and
//! BrokerMemberGroup (alphabetical properties, bare numeric map keys); tests/java compares them with
//! Java's own controller.

mod common;

use std::time::Duration;

use common::controller::{Group, NOT_LEADER, apply_id, body, elect, group, heartbeat, join};
use common::{request, start_with};
use rocketns::remoting::RemotingCommand;
use tokio::io::AsyncReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_group_elects_fails_over_and_survives_the_leader() {
    let mut g = group().await;
    let leader = g.leader().await;
    let follower = (leader + 1) % 3;

    // A follower refuses what only the leader serves, as Java's does.
    let mut f = g.client(follower).await;
    let refused = f.request(request(1012, &[("clusterName", "c"), ("brokerName", "broker-a")])).await;
    assert_eq!((refused.code, refused.remark.as_deref()), (NOT_LEADER, Some("The controller is not in leader state")));

    // Broker 1 joins and elects itself (the group's first election).
    let addr_a = "127.0.0.1:10911";
    let mut a = g.client(leader).await;
    let registered = join(&mut a, addr_a, "1").await;
    assert_eq!(registered.ext("masterBrokerId"), None, "no master yet");
    assert_eq!(body(&registered), r#"{"syncStateSet":[],"syncStateSetEpoch":0}"#);
    let elected = a.request(elect("1")).await;
    assert_eq!(elected.code, 0, "{elected:?}");
    let header = |r: &RemotingCommand, k: &str| r.ext(k).map(str::to_string);
    assert_eq!(header(&elected, "masterBrokerId").as_deref(), Some("1"));
    assert_eq!(header(&elected, "masterAddress").as_deref(), Some(addr_a));
    assert_eq!(header(&elected, "masterEpoch").as_deref(), Some("1"));
    assert_eq!(header(&elected, "syncStateSetEpoch").as_deref(), Some("1"));
    assert_eq!(
        body(&elected),
        r#"{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"c"},"syncStateSet":[1]}"#
    );

    // Broker 2 joins (a listener at its address receives the controller's notice later) and learns the master.
    let listener_b = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr_b = listener_b.local_addr().unwrap().to_string();
    let mut b = g.client(leader).await;
    let registered = join(&mut b, &addr_b, "2").await;
    assert_eq!(header(&registered, "masterBrokerId").as_deref(), Some("1"));
    assert_eq!(header(&registered, "masterEpoch").as_deref(), Some("1"));

    // The master adds broker 2 to the SyncStateSet; a stale epoch is fenced.
    let mut alter = request(1001, &[("brokerName", "broker-a"), ("masterBrokerId", "1"), ("masterEpoch", "1")]);
    alter.body = r#"{"syncStateSet":[1,2],"syncStateSetEpoch":1}"#.into();
    let altered = a.request(alter.clone()).await;
    assert_eq!((altered.code, header(&altered, "newSyncStateSetEpoch").as_deref()), (0, Some("2")));
    assert_eq!(body(&altered), r#"{"syncStateSet":[1,2],"syncStateSetEpoch":2}"#);
    alter.body = r#"{"syncStateSet":[1],"syncStateSetEpoch":1}"#.into();
    assert_eq!(a.request(alter).await.code, 2001, "a stale SyncStateSet epoch");

    // Broker 1's connection closes: the leader elects broker 2 and tells it.
    drop(a);
    let (mut notice, _) = tokio::time::timeout(Duration::from_secs(10), listener_b.accept()).await.unwrap().unwrap();
    let mut frame = vec![0u8; 4];
    notice.read_exact(&mut frame).await.unwrap();
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    frame.resize(4 + len, 0);
    notice.read_exact(&mut frame[4..]).await.unwrap();
    let notice = common::decode_frame(&frame);
    assert_eq!(notice.code, 1008);
    assert!(notice.is_oneway());
    assert_eq!((notice.ext("masterBrokerId"), notice.ext("masterEpoch")), (Some("2"), Some("2")));
    assert_eq!(notice.ext("masterAddress"), Some(addr_b.as_str()));
    assert_eq!(body(&notice), r#"{"syncStateSet":[2],"syncStateSetEpoch":3}"#);

    // The leader stops; another takes over with the same state.
    g.nodes[leader].take().unwrap().shutdown().await;
    let next = g.leader().await;
    assert_ne!(next, leader);
    let mut c = g.client(next).await;
    let info = c.request(request(1004, &[("brokerName", "broker-a")])).await;
    assert_eq!(info.code, 0, "{info:?}");
    assert_eq!((info.ext("masterBrokerId"), info.ext("masterEpoch")), (Some("2"), Some("2")));
    assert_eq!(body(&info), r#"{"syncStateSet":[2],"syncStateSetEpoch":3}"#);
    // No names: Java's SYSTEM_ERROR "not set any response code", on a follower too (asked before leading).
    for empty in ["", "[]", "null"] {
        for node in [next, (next + 1) % 3] {
            let Some(_) = &g.nodes[node] else { continue };
            let mut names = request(1006, &[]);
            names.body = empty.to_string().into();
            let refused = g.client(node).await.request(names).await;
            assert_eq!((refused.code, refused.remark.as_deref()), (1, Some("not set any response code")), "{empty:?}");
        }
    }
    let mut names = request(1006, &[]);
    names.body = r#"["broker-a"]"#.into();
    let data = c.request(names).await;
    assert_eq!(data.code, 0);
    let data: serde_json::Value = serde_json::from_slice(&data.body).unwrap();
    assert_eq!(data["replicasInfoTable"]["broker-a"]["masterBrokerId"], 2);
}

/// The controller's port bounds what any client sends (SECURITY.md): a frame over 8 MiB or a header that
/// does not decode closes that connection only; an unknown code and a request missing a field get
/// Java's codes; the node goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_closes_only_its_connection() {
    let g = group().await;
    let leader = g.leader().await;
    let mut c = g.client(leader).await;
    c.send_raw(&(9u32 << 20).to_be_bytes()).await;
    c.assert_closed_without_reply(Duration::from_secs(5)).await;
    let mut c = g.client(leader).await;
    c.send_raw(&[0, 0, 0, 8, 0, 0, 0, 4, b'{', b'{', b'{', b'{']).await;
    c.assert_closed_without_reply(Duration::from_secs(5)).await;

    let mut c = g.client(leader).await;
    let unknown = c.request(request(9999, &[])).await;
    assert_eq!((unknown.code, unknown.remark.as_deref()), (3, Some(" request type 9999 not supported")));
    let missing = c.request(request(1012, &[("clusterName", "c")])).await;
    assert_eq!((missing.code, missing.remark.as_deref()), (1, Some("missing header field brokerName")));
    let no_id = c.request(request(904, &[("clusterName", "c"), ("brokerName", "b"), ("brokerAddr", "a:1")])).await;
    assert_eq!((no_id.code, no_id.remark.as_deref()), (2005, Some("Heart beat with empty brokerId")));
    let next = c.request(request(1012, &[("clusterName", "c"), ("brokerName", "broker-a")])).await;
    assert_eq!((next.code, next.ext("nextBrokerId")), (0, Some("1")));
}

/// A leader left without a majority (its two peers stopped) takes no write: CONTROLLER_NOT_LEADER within
/// the 5 s a decision waits to confirm its leadership, and nothing is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_without_a_majority_refuses_writes() {
    let mut g = group().await;
    let leader = g.leader().await;
    for i in 0..3 {
        if i != leader {
            g.nodes[i].take().unwrap().shutdown().await;
        }
    }
    let mut c = g.client(leader).await;
    let started = tokio::time::Instant::now();
    let apply = apply_id("broker-a", "1", "127.0.0.1:10911;1");
    let refused = c.request(apply).await;
    assert_eq!(refused.code, NOT_LEADER, "{refused:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "refused after {:?}", started.elapsed());
    let next = c.request(request(1012, &[("clusterName", "c"), ("brokerName", "broker-a")])).await;
    assert_eq!(next.code, NOT_LEADER, "nothing applied, and reads refused too: {next:?}");
}

/// How many records node `i`'s Raft log file holds (each: length, CRC32, the entry).
fn log_records(g: &Group, i: usize) -> usize {
    let path = std::path::Path::new(&g.configs[i].controller_store_path).join("raft-log");
    let bytes = std::fs::read(path).unwrap_or_default();
    let (mut at, mut count) = (0, 0);
    while let Some(header) = bytes.get(at..at + 8) {
        at += 8 + u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
        count += 1;
    }
    count
}

/// 2,400 decisions (the master moving broker 2 in and out of the SyncStateSet): each node's log is cut
/// back behind its snapshots (taken every 1,000), and after all three nodes stop and start again the
/// first answer has the last decision's state (the snapshot's and the log's tail after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_log_stays_short_and_the_state_survives_a_restart_of_every_node() {
    const DECISIONS: usize = 2400;
    let mut g = group().await;
    let leader = g.leader().await;
    let mut c = g.client(leader).await;
    join(&mut c, "127.0.0.1:10911", "1").await;
    join(&mut c, "127.0.0.1:10921", "2").await;
    assert_eq!(c.request(elect("1")).await.code, 0);
    let mut epoch = 1;
    for i in 0..DECISIONS {
        if i % 200 == 0 {
            for (id, addr) in [("1", "127.0.0.1:10911"), ("2", "127.0.0.1:10921")] {
                assert_eq!(c.request(heartbeat(id, addr)).await.code, 0);
            }
        }
        let mut alter = request(1001, &[("brokerName", "broker-a"), ("masterBrokerId", "1"), ("masterEpoch", "1")]);
        let members = if i % 2 == 0 { "1,2" } else { "1" };
        alter.body = format!(r#"{{"syncStateSet":[{members}],"syncStateSetEpoch":{epoch}}}"#).into();
        let altered = c.request(alter).await;
        assert_eq!(altered.code, 0, "decision {i}: {altered:?}");
        epoch += 1;
    }
    // The brokers' heartbeats were on this connection: once it closes, master 1 is gone and, no other
    // broker being alive, the group is left without one: MASTER_NOT_AVAILABLE on each of Java's
    // electMasterMaxRetryCount (3) tries, each moving the master epoch on, 1 to 4 (as Java's does).
    drop(c);
    let mut c = g.client(leader).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.request(request(1004, &[("brokerName", "broker-a")])).await;
        if (info.ext("masterBrokerId"), info.ext("masterEpoch")) == (None, Some("4")) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not three failed elections 10 s after the close: {info:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(c);
    for i in 0..3 {
        let records = log_records(&g, i);
        assert!(records < 1100, "node {i}'s log holds {records} records after {DECISIONS} decisions");
    }
    for i in 0..3 {
        g.nodes[i].take().unwrap().shutdown().await;
    }
    for i in 0..3 {
        g.nodes[i] = Some(start_with(g.configs[i].clone()).await);
    }
    let leader = g.leader().await;
    let mut c = g.client(leader).await;
    // The first answer after the restart: the snapshot's state and the log's tail replayed on it.
    let info = c.request(request(1004, &[("brokerName", "broker-a")])).await;
    assert_eq!((info.code, info.ext("masterBrokerId"), info.ext("masterEpoch")), (0, None, Some("4")), "{info:?}");
    assert_eq!(body(&info), format!(r#"{{"syncStateSet":[1],"syncStateSetEpoch":{epoch}}}"#));
    let next = c.request(request(1012, &[("clusterName", "c"), ("brokerName", "broker-a")])).await;
    assert_eq!(next.ext("nextBrokerId"), Some("3"));
}

fn update_config(text: &str) -> RemotingCommand {
    let mut update = request(1009, &[]);
    update.body = text.to_string().into();
    update
}

/// UPDATE_CONTROLLER_CONFIG, as `mqadmin updateControllerConfig` sends it: a group left without a master
/// (its master's connection closed, the other broker outside the SyncStateSet) gets one, on the other
/// broker's asking, once `enableElectUncleanMaster` is turned on at the leader. A start-up key or a
/// deny-listed one is refused with Java's code and changes nothing; what was answered SUCCESS is what the
/// node says after a restart. Only the node asked changes, as in Java.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_of_the_controller_config_applies_and_survives_a_restart() {
    let mut g = group().await;
    let leader = g.leader().await;
    let (mut a, mut b) = (g.client(leader).await, g.client(leader).await);
    let (addr_a, addr_b) = ("127.0.0.1:10911", "127.0.0.1:10921");
    join(&mut a, addr_a, "1").await;
    assert_eq!(a.request(elect("1")).await.code, 0);
    join(&mut b, addr_b, "2").await;
    drop(a);
    let master = |info: &RemotingCommand| info.ext("masterBrokerId").map(str::to_string);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while master(&b.request(request(1004, &[("brokerName", "broker-a")])).await).is_some() {
        assert!(tokio::time::Instant::now() < deadline, "master 1 still there 10 s after its connection closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Broker 2 lives but is outside the SyncStateSet: while unclean elections are off it asks in vain.
    let elect_b = elect("2");
    let refused = b.request(elect_b.clone()).await;
    assert_eq!((refused.code, refused.remark.as_deref()), (2012, Some("Failed to elect a new master")));
    assert_eq!(master(&b.request(request(1004, &[("brokerName", "broker-a")])).await), None);
    let mut admin = g.client(leader).await;
    let refused =
        admin.request(update_config("enableElectUncleanMaster=true\ncontrollerDLegerPeers=n0-1.2.3.4:1\n")).await;
    assert_eq!(refused.code, 16, "a start-up key: NO_PERMISSION, and nothing changes: {refused:?}");
    let refused = admin.request(update_config("enableElectUncleanMaster=true\nconfigStorePath=/tmp/x\n")).await;
    assert_eq!((refused.code, refused.remark.as_deref()), (16, Some("Can not update config in black list.")));
    let config = body(&admin.request(request(1010, &[])).await);
    assert!(config.contains("enableElectUncleanMaster=false\n"), "{config}");

    let updated = admin.request(update_config("enableElectUncleanMaster=true\nscanInactiveMasterInterval=300\n")).await;
    assert_eq!(updated.code, 0, "{updated:?}");
    let config = body(&admin.request(request(1010, &[])).await);
    assert!(
        config
            .contains("enableElectUncleanMaster=true\nnotifyBrokerRoleChanged=true\nscanInactiveMasterInterval=300\n"),
        "{config}"
    );
    let elected = b.request(elect_b).await;
    assert_eq!((elected.code, master(&elected).as_deref()), (0, Some("2")), "{elected:?}");
    let other = (leader + 1) % 3;
    let config = body(&g.client(other).await.request(request(1010, &[])).await);
    assert!(config.contains("enableElectUncleanMaster=false\n"), "only the node asked changes: {config}");

    drop((admin, b));
    g.nodes[leader].take().unwrap().shutdown().await;
    g.nodes[leader] = Some(start_with(g.configs[leader].clone()).await);
    let config = body(&g.client(leader).await.request(request(1010, &[])).await);
    assert!(
        config.contains("enableElectUncleanMaster=true\n") && config.contains("scanInactiveMasterInterval=300\n"),
        "{config}"
    );
}

/// UPDATE_CONTROLLER_CONFIG's body is bounded (64 KiB, as UPDATE_NAMESRV_CONFIG's): a larger one is refused
/// unread, nothing changes, and the node goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_config_update_over_its_bound_is_refused() {
    let g = group().await;
    let leader = g.leader().await;
    let mut c = g.client(leader).await;
    let huge = format!("enableElectUncleanMaster=true\n#{}\n", "x".repeat(1 << 20));
    let refused = c.request(update_config(&huge)).await;
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.remark.as_deref().unwrap_or_default().contains("at most 65536"), "{refused:?}");
    let config = body(&c.request(request(1010, &[])).await);
    assert!(config.contains("enableElectUncleanMaster=false\n"), "{config}");
}
