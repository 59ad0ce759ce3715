//! REGISTER_BROKER applied to the route builder: Java's `RouteInfoManager#registerBroker`, as named steps, each
//! stating the rule it applies. A child module of `builder`, so it reaches the builder's tables directly.

use std::collections::HashSet;
use std::sync::Arc;

use super::{BrokerRegistration, RegisterError, RegisterResult, RouteBuilder};
use crate::error::shown;
use crate::limits::throttle::client_log;
use crate::protocol::route_data::{MASTER_ID, PERM_WRITE};
use crate::protocol::topic_name::is_valid_topic_name;
use crate::protocol::{BrokerData, QueueConfig};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveInfo, DEFAULT_BROKER_TIMEOUT};
use crate::route::min_broker_id::MinBrokerIdChange;

/// What the registering broker is to its group, which decides whether its topic configs define routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Master,
    /// The lowest-id slave of a 5.x group that has no master registered: it defines the queues meanwhile.
    PrimeSlave,
    OtherSlave,
}

impl Role {
    fn of(group: &BrokerData, r: &BrokerRegistration) -> Role {
        let lowest_id = group.broker_addrs.keys().next().copied().unwrap_or(MASTER_ID);
        match r.broker_id {
            MASTER_ID => Role::Master,
            id if id == lowest_id && r.enable_acting_master.is_some() => Role::PrimeSlave,
            _ => Role::OtherSlave,
        }
    }
}

