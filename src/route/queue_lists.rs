//! `QueueLists`: the queue datas of the topics a batch changes, each list shared by every topic that has the
//! same one.
//!
//! Topics whose lists are the same change alike, so a change is worked out once per list and change, not
//! once per topic: a broker joining a cluster whose 100,000 topics are on every broker makes one new list,
//! not 100,000 copies of fifty queue datas, and a registration costs O(its topics), not O(its topics x the
//! brokers each has). The builder's rules stay where they are; this is only where their results are kept.

use std::collections::HashMap;
use std::sync::Arc;

use crate::protocol::QueueData;
use crate::route::FastHasher;

/// A topic's queue datas, sorted by broker name; shared by the topics (and routes) that have the same.
pub type QueueList = Arc<Vec<QueueData>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Change {
    /// Inserts, or replaces, the queue data of its broker.
    Put(QueueData),
    /// Removes the queue data of this broker.
    Remove(Arc<str>),
}

#[derive(Default)]
pub(in crate::route) struct QueueLists {
    drafts: HashMap<Arc<str>, QueueList, FastHasher>,
    /// (a list's address, a change) → the list, held so that its address stays its own while the batch
    /// lasts, and the list changed.
    changes: HashMap<(usize, Change), (QueueList, QueueList), FastHasher>,
    empty: QueueList,
}

impl QueueLists {
    /// The list of a topic no table has yet.
    pub(in crate::route) fn empty(&self) -> QueueList {
        self.empty.clone()
    }

    pub(in crate::route) fn get_key_value(&self, topic: &str) -> Option<(&Arc<str>, &QueueList)> {
        self.drafts.get_key_value(topic)
    }

    pub(in crate::route) fn reserve(&mut self, topics: usize) {
        self.drafts.reserve(topics);
    }

    /// `topic`'s list becomes `current` with `queue_data` in it (replacing its broker's).
    pub(in crate::route) fn put(&mut self, topic: Arc<str>, current: &QueueList, queue_data: QueueData) {
        let next = self.changed(current, Change::Put(queue_data));
        self.drafts.insert(topic, next);
    }

    /// `topic`'s list becomes `current` without `broker`'s queue data.
    pub(in crate::route) fn remove(&mut self, topic: Arc<str>, current: &QueueList, broker: Arc<str>) {
        let next = self.changed(current, Change::Remove(broker));
        self.drafts.insert(topic, next);
    }

    /// Every topic changed, with its list, for the batch's end.
    pub(in crate::route) fn take(&mut self) -> HashMap<Arc<str>, QueueList, FastHasher> {
        self.changes.clear();
        std::mem::take(&mut self.drafts)
    }

    fn changed(&mut self, current: &QueueList, change: Change) -> QueueList {
        let key = (Arc::as_ptr(current) as usize, change);
        if let Some((_, next)) = self.changes.get(&key) {
            return next.clone();
        }
        let mut list = Vec::with_capacity(current.len() + 1);
        list.extend_from_slice(current);
        match &key.1 {
            Change::Put(qd) => match list.binary_search_by(|q| q.broker_name.cmp(&qd.broker_name)) {
                Ok(i) => list[i] = qd.clone(),
                Err(i) => list.insert(i, qd.clone()),
            },
            Change::Remove(broker) => list.retain(|q| q.broker_name != *broker),
        }
        list.shrink_to_fit();
        let next = Arc::new(list);
        self.changes.insert(key, (current.clone(), next.clone()));
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qd(broker: &str, queues: i32) -> QueueData {
        QueueData {
            broker_name: broker.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_sys_flag: 0,
        }
    }

    #[test]
    fn equal_lists_change_into_one_list() {
        let mut lists = QueueLists::default();
        let start: QueueList = Arc::new(vec![qd("a", 8), qd("c", 8)]);
        for t in ["x", "y", "z"] {
            lists.put(t.into(), &start, qd("b", 8));
        }
        let same = Arc::new(vec![qd("a", 8), qd("c", 8)]);
        lists.put("w".into(), &same, qd("b", 8));
        let (x, y, w) = (lists.drafts["x"].clone(), lists.drafts["y"].clone(), lists.drafts["w"].clone());
        assert!(Arc::ptr_eq(&x, &y), "one change of one list: one new list");
        assert!(!Arc::ptr_eq(&x, &w), "another list of the same content is worked out on its own");
        assert_eq!(*x, vec![qd("a", 8), qd("b", 8), qd("c", 8)]);
        assert_eq!(x, w);
        lists.put("x".into(), &x, qd("b", 16));
        lists.remove("y".into(), &y, "a".into());
        assert_eq!(*lists.drafts["x"], vec![qd("a", 8), qd("b", 16), qd("c", 8)]);
        assert_eq!(*lists.drafts["y"], vec![qd("b", 8), qd("c", 8)]);
        assert_eq!(*start, vec![qd("a", 8), qd("c", 8)], "a list never changes once made");
        let empty = lists.empty();
        lists.remove("z".into(), &Arc::new(vec![qd("a", 8)]), "a".into());
        assert!(lists.drafts["z"].is_empty() && empty.is_empty());
        assert_eq!(lists.take().len(), 4);
    }
}
