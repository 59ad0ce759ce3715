//! Tells a group's live brokers of their new master: NOTIFY_BROKER_ROLE_CHANGED (1008), one-way, with
//! the master in the header and the SyncStateSet as the body (Java's ControllerManager NotifyService).
//! At most `MAX_IN_FLIGHT` sends at once (Java's three threads), each bounded by Java's 3 s.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Semaphore, mpsc};

use super::wire::sync_state_set_json;
use crate::outbound::client::PeerConnection;
use crate::protocol::codes::controller_request::NOTIFY_BROKER_ROLE_CHANGED;
use crate::remoting::{ExtFields, RemotingCommand};

/// Notices waiting to be sent; beyond it one is dropped (and logged).
pub const QUEUE: usize = 256;
pub const MAX_IN_FLIGHT: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChange {
    pub master_address: Option<String>,
    pub master_id: i64,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    /// The group's live brokers' addresses.
    pub targets: Vec<String>,
}

impl RoleChange {
    pub fn request(&self) -> RemotingCommand {
        let mut ext = ExtFields::new();
        if let Some(addr) = &self.master_address {
            ext.insert("masterAddress", addr);
        }
        ext.insert("masterEpoch", self.master_epoch.to_string());
        ext.insert("syncStateSetEpoch", self.sync_state_set_epoch.to_string());
        ext.insert("masterBrokerId", self.master_id.to_string());
        let mut request = RemotingCommand::request(NOTIFY_BROKER_ROLE_CHANGED, ext);
        request.body = Bytes::from(sync_state_set_json(&self.sync_state_set, self.sync_state_set_epoch));
        request
    }
}

/// Runs until the node's end of the channel is dropped.
pub async fn run(mut changes: mpsc::Receiver<RoleChange>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(change) = changes.recv().await {
        let brokers: Vec<String> = change.targets.iter().map(|a| crate::error::shown(a, 128).into_owned()).collect();
        tracing::info!(
            master = change.master_id,
            epoch = change.master_epoch,
            ?brokers,
            "controller: notifying a role change"
        );
        let request = change.request();
        for addr in change.targets {
            let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
            let request = request.clone();
            tokio::spawn(async move {
                let sent = async {
                    let conn = PeerConnection::connect_chosen(&addr, TIMEOUT).await?;
                    conn.oneway(request, TIMEOUT).await
                };
                if let Err(e) = sent.await {
                    crate::limits::throttle::client_log!(warn, broker = %crate::error::shown(&addr, 128), error = %crate::error::shown(&e.to_string(), 256), "NOTIFY_BROKER_ROLE_CHANGED not sent");
                }
                drop(permit);
            });
        }
    }
}
