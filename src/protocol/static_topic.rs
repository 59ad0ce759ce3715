//! `TopicQueueMappingInfo`: a broker's share of a static topic (logical → physical queue ids), carried by
//! registrations and returned in routes as `topicQueueMappingByBroker`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::protocol::json::{self, JsonStyle};
use crate::protocol::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicQueueMappingInfo {
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub topic: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub scope: Option<String>,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub total_queues: i32,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub bname: Option<String>,
    #[serde(default, deserialize_with = "lenient::i64_or_zero")]
    pub epoch: i64,
    #[serde(default, deserialize_with = "lenient::bool_or_false")]
    pub dirty: bool,
    /// Logical queue id → physical queue id.
    #[serde(default, deserialize_with = "crate::protocol::meter::opt_btree")]
    pub curr_id_map: Option<BTreeMap<i32, i32>>,
}

impl TopicQueueMappingInfo {
    /// fastjson's encoding; `currIdMap` keys are bare in fastjson style and quoted in standard style.
    pub fn write_json(&self, out: &mut Vec<u8>, style: JsonStyle) {
        out.push(b'{');
        let mut first = true;
        let mut key = |out: &mut Vec<u8>, name: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            json::write_key(out, name);
        };
        if let Some(b) = &self.bname {
            key(out, "bname");
            json::write_str(out, b, style);
        }
        if let Some(map) = &self.curr_id_map {
            key(out, "currIdMap");
            out.push(b'{');
            for (i, (logical, physical)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_int_key(out, *logical as i64, style);
                json::write_int(out, *physical as i64);
            }
            out.push(b'}');
        }
        key(out, "dirty");
        json::write_bool(out, self.dirty);
        key(out, "epoch");
        json::write_long(out, self.epoch, style);
        if let Some(s) = &self.scope {
            key(out, "scope");
            json::write_str(out, s, style);
        }
        if let Some(t) = &self.topic {
            key(out, "topic");
            json::write_str(out, t, style);
        }
        key(out, "totalQueues");
        json::write_int(out, self.total_queues as i64);
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// protocol.md §3.8, and the standard form of §3.1.
    #[test]
    fn round_trips_fastjson_text() {
        let text = r#"{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}"#;
        let info: TopicQueueMappingInfo = lenient::from_fastjson_slice(text.as_bytes()).unwrap();
        let mut out = Vec::new();
        info.write_json(&mut out, JsonStyle::Fastjson);
        assert_eq!(std::str::from_utf8(&out).unwrap(), text);
        let mut out = Vec::new();
        info.write_json(&mut out, JsonStyle::Standard);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"bname":"broker-a","currIdMap":{"0":0},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}"#
        );
    }
}
