//! Sends the route writer's 905 notices (NOTIFY_MIN_BROKER_ID_CHANGE) to brokers, one-way, as Java's
//! `RouteInfoManager#notifyMinBrokerIdChanged` does with its remoting client: a connection to each address,
//! no retries. A notice goes to its brokers at once (at most `MAX_IN_FLIGHT` sends), and the next waits for
//! those sends, so that a broker gets its notices in order, as over Java's one connection; each send is
//! bounded by the connect timeout and Java's one-way timeout, so an unreachable broker delays the next
//! notice by 3.3 s at most (Java waits as long, holding its route table's write lock).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::client::PeerConnection;
use crate::error::shown;
use crate::limits::throttle::client_log;
use crate::ops::metrics::Metrics;
use crate::route::min_broker_id::NoticeReceiver;

/// Of a broker's address, what a log line quotes: brokers send any `brokerAddr` (issue 44: a 4 MB one
/// made 24 MB of log a cycle), so the lines clip it and go through the client-line rate limit.
const SHOWN: usize = 128;

pub const MAX_IN_FLIGHT: usize = 16;
/// Java's `connectTimeoutMillis`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Java's `invokeOneway(addr, request, 300)`.
const ONEWAY_TIMEOUT: Duration = Duration::from_millis(300);

/// Runs until the writer's end of the channel is dropped.
pub async fn run(mut notices: NoticeReceiver, metrics: Arc<Metrics>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(notice) = notices.recv().await {
        let notify: Vec<_> = notice.notify.iter().take(8).map(|a| shown(a, SHOWN)).collect();
        client_log!(
            info,
            broker_name = %shown(&notice.broker_name, SHOWN),
            min_broker_id = notice.min_broker_id,
            notify = ?notify,
            brokers = notice.notify.len(),
            offline = ?notice.offline_broker_addr.as_deref().map(|a| shown(a, SHOWN)),
            "min broker id changed, notifying"
        );
        let request = notice.request();
        let mut sends = tokio::task::JoinSet::new();
        for addr in &notice.notify {
            let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
            let (addr, request, metrics) = (addr.clone(), request.clone(), metrics.clone());
            sends.spawn(async move {
                let sent = async {
                    let conn = PeerConnection::connect_chosen(&addr, CONNECT_TIMEOUT).await?;
                    conn.oneway(request, ONEWAY_TIMEOUT).await
                };
                match sent.await {
                    Ok(()) => metrics.outbound.notices_sent.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        // The error's text may quote the address again.
                        let error = e.to_string();
                        client_log!(warn, broker = %shown(&addr, SHOWN), error = %shown(&error, SHOWN), "NOTIFY_MIN_BROKER_ID_CHANGE not sent");
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
