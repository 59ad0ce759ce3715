//! For tests, benches and the load generator, not used by the server: what a broker sends, built the way a
//! 5.x broker builds it (REGISTER_BROKER bodies, JSON and compressed), and a decoded registration; the
//! requests and frames of `wire`; the server in the test's own runtime (`server`). The one home of what
//! more than one of the workspace's crates needs (tests/common builds on it).

pub mod client_headers;
pub mod reply;
pub mod server;
pub mod wire;

use crate::protocol::{DataVersion, RegisterBrokerBody, TopicConfig};
use crate::route::BrokerRegistration;

/// A 5.x broker's registration with no HA address, zone, own heartbeat timeout or acting master, received
/// now on connection 1.
pub fn registration(
    cluster: &str,
    broker_name: &str,
    broker_id: i64,
    broker_addr: &str,
    body: RegisterBrokerBody,
) -> BrokerRegistration {
    BrokerRegistration {
        cluster: cluster.into(),
        broker_addr: broker_addr.into(),
        broker_name: broker_name.into(),
        broker_id,
        ha_server_addr: "".into(),
        zone_name: None,
        heartbeat_timeout: None,
        enable_acting_master: Some(false),
        body,
        conn_id: 1,
        now: tokio::time::Instant::now(),
    }
}

/// The JSON RegisterBrokerBody a 5.x broker sends (no filter servers, no static topics).
pub fn register_body_json(data_version: &DataVersion, topics: &[TopicConfig]) -> Vec<u8> {
    use crate::protocol::json::{self, JsonStyle};
    let dv = data_version.to_json();
    let mut out = Vec::with_capacity(256 + topics.len() * 200);
    out.extend_from_slice(b"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{\"dataVersion\":");
    out.extend_from_slice(&dv);
    out.extend_from_slice(b",\"mappingDataVersion\":");
    out.extend_from_slice(&dv);
    out.extend_from_slice(b",\"topicConfigTable\":{");
    for (i, t) in topics.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let name = t.topic_name.as_deref().unwrap_or("");
        json::write_key(&mut out, name);
        out.extend_from_slice(b"{\"attributes\":{},\"order\":false,\"perm\":");
        json::write_int(&mut out, t.perm as i64);
        out.extend_from_slice(b",\"readQueueNums\":");
        json::write_int(&mut out, t.read_queue_nums as i64);
        out.extend_from_slice(b",\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":");
        json::write_str(&mut out, name, JsonStyle::Fastjson);
        out.extend_from_slice(b",\"topicSysFlag\":");
        json::write_int(&mut out, t.topic_sys_flag as i64);
        out.extend_from_slice(b",\"writeQueueNums\":");
        json::write_int(&mut out, t.write_queue_nums as i64);
        out.push(b'}');
    }
    out.extend_from_slice(b"},\"topicQueueMappingDetailMap\":{},\"topicQueueMappingInfoMap\":{}}}");
    out
}

/// The compressed RegisterBrokerBody (`compressedRegister=true`; zlib level 9, like the broker).
pub fn register_body_compressed(data_version: &DataVersion, topics: &[TopicConfig], filters: &[String]) -> Vec<u8> {
    use std::io::Write;
    let mut raw = Vec::new();
    let dv = data_version.to_json();
    raw.extend_from_slice(&(dv.len() as i32).to_be_bytes());
    raw.extend_from_slice(&dv);
    raw.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        let text = format!(
            "{} {} {} {} SINGLE_TAG {{}}",
            t.topic_name.as_deref().unwrap_or(""),
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm
        );
        raw.extend_from_slice(&(text.len() as i32).to_be_bytes());
        raw.extend_from_slice(text.as_bytes());
    }
    let f = serde_json::to_vec(filters).unwrap_or_else(|_| b"[]".to_vec());
    raw.extend_from_slice(&(f.len() as i32).to_be_bytes());
    raw.extend_from_slice(&f);
    raw.extend_from_slice(&0i32.to_be_bytes());
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(&raw);
    enc.finish().unwrap_or_default()
}
