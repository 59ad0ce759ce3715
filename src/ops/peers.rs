//! What this node knows of its peers' broker tables (`namesrvPeers`): the last comparison with each, as
//! /metrics, /cluster and the log show it (`service::peer_compare` makes them). Nothing keeps replicas in
//! step: a broker that cannot reach one NameServer (a partition, a firewall rule, a stale `namesrvAddr`) is
//! routed by the others only, and the clients of that one never see it.
//!
//! A broker is a [`Member`]: one address of one broker id of one broker name in one cluster, as cluster info
//! names it, which the Java NameServer answers too. Where the peer is rocketns it also tells each broker's
//! DataVersion (`protocol::broker_versions`), so a node that missed a registration that changed a broker's
//! topics differs on it. A comparison costs O(brokers), never O(topics).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::protocol::broker_versions::BrokerVersion;
use crate::protocol::{BrokerData, DataVersion};
use crate::route::RouteSnapshot;
use crate::route::liveness::{BrokerAddrKey, LiveView};

/// Brokers named in each list of a view and its log line; the counts are whole.
pub const NAMES_SHOWN: usize = 16;

/// One address of one broker id, as cluster info names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    pub cluster: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_id: i64,
    pub addr: Arc<str>,
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}@{}", self.cluster, self.broker_name, self.broker_id, self.addr)
    }
}

/// A broker table's members, each with its DataVersion where it is known: a broker copied from a peer
/// has none until it registers, and a Java peer tells none.
#[derive(Debug, Default)]
pub struct Members(BTreeMap<Member, Option<DataVersion>>);

impl Members {
    /// This node's: the snapshot's brokers, and the live table's versions.
    pub fn of_snapshot(snapshot: &RouteSnapshot, live: &LiveView) -> Members {
        let brokers: Vec<&BrokerData> = snapshot.brokers.values().map(|b| &**b).collect();
        Members::of(brokers, |cluster, addr| live.data_version(&BrokerAddrKey::new(cluster, addr)))
    }

    /// A peer's: its cluster info's brokers, and the versions it told (a rocketns peer's).
    pub fn of_peer(brokers: &[BrokerData], versions: Option<&[BrokerVersion]>) -> Members {
        let versions: BTreeMap<(&str, &str), DataVersion> =
            versions.unwrap_or_default().iter().map(|v| ((v.cluster.as_str(), v.addr.as_str()), v.version)).collect();
        Members::of(brokers.iter(), |cluster, addr| versions.get(&(cluster, addr)).copied())
    }

    fn of<'a>(
        brokers: impl IntoIterator<Item = &'a BrokerData>,
        version: impl Fn(&str, &str) -> Option<DataVersion>,
    ) -> Members {
        let mut members = BTreeMap::new();
        for b in brokers {
            for (id, addr) in &b.broker_addrs {
                // The default DataVersion is a copied entry's (a real broker's has its creation time).
                let known = version(&b.cluster, addr).filter(|v| *v != DataVersion::default());
                let member = Member {
                    cluster: b.cluster.clone(),
                    broker_name: b.broker_name.clone(),
                    broker_id: *id,
                    addr: addr.clone(),
                };
                members.insert(member, known);
            }
        }
        Members(members)
    }

    /// Broker addresses, each of one id.
    pub fn count(&self) -> usize {
        self.0.len()
    }
}

/// Brokers in one list of a divergence: how many, and the first [`NAMES_SHOWN`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    pub count: usize,
    pub shown: Vec<String>,
}

impl Named {
    fn add(&mut self, member: &Member) {
        self.count += 1;
        if self.shown.len() < NAMES_SHOWN {
            self.shown.push(member.to_string());
        }
    }
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown.join(", "))?;
        match self.count - self.shown.len() {
            0 => Ok(()),
            more => write!(f, " and {more} more"),
        }
    }
}

/// Where two broker tables disagree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Divergence {
    /// The peer has them, this node does not.
    pub missing_here: Named,
    /// This node has them, the peer does not.
    pub extra_here: Named,
    /// Both have them, with different DataVersions (where both know one).
    pub data_version: Named,
}

impl Divergence {
    pub fn is_empty(&self) -> bool {
        self.missing_here.count + self.extra_here.count + self.data_version.count == 0
    }

    /// Each kind, as the metric's `kind` label names it.
    pub fn kinds(&self) -> [(&'static str, &Named); 3] {
        [("missing_here", &self.missing_here), ("extra_here", &self.extra_here), ("data_version", &self.data_version)]
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (kind, named) in self.kinds() {
            if named.count > 0 {
                write!(f, "{}{kind}: {named}", if first { "" } else { "; " })?;
                first = false;
            }
        }
        Ok(())
    }
}

/// One pass over both tables in order.
pub fn compare(ours: &Members, theirs: &Members) -> Divergence {
    let mut d = Divergence::default();
    for (member, version) in &ours.0 {
        match theirs.0.get(member) {
            None => d.extra_here.add(member),
            Some(their) => {
                if let (Some(a), Some(b)) = (version, their)
                    && a != b
                {
                    d.data_version.add(member);
                }
            }
        }
    }
    for member in theirs.0.keys().filter(|m| !ours.0.contains_key(*m)) {
        d.missing_here.add(member);
    }
    d
}

/// The last comparison with one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerState {
    /// None finished yet.
    NotYet,
    /// The peer did not answer, or answered what could not be read.
    Unreachable { error: String },
    /// Compared: `rocketns` when the peer told its brokers' DataVersions.
    Compared { rocketns: bool, brokers_here: usize, brokers_there: usize, divergence: Divergence },
}

#[derive(Debug, Clone)]
pub struct PeerView {
    pub peer: String,
    pub state: PeerState,
    /// When the last comparison ended.
    pub at: Option<SystemTime>,
}

