//! `DataVersion`: the version stamp of a broker's topic configuration.

use serde::Deserialize;

use crate::protocol::json;
use crate::protocol::lenient;

/// Equality compares all three fields (Java's `equals`); 4.x brokers send no `stateVersion`, read as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default, deserialize_with = "lenient::i64_or_zero")]
    pub state_version: i64,
    #[serde(default, deserialize_with = "lenient::i64_or_zero")]
    pub timestamp: i64,
    #[serde(default, deserialize_with = "lenient::i64_or_zero")]
    pub counter: i64,
}

impl DataVersion {
    /// fastjson's encoding: `{"counter":5,"stateVersion":0,"timestamp":1700000000000}`.
    pub fn to_json(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(b"{\"counter\":");
        json::write_int(&mut out, self.counter);
        out.extend_from_slice(b",\"stateVersion\":");
        json::write_int(&mut out, self.state_version);
        out.extend_from_slice(b",\"timestamp\":");
        json::write_int(&mut out, self.timestamp);
        out.push(b'}');
        out
    }

    pub fn parse(body: &[u8]) -> serde_json::Result<Self> {
        lenient::from_fastjson_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_fastjson_and_reads_4x_shape() {
        let dv = DataVersion { state_version: 0, timestamp: 1_700_000_000_000, counter: 5 };
        assert_eq!(dv.to_json(), br#"{"counter":5,"stateVersion":0,"timestamp":1700000000000}"#);
        assert_eq!(DataVersion::parse(&dv.to_json()).unwrap(), dv);
        let old = DataVersion::parse(br#"{"counter":"5","timestamp":1700000000000}"#).unwrap();
        assert_eq!(old, dv);
        assert_ne!(old, DataVersion { counter: 6, ..dv });
    }
}
