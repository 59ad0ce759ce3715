//! Each live broker's DataVersion, as one rocketns node tells another beside its cluster info: a request
//! for GET_BROKER_CLUSTER_INFO with [`ASK`] set to `true` gets [`REPLY`] in its reply's header, a JSON
//! array of `[cluster, addr, stateVersion, timestamp, counter]`. A broker stamps the same DataVersion on the
//! registration it sends every NameServer, so two nodes that hold different ones for a broker did not get
//! the same registrations. The body is cluster info as ever; a request without [`ASK`] (every client's,
//! and the Java NameServer ignores the field) gets the reply it always got.

use crate::protocol::DataVersion;

/// The request's header field that asks for the versions.
pub const ASK: &str = "withDataVersions";
/// The reply's header field that carries them.
pub const REPLY: &str = "brokerDataVersions";

/// One live broker address's DataVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerVersion {
    pub cluster: String,
    pub addr: String,
    pub version: DataVersion,
}

pub fn encode(versions: impl IntoIterator<Item = BrokerVersion>) -> String {
    let rows: Vec<(String, String, i64, i64, i64)> = versions
        .into_iter()
        .map(|v| (v.cluster, v.addr, v.version.state_version, v.version.timestamp, v.version.counter))
        .collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_string())
}

pub fn decode(text: &str) -> serde_json::Result<Vec<BrokerVersion>> {
    let rows: Vec<(String, String, i64, i64, i64)> = serde_json::from_str(text)?;
    Ok(rows
        .into_iter()
        .map(|(cluster, addr, state_version, timestamp, counter)| BrokerVersion {
            cluster,
            addr,
            version: DataVersion { state_version, timestamp, counter },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_survive_the_header_and_garbage_is_an_error() {
        let v = BrokerVersion {
            cluster: "c\"1".into(),
            addr: "127.0.0.1:10911".into(),
            version: DataVersion { state_version: 3, timestamp: 1_700_000_000_000, counter: 7 },
        };
        let text = encode([v.clone()]);
        assert_eq!(text, r#"[["c\"1","127.0.0.1:10911",3,1700000000000,7]]"#);
        assert_eq!(decode(&text).unwrap(), vec![v]);
        assert!(decode("[[1]]").is_err());
        assert!(decode("{").is_err());
    }
}