/// What everyone may read: each peer's last view.
#[derive(Debug, Clone, Default)]
pub struct PeerViews {
    slots: Arc<[ArcSwap<PeerView>]>,
}

/// The one writer of one peer's view (`service::peer_compare`'s loop for that peer): not `Clone`, and the
/// only way a view changes.
#[derive(Debug)]
pub struct PeerSlot {
    slots: Arc<[ArcSwap<PeerView>]>,
    index: usize,
}

impl PeerViews {
    /// Views of `peers`, none compared yet, and their writers.
    pub fn new(peers: &[String]) -> (PeerViews, Vec<PeerSlot>) {
        let slots: Arc<[ArcSwap<PeerView>]> = peers
            .iter()
            .map(|peer| ArcSwap::from_pointee(PeerView { peer: peer.clone(), state: PeerState::NotYet, at: None }))
            .collect();
        let writers = (0..peers.len()).map(|index| PeerSlot { slots: slots.clone(), index }).collect();
        (PeerViews { slots }, writers)
    }

    pub fn all(&self) -> Vec<Arc<PeerView>> {
        self.slots.iter().map(|s| s.load_full()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// `"peers":[...]`, as /cluster shows them after the cluster info.
    pub fn to_json(&self) -> serde_json::Value {
        let views: Vec<serde_json::Value> = self.all().iter().map(|v| view_json(v)).collect();
        serde_json::Value::Array(views)
    }
}

impl PeerSlot {
    pub fn peer(&self) -> String {
        self.slots[self.index].load().peer.clone()
    }

    pub fn store(&self, state: PeerState) {
        let peer = self.peer();
        self.slots[self.index].store(Arc::new(PeerView { peer, state, at: Some(SystemTime::now()) }));
    }
}

fn view_json(v: &PeerView) -> serde_json::Value {
    use serde_json::json;
    let at = v.at.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).map(|d| d.as_millis() as u64);
    let named = |n: &Named| json!({"count": n.count, "brokers": n.shown});
    match &v.state {
        PeerState::NotYet => json!({"peer": v.peer, "state": "not compared yet"}),
        PeerState::Unreachable { error } => json!({"peer": v.peer, "state": "unreachable", "error": error, "at": at}),
        PeerState::Compared { rocketns, brokers_here, brokers_there, divergence } => json!({
            "peer": v.peer,
            "state": if divergence.is_empty() { "agree" } else { "disagree" },
            "peerKind": if *rocketns { "rocketns" } else { "other (membership only)" },
            "at": at,
            "brokersHere": brokers_here,
            "brokersThere": brokers_there,
            "missingHere": named(&divergence.missing_here),
            "extraHere": named(&divergence.extra_here),
            "dataVersion": named(&divergence.data_version),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(cluster: &str, name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        let mut b = BrokerData::new(cluster.into(), name.into());
        b.broker_addrs = addrs.iter().map(|(id, a)| (*id, Arc::from(*a))).collect();
        b
    }

    fn version(cluster: &str, addr: &str, counter: i64) -> BrokerVersion {
        BrokerVersion {
            cluster: cluster.into(),
            addr: addr.into(),
            version: DataVersion { state_version: 0, timestamp: 1_700_000_000_000, counter },
        }
    }

    #[test]
    fn missing_extra_and_changed_brokers_are_told_apart() {
        let ours = [broker("c", "a", &[(0, "h:1"), (1, "h:2")]), broker("c", "b", &[(0, "h:3")])];
        let theirs =
            [broker("c", "a", &[(0, "h:1")]), broker("c", "b", &[(0, "h:3")]), broker("c", "d", &[(0, "h:4")])];
        let ours = Members::of_peer(&ours, Some(&[version("c", "h:1", 1), version("c", "h:3", 5)]));
        let theirs = Members::of_peer(&theirs, Some(&[version("c", "h:1", 1), version("c", "h:3", 6)]));
        let d = compare(&ours, &theirs);
        assert_eq!(d.extra_here, Named { count: 1, shown: vec!["c/a/1@h:2".into()] });
        assert_eq!(d.missing_here, Named { count: 1, shown: vec!["c/d/0@h:4".into()] });
        assert_eq!(d.data_version, Named { count: 1, shown: vec!["c/b/0@h:3".into()] });
        assert_eq!(d.to_string(), "missing_here: c/d/0@h:4; extra_here: c/a/1@h:2; data_version: c/b/0@h:3");
        assert!(compare(&ours, &ours).is_empty());
    }

    #[test]
    fn unknown_versions_are_not_a_difference() {
        let b = [broker("c", "a", &[(0, "h:1")])];
        let copied = DataVersion::default();
        let told = Members::of_peer(&b, Some(&[version("c", "h:1", 9)]));
        let untold = Members::of_peer(&b, None);
        let copied =
            Members::of_peer(&b, Some(&[BrokerVersion { cluster: "c".into(), addr: "h:1".into(), version: copied }]));
        assert!(compare(&told, &untold).is_empty());
        assert!(compare(&told, &copied).is_empty());
        // The same address in another cluster is another broker.
        let other = Members::of_peer(&[broker("c2", "a", &[(0, "h:1")])], None);
        assert_eq!(compare(&told, &other).missing_here.count, 1);
    }

    #[test]
    fn lists_show_a_bounded_number_of_names() {
        let many: Vec<BrokerData> = (0..100).map(|i| broker("c", &format!("b{i}"), &[(0, "h:1")])).collect();
        let d = compare(&Members::default(), &Members::of_peer(&many, None));
        assert_eq!(d.missing_here.count, 100);
        assert_eq!(d.missing_here.shown.len(), NAMES_SHOWN);
        assert!(d.missing_here.to_string().ends_with(" and 84 more"), "{}", d.missing_here);
    }
}
