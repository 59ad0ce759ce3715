//! A route table driven directly, one change at a time, without the writer task: the builder's rules
//! applied and committed as the writer applies a batch. For benches and fuzzing (`testing` feature); the
//! server never uses it.

use crate::protocol::QueueData;
use crate::route::builder::{BrokerRegistration, BrokerTopicIndex, RegisterError, RegisterResult, RouteBuilder};
use crate::route::liveness::BrokerLiveTable;
use crate::route::snapshot::RouteSnapshot;

#[derive(Debug, Default, Clone)]
pub struct DirectTable {
    snapshot: RouteSnapshot,
    index: BrokerTopicIndex,
    live: BrokerLiveTable,
}

impl DirectTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// The snapshot as last published.
    pub fn snapshot(&self) -> &RouteSnapshot {
        &self.snapshot
    }

    /// Applies one registration; `Ok(true)` when it published a new snapshot.
    pub fn register(&mut self, r: &BrokerRegistration) -> Result<(RegisterResult, bool), RegisterError> {
        let mut b = RouteBuilder::new(&self.snapshot, &mut self.index, &self.live);
        let result = b.register_broker(r)?;
        Ok((result, publish(&mut self.snapshot, b)))
    }

    /// REGISTER_TOPIC_IN_NAMESRV; true when it published a new snapshot.
    pub fn register_topic(&mut self, topic: &str, queue_datas: Vec<QueueData>) -> bool {
        let mut b = RouteBuilder::new(&self.snapshot, &mut self.index, &self.live);
        b.register_topic(topic, queue_datas);
        publish(&mut self.snapshot, b)
    }
}

fn publish(snapshot: &mut RouteSnapshot, b: RouteBuilder<'_>) -> bool {
    match b.finish_committed() {
        Some(next) => {
            *snapshot = next;
            true
        }
        None => false,
    }
}