impl RouteBuilder<'_> {
    /// `RouteInfoManager#registerBroker`.
    pub(in crate::route) fn register_broker(
        &mut self,
        r: &BrokerRegistration,
    ) -> Result<RegisterResult, RegisterError> {
        self.notice_departures();
        self.admit_member(r);
        let (mut group, mut first_registration) = self.broker_group(r);
        // Judged before anything changes, as Java does: an empty group's lowest id counts as 0.
        let lowers_min_id = r.broker_id < group.broker_addrs.keys().next().copied().unwrap_or(MASTER_ID);
        release_other_id(&mut group, r);
        if self.older_than_holder_of_id(&group, r) {
            client_log!(warn, broker = %shown(&r.broker_addr, 256), "registration with an older stateVersion rejected");
            self.live.remove(&live_key(r));
            self.put_broker(group);
            return Ok(RegisterResult::default());
        }
        if !group.broker_addrs.contains_key(&r.broker_id) && r.body.topic_configs.len() == 1 {
            self.put_broker(group);
            return Err(RegisterError::FirstRegistrationWithOneTopic);
        }
        let previous = group.broker_addrs.insert(r.broker_id, r.broker_addr.clone());
        first_registration |= previous.is_none_or(|a| a.is_empty());
        let role = Role::of(&group, r);
        let acting_master = group.enable_acting_master;
        if lowers_min_id {
            let ha = Some(r.ha_server_addr.clone()).filter(|a| !a.is_empty());
            self.notices.extend(MinBrokerIdChange::new(&r.broker_name, &group.broker_addrs, None, ha));
        }
        self.put_broker(group);
        if role != Role::OtherSlave {
            let version_changed = self.live.is_data_version_changed(&live_key(r), Some(&r.body.data_version));
            let reapply = first_registration || version_changed;
            let restored = self.sync_topic_configs(r, reapply, role == Role::PrimeSlave && acting_master);
            // As Java, mappings are taken on a first registration or a new DataVersion; and with the queues
            // a periodic registration restores (after a DELETE_TOPIC), which took their mappings along.
            // Only the broker's own share: a registration cannot place mappings under other brokers' names.
            for (topic, info) in &r.body.topic_queue_mappings {
                if info.bname.as_deref() == Some(&*r.broker_name) && (reapply || restored.contains(topic.as_str())) {
                    self.put_mapping(topic, info);
                }
            }
        }
        self.record_live(r);
        self.sync_filter_servers(r);
        Ok(self.master_of(r))
    }

    /// The cluster lists the broker name (clusters only ever gain names from registrations).
    pub(super) fn admit_member(&mut self, r: &BrokerRegistration) {
        if !self.next.clusters.get(&r.cluster).is_some_and(|names| names.contains(&r.broker_name)) {
            Arc::make_mut(&mut self.next.clusters).entry(r.cluster.clone()).or_default().insert(r.broker_name.clone());
            self.changed = true;
        }
    }

    /// The broker group (BrokerData), created on first sight, with the zone and acting-master flag of this
    /// registration (a 4.x broker, which sends no flag, is never an acting-master group); and whether the
    /// group is new, which makes this a first registration.
    pub(super) fn broker_group(&self, r: &BrokerRegistration) -> (BrokerData, bool) {
        let existing = self.next.brokers.get(&r.broker_name);
        let mut group = existing
            .map(|b| (**b).clone())
            .unwrap_or_else(|| BrokerData::new(r.cluster.clone(), r.broker_name.clone()));
        group.enable_acting_master = r.enable_acting_master == Some(true);
        group.zone_name = r.zone_name.clone();
        (group, existing.is_none())
    }

    /// The stateVersion guard: another live address already holds this broker id with a newer stateVersion
    /// (a controller-mode failover), so this registration is stale: refused without an error, and the
    /// sender's live entry dropped.
    pub(super) fn older_than_holder_of_id(&self, group: &BrokerData, r: &BrokerRegistration) -> bool {
        group.broker_addrs.get(&r.broker_id).filter(|holder| **holder != r.broker_addr).is_some_and(|holder| {
            self.live
                .get(&BrokerAddrKey { cluster: r.cluster.clone(), addr: holder.clone() })
                .is_some_and(|info| info.data_version.state_version > r.body.data_version.state_version)
        })
    }

    /// `topicConfigWrapper` to queue data. Every config is re-applied on a first registration or a new
    /// DataVersion (`reapply`); otherwise only routes that are missing are restored, so an operator's change
    /// (a wiped write permission) survives periodic re-registrations. With `deleteTopicWithBrokerRegistration`,
    /// a full registration (no static-topic mappings) also drops the broker's topics it no longer lists. A
    /// prime slave of an acting-master group registers its topics without write permission (`read_only`).
    /// Returns the topics whose queue data was missing and is restored, when not `reapply`.
    pub(super) fn sync_topic_configs<'r>(
        &mut self,
        r: &'r BrokerRegistration,
        reapply: bool,
        read_only: bool,
    ) -> HashSet<&'r str> {
        if self.next.config.delete_topic_with_broker_registration && r.body.topic_queue_mappings.is_empty() {
            let listed: HashSet<&str> = r.body.topic_configs.iter().filter_map(|t| t.topic_name.as_deref()).collect();
            for topic in self.topics_of(&r.broker_name) {
                if !listed.contains(&*topic) {
                    self.remove_queue_data(&topic, &r.broker_name);
                }
            }
        }
        // Read-only first: which configs differ from what this broker has in the table? A periodic
        // re-registration finds none, having touched one plain hash map per topic.
        let known = self.index.get(&r.broker_name);
        let mut updates = Vec::new();
        // One line for all the configs ignored: a body of a million of them must not write a million lines.
        let (mut ignored, mut example) = (0usize, None);
        for tc in &r.body.topic_configs {
            let Some(topic) = tc.topic_name.as_deref().filter(|t| is_valid_topic_name(t)) else {
                ignored += 1;
                example = example.or(Some(tc.topic_name.as_deref()));
                continue;
            };
            let current = known.and_then(|topics| topics.get(topic));
            if current.is_some() && !reapply {
                continue;
            }
            let mut config = QueueConfig::from(tc);
            if read_only {
                config.perm &= !PERM_WRITE;
            }
            if current != Some(&config) {
                updates.push((topic, config));
            }
        }
        let restored = if reapply { HashSet::new() } else { updates.iter().map(|(topic, _)| *topic).collect() };
        for (topic, config) in updates {
            self.put_queue_data(topic, config.for_broker(r.broker_name.clone()));
        }
        if let Some(example) = example {
            let example = example.map(|t| shown(t, 256).escape_debug().to_string());
            client_log!(warn, broker = %shown(&r.broker_addr, 256), ignored, ?example, "topic configs without a valid topicName ignored");
        }
        restored
    }

    /// The broker's live entry: heartbeat now, its own timeout (`heartbeatTimeoutMillis`) or the default,
    /// its DataVersion, connection and HA address.
    pub(super) fn record_live(&mut self, r: &BrokerRegistration) {
        self.live.insert(
            live_key(r),
            BrokerLiveInfo {
                last_update: r.now,
                timeout: r.heartbeat_timeout.unwrap_or(DEFAULT_BROKER_TIMEOUT),
                data_version: r.body.data_version,
                conn_id: r.conn_id,
                ha_server_addr: r.ha_server_addr.clone(),
            },
        );
    }

    /// Filter servers: a registration without the list leaves them as they are, an empty list clears them.
    pub(super) fn sync_filter_servers(&mut self, r: &BrokerRegistration) {
        let Some(list) = &r.body.filter_server_list else { return };
        let key = live_key(r);
        let current = self.next.filter_servers.get(&key);
        let changed = if list.is_empty() { current.is_some() } else { current != Some(list) };
        if changed {
            let table = Arc::make_mut(&mut self.next.filter_servers);
            if list.is_empty() {
                table.remove(&key);
            } else {
                table.insert(key, list.clone());
            }
            self.dirty_brokers.insert(r.broker_name.clone());
            self.changed = true;
        }
    }

    /// The master lookup: a slave's reply names its group's master and the master's HA address, when the
    /// master is registered and live.
    pub(super) fn master_of(&self, r: &BrokerRegistration) -> RegisterResult {
        if r.broker_id == MASTER_ID {
            return RegisterResult::default();
        }
        let master = self.next.brokers.get(&r.broker_name).and_then(|b| b.broker_addrs.get(&MASTER_ID));
        match master.and_then(|m| self.live.get(&BrokerAddrKey { cluster: r.cluster.clone(), addr: m.clone() })) {
            // A master known only from a route file or a peer's copy, on no connection yet: Java, which would
            // not know that master at all, tells the slave nothing, and so does rocketns. It may be dead with
            // nothing to close (a killed master is removed when its connection closes, and it had none here):
            // told its HA address, a Java slave replicated from it when it came back as a slave, and kept
            // that link after the real master was named (AutoSwitchHAClient reconnects only once its link
            // breaks), out of the sync set for good (tests/java/controller-chaos.sh, once in four runs).
            // The slave hears of its master at the next registration after the master's own.
            Some(info) if info.conn_id == 0 => RegisterResult::default(),
            Some(info) => RegisterResult { master_addr: master.cloned(), ha_server_addr: Some(info.ha_server_addr) },
            None => RegisterResult::default(),
        }
    }
}

/// One address holds one id: a slave turned master (or the other way round) drops its old id.
pub(super) fn release_other_id(group: &mut BrokerData, r: &BrokerRegistration) {
    group.broker_addrs.retain(|id, addr| !(*addr == r.broker_addr && *id != r.broker_id));
}

fn live_key(r: &BrokerRegistration) -> BrokerAddrKey {
    BrokerAddrKey { cluster: r.cluster.clone(), addr: r.broker_addr.clone() }
}
