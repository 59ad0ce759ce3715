//! NOTIFY_MIN_BROKER_ID_CHANGE (905): when the lowest broker id of a broker group changes, Java's
//! `RouteInfoManager` tells the group's brokers (with `notifyMinBrokerIdChanged`), and a slave of a 5.x
//! group can then act as master. Which change is told to whom, with which header fields, is decided here,
//! by the route builder; `outbound::notify` sends it, from the queue here (bounded in notices and bytes).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

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
    /// What it holds, an upper bound: itself, its list, and every string it keeps alive (a queued notice
    /// may be the last holder of a gone broker's address).
    pub fn bytes(&self) -> usize {
        let strings = [&self.broker_name, &self.min_broker_addr]
            .into_iter()
            .chain(&self.offline_broker_addr)
            .chain(&self.ha_broker_addr)
            .chain(&self.notify)
            .map(|s| s.len())
            .sum::<usize>();
        std::mem::size_of::<Self>() + self.notify.len() * std::mem::size_of::<Arc<str>>() + strings
    }

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

/// Notices waiting for the notifier; beyond it the writer drops them (and counts them).
pub const QUEUE: usize = 1024;
/// What the notices waiting may hold in all ([`MinBrokerIdChange::bytes`]); beyond it, the same. A notice
/// lists every broker of its group, so its size is the group's: without this, 1,024 notices of a group of
/// many brokers held gigabytes (issue 44).
pub const QUEUE_BYTES: usize = 4 << 20;

/// The queue between the route writer and the notifier, bounded in notices and in bytes.
pub fn queue() -> (NoticeSender, NoticeReceiver) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let bytes = Arc::new(AtomicUsize::new(0));
    (NoticeSender { tx, bytes: bytes.clone() }, NoticeReceiver { rx, bytes })
}

/// The route writer's end: it never waits.
pub struct NoticeSender {
    /// Each notice with the bytes it was counted for, given back as that.
    tx: mpsc::Sender<(MinBrokerIdChange, usize)>,
    bytes: Arc<AtomicUsize>,
}

impl NoticeSender {
    /// Queues `notice` if the queue has room for it, in notices and in bytes; `false` when it is dropped.
    pub fn try_send(&self, notice: MinBrokerIdChange) -> bool {
        let size = notice.bytes();
        let queued = self.bytes.fetch_add(size, Ordering::AcqRel) + size <= QUEUE_BYTES
            && self.tx.try_send((notice, size)).is_ok();
        if !queued {
            self.bytes.fetch_sub(size, Ordering::AcqRel);
        }
        queued
    }
}

/// The notifier's end.
pub struct NoticeReceiver {
    rx: mpsc::Receiver<(MinBrokerIdChange, usize)>,
    bytes: Arc<AtomicUsize>,
}

impl NoticeReceiver {
    pub(crate) async fn recv(&mut self) -> Option<MinBrokerIdChange> {
        let (notice, size) = self.rx.recv().await?;
        self.bytes.fetch_sub(size, Ordering::AcqRel);
        Some(notice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Notices of a group of 1,000 brokers (277 KB each, 261-byte addresses) fill the queue's bytes long
    /// before its 1,024 places; one taken by the notifier makes room again.
    #[tokio::test]
    async fn the_queue_holds_at_most_its_bytes() {
        let (sink, mut notices) = queue();
        let notice = MinBrokerIdChange {
            broker_name: "broker-a".into(),
            min_broker_id: 0,
            min_broker_addr: "127.0.0.1:10911".into(),
            offline_broker_addr: None,
            ha_broker_addr: None,
            notify: vec![Arc::from("x".repeat(261)); 1000],
        };
        let fits = QUEUE_BYTES / notice.bytes();
        assert!(fits < QUEUE, "{fits}");
        for i in 0..fits {
            assert!(sink.try_send(notice.clone()), "notice {i}");
        }
        assert!(!sink.try_send(notice.clone()), "past {QUEUE_BYTES} bytes");
        assert_eq!(notices.recv().await, Some(notice.clone()));
        assert!(sink.try_send(notice), "room again");
    }

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
