//! The comparison of this node's brokers with each peer's (`namesrvPeers`), every scan period
//! (`scanNotActiveBrokerInterval`), each peer on a loop of its own: over a connection of its own, asks for
//! its cluster info (and, from a rocketns peer, its brokers' DataVersions), compares (`ops::peers`), and
//! publishes the view that /metrics and /cluster show. A line is logged when a peer has disagreed at two
//! comparisons in a row (a registration that reached one node a moment before the other is not news), or
//! agrees again, or stops answering: at most one warning and one all-clear a minute for each peer.
//!
//! A peer is a stranger until it answers: each reply at most [`MAX_CLUSTER_INFO`] bytes, within
//! [`ASK_WITHIN`], and the connection closed after it (a peer cannot keep this node reading between
//! comparisons); what it says changes only its own view, never the routes, and its words are clipped to
//! [`ERROR_SHOWN`] bytes. At most `config::MAX_NAMESRV_PEERS` peers.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::SharedConfig;
use crate::ops::peers::{Members, PeerSlot, PeerState, compare};
use crate::outbound::client::PeerConnection;
use crate::protocol::broker_versions;
use crate::protocol::codes::{request, response};
use crate::protocol::remote_route::RemoteClusterInfo;
use crate::remoting::{ExtFields, RemotingCommand};
use crate::route::RouteHandle;

/// Connecting to a peer, and each reply.
pub const ASK_WITHIN: Duration = Duration::from_secs(3);
/// A peer's cluster info at most (a thousand brokers' is about 150 KB), decoded only within it.
pub const MAX_CLUSTER_INFO: usize = 4 << 20;
/// Comparisons at most this often, whatever the scan period (each is a connection to the peer).
const MIN_PERIOD: Duration = Duration::from_millis(100);
/// A warning or an all-clear for one peer at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// What a peer's failure shows of itself (an error quoting what it sent), in /cluster and the log.
pub const ERROR_SHOWN: usize = 256;

