//! Sends the route writer's 905 notices (NOTIFY_MIN_BROKER_ID_CHANGE) to brokers, one-way, as Java's
//! `RouteInfoManager#notifyMinBrokerIdChanged` does with its remoting client: a connection to each address,
//! no retries. A notice goes to its brokers at once (at most `MAX_IN_FLIGHT` sends), and the next waits for
//! those sends, so that a broker gets its notices in order, as over Java's one connection; each send is
//! bounded by the connect timeout and Java's one-way timeout, so an unreachable broker delays the next
//! notice by 3.3 s at most (Java waits as long, holding its route table's write lock).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use super::client::PeerConnection;
use crate::ops::metrics::Metrics;
use crate::route::min_broker_id::MinBrokerIdChange;

/// Notices waiting for the notifier; beyond it the writer drops them (and counts them).
pub const QUEUE: usize = 1024;
const MAX_IN_FLIGHT: usize = 16;
/// Java's `connectTimeoutMillis`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Java's `invokeOneway(addr, request, 300)`.
const ONEWAY_TIMEOUT: Duration = Duration::from_millis(300);

/// Runs until the writer's end of the channel is dropped.
pub async fn run(mut notices: mpsc::Receiver<MinBrokerIdChange>, metrics: Arc<Metrics>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(notice) = notices.recv().await {
        tracing::info!(
            broker_name = %notice.broker_name,
            min_broker_id = notice.min_broker_id,
            notify = ?notice.notify,
            offline = ?notice.offline_broker_addr,
            "min broker id changed, notifying"
        );
        let request = notice.request();
        let mut sends = tokio::task::JoinSet::new();
        for addr in &notice.notify {
            let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
            let (addr, request, metrics) = (addr.clone(), request.clone(), metrics.clone());
            sends.spawn(async move {
                let sent = async {
                    let conn = PeerConnection::connect(&addr, CONNECT_TIMEOUT).await?;
                    conn.oneway(request, ONEWAY_TIMEOUT).await
                };
                match sent.await {
                    Ok(()) => metrics.outbound.notices_sent.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        tracing::warn!(broker = %addr, error = %e, "NOTIFY_MIN_BROKER_ID_CHANGE not sent");
                        metrics.outbound.notices_failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                drop(permit);
            });
        }
        while let Some(sent) = sends.join_next().await {
            if let Err(e) = sent
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}
