//! The body of REGISTER_BROKER: a broker's topic configs, DataVersion and filter servers.
//!
//! Three shapes arrive: RegisterBrokerBody JSON (brokers ≥ 3.0.11), a bare TopicConfigSerializeWrapper JSON
//! (older brokers), and the zlib-compressed binary RegisterBrokerBody (§2.4.1 of the protocol notes).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::data_version::DataVersion;
use super::lenient;
use super::meter::{self, ChargedString, OverAllowance};
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
/// takes tens of milliseconds at 100,000 topics: its handler runs it on the blocking pool, off the threads
/// that answer lookups, within the room its request holds in the memory budget.
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
    /// Checks the CRC, then decodes, building at most `allowance` bytes (see `meter`); returns the body and
    /// the bytes it built, which it keeps until it is applied.
    pub fn decode_within(&self, allowance: usize) -> Result<(RegisterBrokerBody, usize), BodyError> {
        if self.crc32 != 0 && (crc32fast::hash(&self.bytes) & 0x7FFF_FFFF) as i32 != self.crc32 {
            return Err(BodyError::CrcMismatch);
        }
        let (decoded, used) =
            meter::metered(allowance, || RegisterBrokerBody::decode(&self.bytes, self.compressed, self.version))?;
        Ok((decoded?, used))
    }

    /// Whether the body is zlib (5.x brokers deflate with `compressedRegister` but may not set the flag).
    pub fn is_compressed(&self) -> bool {
        self.compressed || self.bytes.first() == Some(&0x78)
    }

    /// What decoding a JSON body is first allowed to build: a Java broker's table parses to under 3/5 of
    /// its size (`java_bodies_decode_within_their_first_allowance`). One that needs more is decoded again
    /// with more room, if there is some.
    pub fn json_allowance(&self) -> usize {
        (self.bytes.len() / 4 * 3).max(16 * 1024)
    }

    /// What decoding a compressed body builds at most, read off its inflated items without keeping any
    /// (no memory but the inflater's): how much a body inflates cannot be told from its size (a table of
    /// similar names inflates 30-fold, a bomb a thousandfold). Counting stops as soon as the need passes
    /// `most`, and the answer is then only some figure over it: what refusing a body costs is an inflate
    /// of at most what `most` would build, not of the whole body (a bomb that announces more topic configs
    /// than `most` holds is refused after its first bytes). The count's own buffers (the inflater, the item
    /// being read) are held to `most` by the meter: an item announced larger is never allocated.
    pub fn compressed_need(&self, most: usize) -> Result<usize, BodyError> {
        match meter::metered(most, || compressed_need(&self.bytes, self.version, most)) {
            Ok((need, _)) => need,
            Err(_) => Ok(most.saturating_add(1)),
        }
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
    #[error(transparent)]
    OverAllowance(#[from] OverAllowance),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WrapperJson {
    #[serde(default)]
    data_version: Option<DataVersion>,
    #[serde(default, deserialize_with = "topic_config_table")]
    topic_config_table: Vec<TopicConfig>,
    #[serde(default, deserialize_with = "meter::opt_btree")]
    topic_queue_mapping_info_map: Option<BTreeMap<ChargedString, TopicQueueMappingInfo>>,
}

impl WrapperJson {
    fn into_body(self, filter_server_list: Option<Vec<String>>) -> RegisterBrokerBody {
        RegisterBrokerBody {
            data_version: self.data_version.unwrap_or_default(),
            topic_configs: self.topic_config_table,
            filter_server_list,
            topic_queue_mappings: self
                .topic_queue_mapping_info_map
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, info)| (topic.0, info))
                .collect(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BodyJson {
    #[serde(default)]
    topic_config_serialize_wrapper: Option<WrapperJson>,
    #[serde(default, deserialize_with = "meter::opt_strings")]
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
            let mut out = Vec::new();
            meter::reserve_exact(&mut out, meter::take_len_hint()).map_err(serde::de::Error::custom)?;
            while let Some((_, tc)) = map.next_entry::<serde::de::IgnoredAny, TopicConfig>()? {
                meter::reserve_one(&mut out).map_err(serde::de::Error::custom)?;
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
        if compressed || body.first() == Some(&0x78) {
            return Self::decode_any(body, compressed, version);
        }
        // serde_json unescapes a string into a scratch buffer, which grows to the longest one.
        let scratch = meter::alloc_cost(meter::longest_quoted_run(body));
        meter::charge(scratch)?;
        // Java writes every topic config's `topicName`: the table's length, for a list of the right size.
        meter::set_len_hint(memchr::memmem::find_iter(body, b"\"topicName\"").count());
        let decoded = Self::decode_any(body, compressed, version);
        meter::release(scratch);
        decoded
    }

    fn decode_any(body: &[u8], compressed: bool, version: i32) -> Result<Self, BodyError> {
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

/// The inflated body, read item by item (`int32 length | bytes`): only the item being read is held, never
/// the whole inflated body.
struct Inflated<'a> {
    reader: BufReader<std::io::Take<flate2::read::ZlibDecoder<&'a [u8]>>>,
    item: Vec<u8>,
}

/// What an inflater holds while it runs: its 32 KiB window, its state and the reader's buffer.
const INFLATER_COST: usize = 64 * 1024;

impl<'a> Inflated<'a> {
    fn new(body: &'a [u8]) -> Result<Self, BodyError> {
        meter::charge(INFLATER_COST)?;
        let reader = BufReader::new(flate2::read::ZlibDecoder::new(body).take(MAX_INFLATED_BODY + 1));
        Ok(Inflated { reader, item: Vec::new() })
    }

    fn read(&mut self, n: usize, what: &str) -> Result<(), BodyError> {
        if n > self.item.capacity() {
            meter::charge(meter::alloc_cost(n))?;
            meter::release(meter::alloc_cost(self.item.capacity()));
            self.item = Vec::with_capacity(n);
        }
        self.item.clear();
        let got = (&mut self.reader).take(n as u64).read_to_end(&mut self.item).map_err(inflate_error)?;
        if got < n {
            return Err(self.truncated(what));
        }
        Ok(())
    }

    /// Truncation is the inflated body's end, or the inflate limit cut it short.
    fn truncated(&mut self, what: &str) -> BodyError {
        if self.reader.get_ref().limit() == 0 {
            return BodyError::TooLarge;
        }
        BodyError::Compressed(format!("truncated at {what}"))
    }

    fn int(&mut self, what: &str) -> Result<i32, BodyError> {
        self.read(4, what)?;
        Ok(i32::from_be_bytes([self.item[0], self.item[1], self.item[2], self.item[3]]))
    }

    fn chunk(&mut self, what: &str) -> Result<&[u8], BodyError> {
        let len = self.int(what)?;
        let len =
            usize::try_from(len).map_err(|_| BodyError::Compressed(format!("{what} length {len} out of bounds")))?;
        if len as u64 > MAX_INFLATED_BODY {
            return Err(BodyError::TooLarge);
        }
        self.read(len, what)?;
        Ok(&self.item)
    }

    fn at_end(&mut self) -> Result<bool, BodyError> {
        Ok(self.reader.fill_buf().map_err(inflate_error)?.is_empty())
    }

    /// Reads what is left, to refuse a body that inflates beyond the limit after its last item, as a body
    /// inflated whole would be; then the inflater and the item buffer are freed.
    fn finish(mut self) -> Result<(), BodyError> {
        std::io::copy(&mut self.reader, &mut std::io::sink()).map_err(inflate_error)?;
        meter::release(INFLATER_COST + meter::alloc_cost(self.item.capacity()));
        if self.reader.get_ref().limit() == 0 { Err(BodyError::TooLarge) } else { Ok(()) }
    }
}

fn inflate_error(e: std::io::Error) -> BodyError {
    BodyError::Compressed(e.to_string())
}

/// The most a vector of `n` elements of `size` bytes holds while it grows to them (old and new buffer).
fn vec_peak(n: usize, size: usize) -> usize {
    let cap = n.next_power_of_two().max(4);
    meter::alloc_cost(cap * size) + meter::alloc_cost(cap / 2 * size)
}

/// What `decode_compressed` builds at most (the module's meter holds it to this), or a figure over `most`
/// once the need is known to pass it: see [`ReceivedBody::compressed_need`].
fn compressed_need(body: &[u8], version: i32, most: usize) -> Result<usize, BodyError> {
    let mut inflated = Inflated::new(body)?;
    inflated.chunk("dataVersion")?;
    let count = inflated.int("topic count")?;
    if count < 0 {
        return Err(BodyError::Compressed(format!("negative topic count {count}")));
    }
    // What is counted so far; it only grows, so once over `most` the whole body's need is too.
    let (mut topics, mut names, mut lists, mut mappings) = (0usize, 0usize, 0usize, 0usize);
    let need = |inflated: &Inflated, topics, names, lists, mappings| {
        INFLATER_COST
            + meter::alloc_cost(inflated.item.capacity())
            + vec_peak(topics, size_of::<TopicConfig>())
            + names
            + lists
            + vec_peak(mappings, size_of::<(String, TopicQueueMappingInfo)>())
    };
    // Every topic config read is kept, so the count alone may tell: a body that holds as many needs more,
    // and one cut short of them is invalid anyway.
    let announced = need(&inflated, count as usize, 0, 0, 0);
    if announced > most {
        return Ok(announced);
    }
    for _ in 0..count {
        let text = inflated.chunk("topic config")?;
        names += meter::alloc_cost(text.iter().position(|b| *b == b' ').unwrap_or(text.len()));
        topics += 1;
        let so_far = need(&inflated, topics, names, 0, 0);
        if so_far > most {
            return Ok(so_far);
        }
    }
    // A list of strings, or one mapping's text, builds at most 16 times its size (an empty string is a
    // 24-byte slot for 3 bytes, in a vector that may be twice as long as needed).
    lists += 16 * inflated.chunk("filter server list")?.len() + 64;
    if version >= super::codes::version::V5_0_0 && !inflated.at_end()? {
        let count = inflated.int("mapping count")?;
        for _ in 0..count.max(0) {
            lists += 16 * inflated.chunk("mapping")?.len() + 64;
            mappings += 1;
            let so_far = need(&inflated, topics, names, lists, mappings);
            if so_far > most {
                return Ok(so_far);
            }
        }
    }
    let total = need(&inflated, topics, names, lists, mappings);
    inflated.finish()?;
    Ok(total)
}

fn decode_compressed(body: &[u8], version: i32) -> Result<RegisterBrokerBody, BodyError> {
    let mut inflated = Inflated::new(body)?;
    let data_version = DataVersion::parse(inflated.chunk("dataVersion")?)
        .map_err(|e| BodyError::Compressed(format!("dataVersion: {e}")))?;
    let count = inflated.int("topic count")?;
    if count < 0 {
        return Err(BodyError::Compressed(format!("negative topic count {count}")));
    }
    let mut topic_configs = Vec::new();
    for _ in 0..count {
        let text = std::str::from_utf8(inflated.chunk("topic config")?)
            .map_err(|_| BodyError::Compressed("topic config is not UTF-8".into()))?;
        let config = parse_topic_config_text(text)?;
        meter::reserve_one(&mut topic_configs)?;
        topic_configs.push(config);
    }
    let filters = inflated.chunk("filter server list")?;
    meter::charge(meter::alloc_cost(meter::longest_quoted_run(filters)))?;
    let filters: FilterServers =
        serde_json::from_slice(filters).map_err(|e| BodyError::Compressed(format!("filter server list: {e}")))?;
    let mut topic_queue_mappings = Vec::new();
    if version >= super::codes::version::V5_0_0 && !inflated.at_end()? {
        let count = inflated.int("mapping count")?;
        for _ in 0..count.max(0) {
            let info: TopicQueueMappingInfo = lenient::from_fastjson_slice(inflated.chunk("mapping")?)
                .map_err(|e| BodyError::Compressed(format!("topic queue mapping: {e}")))?;
            if let Some(topic) = info.topic.clone() {
                meter::reserve_one(&mut topic_queue_mappings)?;
                meter::charge(meter::alloc_cost(topic.len()))?;
                topic_queue_mappings.push((topic, info));
            }
        }
    }
    inflated.finish()?;
    Ok(RegisterBrokerBody { data_version, topic_configs, filter_server_list: Some(filters.0), topic_queue_mappings })
}

/// A filter server list, its strings charged.
struct FilterServers(Vec<String>);

impl<'de> Deserialize<'de> for FilterServers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        meter::strings(d).map(FilterServers)
    }
}

/// `name read write perm filterType [attributes]`, split on single spaces (`TopicConfig.decode`).
/// `topicSysFlag` is not carried in this form and reads as 0.
fn parse_topic_config_text(text: &str) -> Result<TopicConfig, BodyError> {
    let fields: Vec<&str> = text.splitn(6, ' ').collect();
    if fields.len() < 5 {
        let text = crate::error::shown(text, 256);
        return Err(BodyError::Compressed(format!("topic config {text:?} has fewer than five fields")));
    }
    let int = |s: &str| {
        lenient::parse_java_long(s).and_then(|v| i32::try_from(v).ok()).ok_or_else(|| {
            let (text, s) = (crate::error::shown(text, 256), crate::error::shown(s, 64));
            BodyError::Compressed(format!("topic config {text:?}: {s:?} is not an int"))
        })
    };
    meter::charge(meter::alloc_cost(fields[0].len()))?;
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

    /// A Java broker's body, JSON or compressed, of any size and topic names short or long, decodes within
    /// the allowance its request is first given (what the memory budget reserves for it).
    #[test]
    fn java_bodies_decode_within_their_first_allowance() {
        let dv = DataVersion { counter: 7, state_version: 0, timestamp: 1_700_000_000_000 };
        for (count, name) in [(1, "t"), (30, "t"), (1000, "t"), (100_000, "t"), (100_000, "topic-with-a-longer-name")] {
            let topics: Vec<TopicConfig> =
                (0..count).map(|i| TopicConfig::new(format!("{name}{i}"), 8, 8, 6)).collect();
            for compressed in [false, true] {
                let bytes = if compressed {
                    crate::testing::register_body_compressed(&dv, &topics, &[])
                } else {
                    crate::testing::register_body_json(&dv, &topics)
                };
                let received = ReceivedBody { bytes: bytes.into(), compressed, version: 479, crc32: 0 };
                let allowance = if compressed {
                    received.compressed_need(usize::MAX).expect("a need")
                } else {
                    received.json_allowance()
                };
                let (body, held) = received.decode_within(allowance).expect("decoded within its first allowance");
                assert_eq!(body.topic_configs.len(), count);
                println!(
                    "{count} x {name:?} compressed={compressed}: {} bytes, kept {held}, allowed {allowance}",
                    received.bytes.len()
                );
            }
        }
    }

    /// A body that builds more than it is allowed is stopped, whatever its shape: a zlib bomb, tiny topic
    /// configs, an array where a topic name should be.
    #[test]
    fn hostile_bodies_are_stopped_at_their_allowance() {
        let dv = DataVersion::default();
        let tiny: Vec<TopicConfig> = (0..200_000).map(|i| TopicConfig::new(format!("{i}"), 1, 1, 6)).collect();
        let bomb = crate::testing::register_body_compressed(&dv, &tiny, &[]);
        let mut array = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{"topicName":["#.to_vec();
        array.extend(std::iter::repeat_n(&b"1,"[..], 100_000).flatten());
        array.extend_from_slice(br#"1]}}}}"#);
        let mut nameless = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"#.to_vec();
        nameless.extend((0..100_000).flat_map(|i| format!(r#""{i}":{{}},"#).into_bytes()));
        nameless.extend_from_slice(br#""x":{}}}}"#);
        for (what, bytes, compressed) in [("bomb", bomb, true), ("array", array, false), ("nameless", nameless, false)]
        {
            let received = ReceivedBody { bytes: bytes.into(), compressed, version: 479, crc32: 0 };
            let allowance = if compressed { 24 * received.bytes.len() } else { received.json_allowance() };
            let stopped = received.decode_within(allowance);
            assert!(matches!(stopped, Err(BodyError::OverAllowance(_))), "{what}: {stopped:?}");
            if compressed {
                let need = received.compressed_need(usize::MAX).expect("a need");
                assert!(received.decode_within(need).is_ok(), "{what}: decoded within its need of {need}");
            }
            // Given what it needs, it decodes (the meter counted what it builds, not more).
            let (_, held) = received.decode_within(64 << 20).expect("decoded with room enough");
            println!("{what}: {} bytes, kept {held}, first allowed {allowance}", received.bytes.len());
        }
    }

    /// Refusing a body costs what counting up to the limit costs, not an inflate of the whole body: one
    /// that announces more topic configs than the limit holds is refused on its count, and one whose
    /// configs pass the limit as they are read is refused there; one whose first item is announced longer
    /// than the limit is refused before a buffer for it is allocated (it held 60 MB, outside the requests
    /// pool, before the count was metered). None is read to its end (all are cut short here, which a read
    /// to the end would find and call invalid).
    #[test]
    fn a_need_over_the_most_is_told_without_reading_on() {
        use std::io::Write as _;
        let most = 32 << 20;
        let cut_short = |count: i32, items: usize, name: &str| {
            let dv = br#"{"counter":1,"stateVersion":0,"timestamp":1}"#;
            let mut raw = (dv.len() as i32).to_be_bytes().to_vec();
            raw.extend_from_slice(dv);
            raw.extend_from_slice(&count.to_be_bytes());
            let item = format!("{name} 1 1 6 SINGLE_TAG");
            for _ in 0..items {
                raw.extend_from_slice(&(item.len() as i32).to_be_bytes());
                raw.extend_from_slice(item.as_bytes());
            }
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&raw).unwrap();
            ReceivedBody { bytes: z.finish().unwrap().into(), compressed: true, version: 479, crc32: 0 }
        };
        let announced = cut_short(2_500_000, 0, "t");
        let long_names = cut_short(100_000, 99_999, &"n".repeat(1000));
        // A dataVersion announced 60 MB long and never sent: counted, its buffer would have been allocated.
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&60_000_000i32.to_be_bytes()).unwrap();
        let long_item = ReceivedBody { bytes: z.finish().unwrap().into(), compressed: true, version: 479, crc32: 0 };
        for (what, body) in [("announced", announced), ("long names", long_names), ("long item", long_item)] {
            let need = body.compressed_need(most).expect("a need over the most");
            assert!(need > most, "{what}: {need}");
            assert!(body.compressed_need(usize::MAX).is_err(), "{what}: read to its end, it is cut short");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(RegisterBrokerBody::decode(b"{nope", false, 479).is_err());
        assert!(RegisterBrokerBody::decode(b"\x78\x9c\x00", true, 479).is_err());
        assert!(parse_topic_config_text("a 1 2").is_err());
        assert!(parse_topic_config_text("a x 2 6 SINGLE_TAG").is_err());
    }
}
