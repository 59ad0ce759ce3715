//! A three-node controller group in the test's process (`enableControllerInNamesrv`), each node with its
//! own store, and what a Java 5.3.3 broker in controller mode sends to join one.

use std::time::Duration;

use super::{Client, TestServer, free_port, request, start_with, test_config};
use rocketns::remoting::RemotingCommand;

pub const NOT_LEADER: i32 = 2007;

pub struct Group {
    pub nodes: Vec<Option<TestServer>>,
    pub peers: Vec<String>,
    pub configs: Vec<rocketns::NamesrvConfig>,
}

pub async fn group() -> Group {
    group_with(|_, _| {}).await
}

/// A group that takes Raft frames from the peers' addresses unsigned (`controllerAllowUnsignedPeers`):
/// what the gate's checks do whoever may send.
pub async fn unsigned_group() -> Group {
    group_with(|_, config| {
        config.controller_peer_secret_file = String::new();
        config.controller_allow_unsigned_peers = true;
    })
    .await
}

/// A group whose nodes' configs `tweak` changes (given each node's index) before they start; they share a
/// `controllerPeerSecretFile`, as a group of several nodes must (or allow unsigned frames).
pub async fn group_with(tweak: impl Fn(usize, &mut rocketns::NamesrvConfig)) -> Group {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let peer_list: Vec<String> = peers.iter().enumerate().map(|(i, a)| format!("n{i}-{a}")).collect();
    let mut nodes = Vec::new();
    let mut configs = Vec::new();
    for i in 0..3 {
        let mut config = test_config();
        config.enable_controller_in_namesrv = true;
        config.controller_dleger_group = "g".into();
        config.controller_dleger_peers = peer_list.join(";");
        config.controller_dleger_self_id = format!("n{i}");
        config.controller_store_path = super::config_dir(&config).join("controller").display().to_string();
        config.scan_not_active_broker_interval = 200;
        config.scan_inactive_master_interval = 200;
        let secret = super::config_dir(&config).join("peer-secret");
        std::fs::write(&secret, "the secret the three test nodes share\n").expect("peer secret");
        config.controller_peer_secret_file = secret.display().to_string();
        tweak(i, &mut config);
        configs.push(config.clone());
        nodes.push(Some(start_with(config).await));
    }
    Group { nodes, peers, configs }
}

impl Group {
    /// The leader's index, once a live node says it leads and every live node names it.
    pub async fn leader(&self) -> usize {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut named = Vec::new();
            let mut leading = None;
            for (i, addr) in self.peers.iter().enumerate() {
                if self.nodes[i].is_none() {
                    continue;
                }
                let mut c = Client::connect(addr.parse().unwrap()).await;
                let resp = c.request(request(1005, &[])).await;
                assert_eq!(resp.code, 0);
                named.push(resp.ext("controllerLeaderAddress").map(str::to_string));
                if resp.ext("isLeader") == Some("true") {
                    leading = Some(i);
                }
            }
            if let Some(i) = leading
                && named.iter().all(|n| n.as_deref() == Some(self.peers[i].as_str()))
            {
                return i;
            }
            assert!(tokio::time::Instant::now() < deadline, "no leader within 30 s: {named:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn client(&self, i: usize) -> Client {
        Client::connect(self.peers[i].parse().unwrap()).await
    }
}

pub fn body(resp: &RemotingCommand) -> String {
    String::from_utf8(resp.body.to_vec()).unwrap()
}

pub fn heartbeat(id: &str, addr: &str) -> RemotingCommand {
    request(
        904,
        &[
            ("clusterName", "c"),
            ("brokerName", "broker-a"),
            ("brokerAddr", addr),
            ("brokerId", id),
            ("epoch", "0"),
            ("maxOffset", "0"),
            ("confirmOffset", "0"),
            ("heartbeatTimeoutMills", "10000"),
            ("electionPriority", "0"),
        ],
    )
}

/// APPLY_BROKER_ID (1013) in cluster `c`: group `name` takes `id` with the register check code `check`.
pub fn apply_id(name: &str, id: &str, check: &str) -> RemotingCommand {
    let mut apply = request(1013, &[("clusterName", "c"), ("brokerName", name), ("appliedBrokerId", id)]);
    apply.ext_fields.as_mut().unwrap().insert("registerCheckCode", check);
    apply
}

/// ELECT_MASTER (1002) as broker `id` of broker-a asks it, not designated.
pub fn elect(id: &str) -> RemotingCommand {
    request(1002, &[("clusterName", "c"), ("brokerName", "broker-a"), ("brokerId", id), ("designateElect", "false")])
}

/// What ReplicasManager does to join: an id (1012, 1013), a heartbeat, and registration (1003).
pub async fn join(c: &mut Client, addr: &str, expected_id: &str) -> RemotingCommand {
    let next = c.request(request(1012, &[("clusterName", "c"), ("brokerName", "broker-a")])).await;
    assert_eq!((next.code, next.ext("nextBrokerId")), (0, Some(expected_id)), "{next:?}");
    let applied = c.request(apply_id("broker-a", expected_id, &format!("{addr};1700000000000"))).await;
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(applied.ext("brokerName"), Some("broker-a"));
    let beat = c.request(heartbeat(expected_id, addr)).await;
    assert_eq!((beat.code, beat.remark.as_deref()), (0, Some("Heart beat success")));
    let fields = [("clusterName", "c"), ("brokerName", "broker-a"), ("brokerId", expected_id), ("brokerAddress", addr)];
    let registered = c.request(request(1003, &fields)).await;
    assert_eq!(registered.code, 0, "{registered:?}");
    registered
}
