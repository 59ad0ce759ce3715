//! The body of REGISTER_BROKER: a broker's topic configs, DataVersion and filter servers.
//!
//! Three shapes arrive: RegisterBrokerBody JSON (brokers ≥ 3.0.11), a bare TopicConfigSerializeWrapper JSON
//! (older brokers), and the zlib-compressed binary RegisterBrokerBody (§2.4.1 of the protocol notes).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::data_version::DataVersion;
use super::lenient;
use super::static_topic::TopicQueueMappingInfo;

/// Inflated registration bodies larger than this are refused (a zlib bomb must not exhaust memory).
pub const MAX_INFLATED_BODY: u64 = 64 * 1024 * 1024;

/// The parts of a broker's `TopicConfig` the NameServer uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub topic_name: Option<String>,
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::i32_or_zero")]
    pub read_queue_nums: i32,
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::i32_or_zero")]
    pub write_queue_nums: i32,
    #[serde(default = "default_perm", deserialize_with = "lenient::i32_or_zero")]
    pub perm: i32,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub topic_sys_flag: i32,
}

impl TopicConfig {
    #[cfg(any(test, feature = "testing"))]
    /// A topic config as a broker sends it; `topicSysFlag` 0.
    pub fn new(name: impl Into<String>, read_queue_nums: i32, write_queue_nums: i32, perm: i32) -> Self {
        TopicConfig { topic_name: Some(name.into()), read_queue_nums, write_queue_nums, perm, topic_sys_flag: 0 }
    }
}

/// `TopicConfig.defaultReadQueueNums` / `defaultWriteQueueNums`.
fn default_queue_nums() -> i32 {
    16
}

/// `PERM_READ | PERM_WRITE`.
fn default_perm() -> i32 {
    6
}

/// What a registration carries, whatever shape it came in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterBrokerBody {
    pub data_version: DataVersion,
    pub topic_configs: Vec<TopicConfig>,
    /// `None` leaves the broker's filter servers as they are; an empty list clears them.
    pub filter_server_list: Option<Vec<String>>,
    /// Static-topic mappings: (topic, this broker's share of it).
    pub topic_queue_mappings: Vec<(String, TopicQueueMappingInfo)>,
}

/// A REGISTER_BROKER body as it arrived, with what its header says about it. Decoding a whole topic table
/// takes tens of milliseconds at 100,000 topics, so it is left to the route writer, off the threads that
/// answer lookups.
#[derive(Debug, Clone)]
pub struct ReceivedBody {
    pub bytes: bytes::Bytes,
    /// The `compressed` header flag.
    pub compressed: bool,
    /// The request's `version`: bodies of brokers older than 3.0.11 are a bare TopicConfigSerializeWrapper.
    pub version: i32,
    /// `bodyCrc32`: CRC-32 of the bytes with the top bit cleared; 0 means unchecked.
    pub crc32: i32,
}

