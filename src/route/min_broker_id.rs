//! NOTIFY_MIN_BROKER_ID_CHANGE (905): when the lowest broker id of a broker group changes, Java's
//! `RouteInfoManager` tells the group's brokers (with `notifyMinBrokerIdChanged`), and a slave of a 5.x
//! group can then act as master. Which change is told to whom, with which header fields, is decided here,
//! by the route builder; `outbound::notify` sends it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::codes::request;
use crate::remoting::{ExtFields, RemotingCommand};

/// One 905 to send: the same request to every address in `notify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinBrokerIdChange {
    /// The group's name, for logs: Java does not send it.
    pub broker_name: Arc<str>,
    pub min_broker_id: i64,
    pub min_broker_addr: Arc<str>,
    /// The broker that left, when one did.
    pub offline_broker_addr: Option<Arc<str>>,
    /// The new lowest-id broker's HA address, when it registered.
    pub ha_broker_addr: Option<Arc<str>>,
    pub notify: Vec<Arc<str>>,
}

impl MinBrokerIdChange {
    /// The change for a group now made of `addrs` (`None` when it is empty): a broker that left is told to
    /// every remaining member; a broker that registered with a lower id, to the others (or to itself when it
    /// is alone).
    pub fn new(
        broker_name: &Arc<str>,
        addrs: &BTreeMap<i64, Arc<str>>,
        offline_broker_addr: Option<Arc<str>>,
        ha_broker_addr: Option<Arc<str>>,
    ) -> Option<MinBrokerIdChange> {
        let (&min_broker_id, min_broker_addr) = addrs.iter().next()?;
        let notify = addrs
            .iter()
            .filter(|(id, _)| offline_broker_addr.is_some() || addrs.len() == 1 || **id != min_broker_id)
            .map(|(_, addr)| addr.clone())
            .collect();
        Some(MinBrokerIdChange {
            broker_name: broker_name.clone(),
            min_broker_id,
            min_broker_addr: min_broker_addr.clone(),
            offline_broker_addr,
            ha_broker_addr,
            notify,
        })
    }

    /// `NotifyMinBrokerIdChangeRequestHeader`: its null fields (`brokerName` always) are left out.
    pub fn request(&self) -> RemotingCommand {
        let mut ext = ExtFields::new();
        ext.insert("minBrokerId", self.min_broker_id.to_string());
        ext.insert("minBrokerAddr", &*self.min_broker_addr);
        if let Some(offline) = &self.offline_broker_addr {
            ext.insert("offlineBrokerAddr", &**offline);
        }
        if let Some(ha) = &self.ha_broker_addr {
            ext.insert("haBrokerAddr", &**ha);
        }
        RemotingCommand::request(request::NOTIFY_MIN_BROKER_ID_CHANGE, ext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(members: &[(i64, &str)]) -> BTreeMap<i64, Arc<str>> {
        members.iter().map(|(id, a)| (*id, Arc::from(*a))).collect()
    }

    #[test]
    fn a_lower_id_registering_is_told_to_the_others() {
        let name: Arc<str> = "broker-a".into();
        let change =
            MinBrokerIdChange::new(&name, &group(&[(0, "m:1"), (1, "s:1"), (2, "t:1")]), None, Some("m:2".into()))
                .unwrap();
        assert_eq!((change.min_broker_id, &*change.min_broker_addr), (0, "m:1"));
        assert_eq!(change.notify, vec![Arc::from("s:1"), Arc::from("t:1")]);
        let alone = MinBrokerIdChange::new(&name, &group(&[(0, "m:1")]), None, None).unwrap();
        assert_eq!(alone.notify, vec![Arc::from("m:1")]);
    }

    #[test]
    fn a_broker_leaving_is_told_to_every_remaining_member() {
        let name: Arc<str> = "broker-a".into();
        let change =
            MinBrokerIdChange::new(&name, &group(&[(1, "s:1"), (2, "t:1")]), Some("m:1".into()), None).unwrap();
        assert_eq!(change.notify, vec![Arc::from("s:1"), Arc::from("t:1")]);
        let ext = change.request().ext_fields.unwrap();
        let mut fields: Vec<_> = ext.iter().collect();
        fields.sort();
        assert_eq!(fields, [("minBrokerAddr", "s:1"), ("minBrokerId", "1"), ("offlineBrokerAddr", "m:1")]);
        assert!(MinBrokerIdChange::new(&name, &BTreeMap::new(), Some("m:1".into()), None).is_none());
    }
}