/// Runs a loop for each peer's slot; returns only if one of them ends (a panic), which the server's
/// supervision reports.
pub async fn compare_with_peers(routes: RouteHandle, config: SharedConfig, slots: Vec<PeerSlot>) {
    let mut loops = tokio::task::JoinSet::new();
    for slot in slots {
        loops.spawn(compare_with(slot, routes.clone(), config.clone()));
    }
    if let Some(Err(e)) = loops.join_next().await
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn compare_with(slot: PeerSlot, routes: RouteHandle, config: SharedConfig) {
    let peer = slot.peer();
    let mut log = LogThrottle::default();
    loop {
        let period = Duration::from_millis(config.load().scan_not_active_broker_interval).max(MIN_PERIOD);
        tokio::time::sleep(period).await;
        let state = match ask(&peer).await {
            Ok((info, versions)) => {
                // This node's table as it is now, after the peer's answer arrived.
                let ours = Members::of_snapshot(&routes.load(), &routes.liveness);
                let theirs = Members::of_peer(&info.brokers, versions.as_deref());
                PeerState::Compared {
                    rocketns: versions.is_some(),
                    brokers_here: ours.count(),
                    brokers_there: theirs.count(),
                    divergence: compare(&ours, &theirs),
                }
            }
            Err(error) => {
                PeerState::Unreachable { error: crate::error::shown(&error.to_string(), ERROR_SHOWN).into_owned() }
            }
        };
        log.say(&peer, &state, Instant::now());
        slot.store(state);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error(transparent)]
    Outbound(#[from] crate::outbound::client::OutboundError),
    #[error("cluster info refused: code {0}")]
    Refused(i32),
    #[error("cluster info of {0} bytes, more than {MAX_CLUSTER_INFO}")]
    TooLarge(usize),
    #[error("unreadable {what}: {error}")]
    Unreadable { what: &'static str, error: serde_json::Error },
}

/// The peer's cluster info and, from a rocketns peer, its brokers' DataVersions, over a connection that
/// goes with the answer.
async fn ask(peer: &str) -> Result<(RemoteClusterInfo, Option<Vec<broker_versions::BrokerVersion>>), AskError> {
    let c = PeerConnection::connect(peer, ASK_WITHIN).await?;
    let mut ext = ExtFields::new();
    ext.insert(broker_versions::ASK, "true");
    let reply = c.request(RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO, ext), ASK_WITHIN).await?;
    if reply.code != response::SUCCESS {
        return Err(AskError::Refused(reply.code));
    }
    let told = reply.ext(broker_versions::REPLY).unwrap_or("");
    if reply.body.len() + told.len() > MAX_CLUSTER_INFO {
        return Err(AskError::TooLarge(reply.body.len() + told.len()));
    }
    let info =
        RemoteClusterInfo::decode(&reply.body).map_err(|error| AskError::Unreadable { what: "cluster info", error })?;
    let versions = match reply.ext(broker_versions::REPLY) {
        Some(text) => Some(
            broker_versions::decode(text).map_err(|error| AskError::Unreadable { what: "broker versions", error })?,
        ),
        None => None,
    };
    Ok((info, versions))
}

/// What was last logged for one peer, the divergence of the comparison before, and when each kind of
/// line last went out.
#[derive(Default)]
struct LogThrottle {
    said: Option<String>,
    before: Option<String>,
    warned: Option<Instant>,
    cleared: Option<Instant>,
}

impl LogThrottle {
    fn say(&mut self, peer: &str, state: &PeerState, now: Instant) {
        let (line, warning) = match state {
            PeerState::NotYet => return,
            PeerState::Unreachable { error } => (format!("unreachable: {error}"), true),
            PeerState::Compared { divergence, .. } if !divergence.is_empty() => (divergence.to_string(), true),
            PeerState::Compared { .. } => ("agree".to_string(), false),
        };
        let seen_before = self.before.replace(line.clone()).as_deref() == Some(line.as_str());
        if self.said.as_deref() == Some(line.as_str()) {
            return;
        }
        // A divergence is news once it is seen twice in a row.
        if matches!(state, PeerState::Compared { .. }) && warning && !seen_before {
            return;
        }
        // Agreeing from the start is not news.
        if self.said.is_none() && !warning {
            self.said = Some(line);
            return;
        }
        let last = if warning { &mut self.warned } else { &mut self.cleared };
        if last.is_some_and(|at| now.duration_since(at) < LOG_EVERY) {
            return;
        }
        *last = Some(now);
        match state {
            PeerState::Unreachable { error } => {
                tracing::warn!(peer, error = %error, "cannot compare brokers with a peer NameServer")
            }
            PeerState::Compared { divergence, brokers_here, brokers_there, .. } if warning => tracing::warn!(
                peer,
                brokers_here,
                brokers_there,
                divergence = %divergence,
                "this NameServer and a peer disagree on brokers"
            ),
            PeerState::Compared { brokers_here, .. } => {
                tracing::info!(peer, brokers = brokers_here, "this NameServer and a peer agree on brokers")
            }
            PeerState::NotYet => {}
        }
        self.said = Some(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::peers::{Divergence, Named};

    fn disagree(n: usize) -> PeerState {
        let missing_here = Named { count: 1, shown: vec![format!("c/b{n}/0@h:1")] };
        PeerState::Compared {
            rocketns: true,
            brokers_here: 1,
            brokers_there: 2,
            divergence: Divergence { missing_here, ..Default::default() },
        }
    }

    fn agree() -> PeerState {
        PeerState::Compared { rocketns: true, brokers_here: 1, brokers_there: 1, divergence: Divergence::default() }
    }

    #[test]
    fn a_divergence_seen_twice_is_said_and_flapping_at_most_once_a_minute() {
        let t0 = Instant::now();
        let mut log = LogThrottle::default();
        let at = |s: u64| t0 + Duration::from_secs(s);
        log.say("p", &agree(), at(0));
        assert_eq!((log.said.as_deref(), log.cleared), (Some("agree"), None), "not logged");
        // A blip (one comparison) is not news.
        log.say("p", &disagree(9), at(5));
        log.say("p", &agree(), at(10));
        assert_eq!((log.said.as_deref(), log.warned), (Some("agree"), None));
        // Seen twice: a warning at once.
        log.say("p", &disagree(1), at(15));
        log.say("p", &disagree(1), at(20));
        assert_eq!(log.said.as_deref(), Some("missing_here: c/b1/0@h:1"));
        // Another divergence within the minute waits; the same one is not said twice.
        log.say("p", &disagree(2), at(25));
        log.say("p", &disagree(2), at(30));
        assert_eq!(log.said.as_deref(), Some("missing_here: c/b1/0@h:1"));
        log.say("p", &disagree(2), at(81));
        assert_eq!(log.said.as_deref(), Some("missing_here: c/b2/0@h:1"));
        // The all-clear has a minute of its own: said at once after the warning.
        log.say("p", &agree(), at(85));
        assert_eq!(log.said.as_deref(), Some("agree"));
        log.say("p", &disagree(3), at(90));
        log.say("p", &disagree(3), at(95));
        assert_eq!(log.said.as_deref(), Some("agree"), "a second warning within the minute");
        log.say("p", &disagree(3), at(141));
        assert_eq!(log.said.as_deref(), Some("missing_here: c/b3/0@h:1"));
    }
}