impl ReceivedBody {
    /// Checks the CRC, then decodes; the bytes are freed as soon as they are decoded.
    pub fn decode(self) -> Result<RegisterBrokerBody, BodyError> {
        if self.crc32 != 0 && (crc32fast::hash(&self.bytes) & 0x7FFF_FFFF) as i32 != self.crc32 {
            return Err(BodyError::CrcMismatch);
        }
        RegisterBrokerBody::decode(&self.bytes, self.compressed, self.version)
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    /// Java's remark.
    #[error("crc32 not match")]
    CrcMismatch,
    #[error("invalid registration body JSON: {0}")]
    Json(String),
    #[error("invalid compressed registration body: {0}")]
    Compressed(String),
    #[error("compressed registration body inflates beyond {MAX_INFLATED_BODY} bytes")]
    TooLarge,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WrapperJson {
    #[serde(default)]
    data_version: Option<DataVersion>,
    #[serde(default, deserialize_with = "topic_config_table")]
    topic_config_table: Vec<TopicConfig>,
    #[serde(default)]
    topic_queue_mapping_info_map: Option<BTreeMap<String, TopicQueueMappingInfo>>,
}

impl WrapperJson {
    fn into_body(self, filter_server_list: Option<Vec<String>>) -> RegisterBrokerBody {
        RegisterBrokerBody {
            data_version: self.data_version.unwrap_or_default(),
            topic_configs: self.topic_config_table,
            filter_server_list,
            topic_queue_mappings: self.topic_queue_mapping_info_map.unwrap_or_default().into_iter().collect(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BodyJson {
    #[serde(default)]
    topic_config_serialize_wrapper: Option<WrapperJson>,
    #[serde(default)]
    filter_server_list: Option<Vec<String>>,
}

/// Reads the `topicConfigTable` map straight into a list: the keys are ignored, as Java takes the name from
/// the value.
fn topic_config_table<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TopicConfig>, D::Error> {
    struct TableVisitor;
    impl<'de> Visitor<'de> for TableVisitor {
        type Value = Vec<TopicConfig>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of topic configs")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1 << 16));
            while let Some((_, tc)) = map.next_entry::<serde::de::IgnoredAny, TopicConfig>()? {
                out.push(tc);
            }
            Ok(out)
        }
    }
    d.deserialize_any(TableVisitor)
}

impl RegisterBrokerBody {
    /// Decodes a body as Java would for a request of `version` with the `compressed` header flag.
    pub fn decode(body: &[u8], compressed: bool, version: i32) -> Result<Self, BodyError> {
        if body.is_empty() {
            return Ok(Self::default());
        }
        if version < super::codes::version::V3_0_11 {
            return parse_wrapper_json(body).map(|w| w.into_body(None));
        }
        if compressed {
            return decode_compressed(body, version);
        }
        match parse_body_json(body) {
            Ok(b) => Ok(b),
            // 5.x brokers deflate the body with `compressedRegister=true` but never set the flag: accept zlib.
            Err(e) if body.first() == Some(&0x78) => decode_compressed(body, version).map_err(|_| e),
            Err(e) => Err(e),
        }
    }
}

fn parse_wrapper_json(body: &[u8]) -> Result<WrapperJson, BodyError> {
    lenient::from_fastjson_slice(body).map_err(|e| BodyError::Json(e.to_string()))
}

fn parse_body_json(body: &[u8]) -> Result<RegisterBrokerBody, BodyError> {
    let b: BodyJson = lenient::from_fastjson_slice(body).map_err(|e| BodyError::Json(e.to_string()))?;
    Ok(b.topic_config_serialize_wrapper.unwrap_or_default().into_body(b.filter_server_list))
}

struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn int(&mut self, what: &str) -> Result<i32, BodyError> {
        if self.data.len() < 4 {
            return Err(BodyError::Compressed(format!("truncated at {what}")));
        }
        let (head, rest) = self.data.split_at(4);
        self.data = rest;
        Ok(i32::from_be_bytes([head[0], head[1], head[2], head[3]]))
    }

    fn chunk(&mut self, what: &str) -> Result<&'a [u8], BodyError> {
        let len = self.int(what)?;
        if len < 0 || len as usize > self.data.len() {
            return Err(BodyError::Compressed(format!("{what} length {len} out of bounds")));
        }
        let (head, rest) = self.data.split_at(len as usize);
        self.data = rest;
        Ok(head)
    }
}

fn decode_compressed(body: &[u8], version: i32) -> Result<RegisterBrokerBody, BodyError> {
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(body)
        .take(MAX_INFLATED_BODY + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| BodyError::Compressed(e.to_string()))?;
    if inflated.len() as u64 > MAX_INFLATED_BODY {
        return Err(BodyError::TooLarge);
    }
    let mut cur = Cursor { data: &inflated };
    let data_version = DataVersion::parse(cur.chunk("dataVersion")?)
        .map_err(|e| BodyError::Compressed(format!("dataVersion: {e}")))?;
    let count = cur.int("topic count")?;
    if count < 0 {
        return Err(BodyError::Compressed(format!("negative topic count {count}")));
    }
    let mut topic_configs = Vec::with_capacity((count as usize).min(cur.data.len() / 4));
    for _ in 0..count {
        let text = std::str::from_utf8(cur.chunk("topic config")?)
            .map_err(|_| BodyError::Compressed("topic config is not UTF-8".into()))?;
        topic_configs.push(parse_topic_config_text(text)?);
    }
    let filters: Vec<String> = serde_json::from_slice(cur.chunk("filter server list")?)
        .map_err(|e| BodyError::Compressed(format!("filter server list: {e}")))?;
    let mut topic_queue_mappings = Vec::new();
    if version >= super::codes::version::V5_0_0 && !cur.data.is_empty() {
        let count = cur.int("mapping count")?;
        for _ in 0..count.max(0) {
            let info: TopicQueueMappingInfo = lenient::from_fastjson_slice(cur.chunk("mapping")?)
                .map_err(|e| BodyError::Compressed(format!("topic queue mapping: {e}")))?;
            if let Some(topic) = info.topic.clone() {
                topic_queue_mappings.push((topic, info));
            }
        }
    }
    Ok(RegisterBrokerBody { data_version, topic_configs, filter_server_list: Some(filters), topic_queue_mappings })
}

/// `name read write perm filterType [attributes]`, split on single spaces (`TopicConfig.decode`).
/// `topicSysFlag` is not carried in this form and reads as 0.
fn parse_topic_config_text(text: &str) -> Result<TopicConfig, BodyError> {
    let fields: Vec<&str> = text.split(' ').collect();
    if fields.len() < 5 {
        return Err(BodyError::Compressed(format!("topic config {text:?} has fewer than five fields")));
    }
    let int = |s: &str| {
        lenient::parse_java_long(s)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| BodyError::Compressed(format!("topic config {text:?}: {s:?} is not an int")))
    };
    Ok(TopicConfig {
        topic_name: Some(fields[0].to_string()),
        read_queue_nums: int(fields[1])?,
        write_queue_nums: int(fields[2])?,
        perm: int(fields[3])?,
        topic_sys_flag: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_body_from_a_5x_broker() {
        let body = br#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}"#;
        let b = RegisterBrokerBody::decode(body, false, 479).unwrap();
        assert_eq!(b.data_version.timestamp, 1_700_000_000_000);
        assert_eq!(b.filter_server_list, Some(vec![]));
        assert_eq!(b.topic_configs.len(), 1);
        assert_eq!(b.topic_configs[0].topic_name.as_deref(), Some("TopicTest"));
        assert_eq!((b.topic_configs[0].read_queue_nums, b.topic_configs[0].perm), (4, 6));
    }

    #[test]
    fn bare_wrapper_for_old_versions() {
        let body =
            br#"{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"T":{"topicName":"T"}}}"#;
        let b = RegisterBrokerBody::decode(body, false, 0).unwrap();
        assert_eq!(b.data_version.counter, 3);
        assert_eq!(b.topic_configs[0].read_queue_nums, 16);
        assert_eq!(b.filter_server_list, None);
    }

    /// Test vector of protocol.md §2.4.1, made with Python's `zlib.compress(raw, 9)` from the inflated bytes
    /// listed there: 97 bytes, masked CRC 164289492.
    const VECTOR_HEX: &str = "78da636060b0a8564ace2fcd2b492d52b232d4512a2e492c490d4b2d2acecccf53b232d0512ac9cc4d050ae61600a5cd0d10a09681818111886543f20b329343806a144c80d04c21d8d3cfddc7353ec4d15da11aa488293a164832000052771b61";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn topic_test() -> TopicConfig {
        TopicConfig::new("TopicTest", 4, 4, 6)
    }

    #[test]
    fn compressed_test_vector() {
        let body = unhex(VECTOR_HEX);
        assert_eq!(body.len(), 97);
        assert_eq!(crc32fast::hash(&body) & 0x7FFF_FFFF, 164_289_492);
        let dv = DataVersion { counter: 1, state_version: 0, timestamp: 1_700_000_000_000 };
        let decoded = RegisterBrokerBody::decode(&body, true, 479).unwrap();
        assert_eq!(decoded.data_version, dv);
        assert_eq!(decoded.topic_configs, vec![topic_test()]);
        assert_eq!(decoded.filter_server_list, Some(vec![]));
        // The same bytes sent with `compressed=false`, as 5.x brokers do, are still understood.
        assert_eq!(RegisterBrokerBody::decode(&body, false, 479).unwrap().topic_configs, vec![topic_test()]);
    }

    #[test]
    fn json_encoder_round_trips() {
        let dv = DataVersion { counter: 7, state_version: 2, timestamp: 5 };
        let topics = vec![topic_test(), TopicConfig { topic_sys_flag: 3, ..TopicConfig::new("a\"b", 1, 2, 4) }];
        let decoded =
            RegisterBrokerBody::decode(&crate::testing::register_body_json(&dv, &topics), false, 479).unwrap();
        assert_eq!((decoded.data_version, decoded.topic_configs), (dv, topics));
        assert_eq!(decoded.filter_server_list, Some(vec![]));
    }

    #[test]
    fn compressed_encoder_round_trips() {
        let dv = DataVersion { counter: 7, state_version: 2, timestamp: 5 };
        let body = crate::testing::register_body_compressed(&dv, &[topic_test()], &["10.0.0.1:30000".into()]);
        let decoded = RegisterBrokerBody::decode(&body, true, 479).unwrap();
        assert_eq!(decoded.data_version, dv);
        assert_eq!(decoded.topic_configs, vec![topic_test()]);
        assert_eq!(decoded.filter_server_list, Some(vec!["10.0.0.1:30000".to_string()]));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(RegisterBrokerBody::decode(b"{nope", false, 479).is_err());
        assert!(RegisterBrokerBody::decode(b"\x78\x9c\x00", true, 479).is_err());
        assert!(parse_topic_config_text("a 1 2").is_err());
        assert!(parse_topic_config_text("a x 2 6 SINGLE_TAG").is_err());
    }
}
