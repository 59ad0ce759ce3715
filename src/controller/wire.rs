//! The controller's requests and replies at the wire: Java 5.3.3's request headers read into
//! [`ControllerRequest`], and each decision written back with the header fields and fastjson bodies
//! (SyncStateSet, ElectMasterResponseBody, BrokerReplicasInfo) a Java broker or mqadmin decodes.

use std::collections::BTreeSet;

use bytes::Bytes;
use serde::Deserialize;

use super::manager::{Body, Decision};
use super::replicas::{BrokerReplicaInfo, SyncStateInfo};
use crate::error::RequestError;
use crate::processor::{bool_field, long_field, required};
use crate::protocol::codes::controller_request as code;
use crate::protocol::json::{JsonStyle, write_bool, write_int, write_int_key, write_key, write_str};
use crate::protocol::lenient;
use crate::remoting::{ExtFields, RemotingCommand};

/// BROKER_HEARTBEAT (904) as a broker in controller mode sends it to every controller node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addr: String,
    pub broker_id: i64,
    pub timeout_millis: Option<i64>,
    pub epoch: Option<i32>,
    pub max_offset: Option<i64>,
    pub confirm_offset: Option<i64>,
    pub election_priority: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerRequest {
    AlterSyncStateSet {
        broker_name: String,
        master_id: i64,
        master_epoch: i32,
        set: BTreeSet<i64>,
        set_epoch: i32,
    },
    ElectMaster {
        cluster: String,
        broker_name: String,
        broker_id: i64,
        designate: bool,
    },
    RegisterBroker {
        cluster: Option<String>,
        broker_name: String,
        broker_id: i64,
        address: String,
    },
    GetReplicaInfo {
        broker_name: String,
    },
    GetMetadata,
    Heartbeat(Heartbeat),
    GetSyncStateData {
        broker_names: Vec<String>,
    },
    CleanBrokerData {
        cluster: String,
        broker_name: String,
        ids: Option<String>,
        clean_living: bool,
    },
    GetNextBrokerId {
        cluster: Option<String>,
        broker_name: String,
    },
    ApplyBrokerId {
        cluster: Option<String>,
        broker_name: String,
        broker_id: i64,
        check_code: String,
    },
    GetConfig,
    /// Java properties text; Java takes an empty body as nothing to change.
    UpdateConfig {
        body: bytes::Bytes,
    },
}

/// Java's SyncStateSet body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SyncStateSetBody {
    #[serde(default)]
    sync_state_set: Option<BTreeSet<i64>>,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    sync_state_set_epoch: i32,
}

fn int_field(req: &RemotingCommand, field: &'static str) -> Result<Option<i32>, RequestError> {
    match long_field(req, field)? {
        None => Ok(None),
        Some(v) => i32::try_from(v).map(Some).map_err(|_| RequestError::InvalidField { field, value: v.to_string() }),
    }
}

fn needed<T>(value: Option<T>, field: &'static str) -> Result<T, RequestError> {
    value.ok_or(RequestError::MissingField(field))
}

fn text(req: &RemotingCommand, field: &'static str) -> Option<String> {
    req.ext(field).map(str::to_string)
}

impl ControllerRequest {
    /// Reads a request; `Ok(None)` for a code the controller does not serve.
    pub fn decode(req: &RemotingCommand) -> Result<Option<ControllerRequest>, RequestError> {
        let decoded = match req.code {
            code::ALTER_SYNC_STATE_SET => alter_sync_state_set(req)?,
            code::ELECT_MASTER => ControllerRequest::ElectMaster {
                cluster: required(req, "clusterName")?.to_string(),
                broker_name: required(req, "brokerName")?.to_string(),
                broker_id: needed(long_field(req, "brokerId")?, "brokerId")?,
                designate: needed(bool_field(req, "designateElect"), "designateElect")?,
            },
            code::REGISTER_BROKER => ControllerRequest::RegisterBroker {
                cluster: text(req, "clusterName"),
                broker_name: required(req, "brokerName")?.to_string(),
                broker_id: needed(long_field(req, "brokerId")?, "brokerId")?,
                address: required(req, "brokerAddress")?.to_string(),
            },
            code::GET_REPLICA_INFO => {
                ControllerRequest::GetReplicaInfo { broker_name: required(req, "brokerName")?.to_string() }
            }
            code::GET_METADATA_INFO => ControllerRequest::GetMetadata,
            crate::protocol::codes::request::BROKER_HEARTBEAT => ControllerRequest::Heartbeat(heartbeat(req)?),
            code::GET_SYNC_STATE_DATA => ControllerRequest::GetSyncStateData { broker_names: broker_names(&req.body)? },
            code::CLEAN_BROKER_DATA => ControllerRequest::CleanBrokerData {
                cluster: text(req, "clusterName").unwrap_or_default(),
                broker_name: required(req, "brokerName")?.to_string(),
                ids: text(req, "brokerControllerIdsToClean"),
                clean_living: bool_field(req, "isCleanLivingBroker").unwrap_or(false),
            },
            code::GET_NEXT_BROKER_ID => ControllerRequest::GetNextBrokerId {
                cluster: text(req, "clusterName"),
                broker_name: required(req, "brokerName")?.to_string(),
            },
            code::APPLY_BROKER_ID => ControllerRequest::ApplyBrokerId {
                cluster: text(req, "clusterName"),
                broker_name: required(req, "brokerName")?.to_string(),
                broker_id: needed(long_field(req, "appliedBrokerId")?, "appliedBrokerId")?,
                check_code: required(req, "registerCheckCode")?.to_string(),
            },
            code::GET_CONTROLLER_CONFIG => ControllerRequest::GetConfig,
            code::UPDATE_CONTROLLER_CONFIG => ControllerRequest::UpdateConfig { body: req.body.clone() },
            _ => return Ok(None),
        };
        Ok(Some(decoded))
    }
}

/// GET_SYNC_STATE_DATA's body is read only up to this: 10,000 names (the most groups the state holds) of
/// a hundred bytes each.
pub const MAX_NAMES_BODY: usize = 1 << 20;

/// GET_SYNC_STATE_DATA's names, each once, in the order asked; at most [`replicas::MAX_GROUPS`]. No names
/// (no body, `[]` or `null`) is Java's SYSTEM_ERROR "not set any response code", on any node: its processor
/// answers only a non-empty list, before it asks whether it leads.
fn broker_names(body: &[u8]) -> Result<Vec<String>, RequestError> {
    let none = || RequestError::InvalidBody("not set any response code".into());
    if body.is_empty() || body.trim_ascii() == b"null" {
        return Err(none());
    }
    if body.len() > MAX_NAMES_BODY {
        return Err(RequestError::InvalidBody(format!("the broker names: over {MAX_NAMES_BODY} bytes")));
    }
    let names: Vec<String> =
        lenient::from_fastjson_slice(body).map_err(|e| RequestError::InvalidBody(format!("the broker names: {e}")))?;
    if names.is_empty() {
        return Err(none());
    }
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    let unique: Vec<String> = names.into_iter().filter(|n| seen.insert(n.clone())).collect();
    if unique.len() > super::replicas::MAX_GROUPS {
        return Err(RequestError::InvalidBody(format!(
            "{} broker names; the controller holds at most {}",
            unique.len(),
            super::replicas::MAX_GROUPS
        )));
    }
    Ok(unique)
}

fn alter_sync_state_set(req: &RemotingCommand) -> Result<ControllerRequest, RequestError> {
    let body: SyncStateSetBody = lenient::from_fastjson_slice(&req.body)
        .map_err(|e| RequestError::InvalidBody(format!("the SyncStateSet body: {e}")))?;
    Ok(ControllerRequest::AlterSyncStateSet {
        broker_name: required(req, "brokerName")?.to_string(),
        master_id: needed(long_field(req, "masterBrokerId")?, "masterBrokerId")?,
        master_epoch: needed(int_field(req, "masterEpoch")?, "masterEpoch")?,
        set: body.sync_state_set.unwrap_or_default(),
        set_epoch: body.sync_state_set_epoch,
    })
}

fn heartbeat(req: &RemotingCommand) -> Result<Heartbeat, RequestError> {
    Ok(Heartbeat {
        cluster: required(req, "clusterName")?.to_string(),
        broker_name: required(req, "brokerName")?.to_string(),
        broker_addr: required(req, "brokerAddr")?.to_string(),
        broker_id: long_field(req, "brokerId")?
            .ok_or_else(|| RequestError::ControllerInvalidRequest("Heart beat with empty brokerId".into()))?,
        timeout_millis: long_field(req, "heartbeatTimeoutMills")?,
        epoch: int_field(req, "epoch")?,
        max_offset: long_field(req, "maxOffset")?,
        confirm_offset: long_field(req, "confirmOffset")?,
        election_priority: int_field(req, "electionPriority")?,
    })
}

/// The reply to `request` from its decision: Java's response header for the code (attached even when
/// its fields are all null, so `extFields` is `{}`), the remark, and the body.
pub fn reply(request: &ControllerRequest, decision: &Decision) -> RemotingCommand {
    let mut resp = RemotingCommand::response(decision.code, decision.remark.clone());
    let m = &decision.master;
    let mut ext = ExtFields::new();
    let mut put = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            ext.insert(key, v);
        }
    };
    let master = |put: &mut dyn FnMut(&str, Option<String>)| {
        put("masterBrokerId", m.master_broker_id.map(|v| v.to_string()));
        put("masterAddress", m.master_address.clone());
        put("masterEpoch", m.master_epoch.map(|v| v.to_string()));
    };
    let header = match request {
        ControllerRequest::AlterSyncStateSet { .. } => {
            put("newSyncStateSetEpoch", Some(m.sync_state_set_epoch.unwrap_or(0).to_string()));
            true
        }
        ControllerRequest::ElectMaster { .. } => {
            master(&mut put);
            put("syncStateSetEpoch", m.sync_state_set_epoch.map(|v| v.to_string()));
            true
        }
        ControllerRequest::RegisterBroker { cluster, broker_name, .. } => {
            put("clusterName", cluster.clone());
            put("brokerName", Some(broker_name.clone()));
            master(&mut put);
            put("syncStateSetEpoch", m.sync_state_set_epoch.map(|v| v.to_string()));
            true
        }
        ControllerRequest::GetReplicaInfo { .. } => {
            master(&mut put);
            true
        }
        ControllerRequest::GetNextBrokerId { cluster, broker_name } => {
            put("clusterName", cluster.clone());
            put("brokerName", Some(broker_name.clone()));
            put("nextBrokerId", decision.next_broker_id.map(|v| v.to_string()));
            true
        }
        ControllerRequest::ApplyBrokerId { cluster, broker_name, .. } => {
            put("clusterName", cluster.clone());
            put("brokerName", Some(broker_name.clone()));
            true
        }
        _ => false,
    };
    if header {
        resp.ext_fields = Some(ext);
    }
    if let Some(body) = &decision.body {
        resp.body = Bytes::from(encode_body(body));
    }
    resp
}

/// `[1,2]`: a set of broker ids as fastjson writes a `Set<Long>` (small ids hash to themselves, so a
/// HashSet iterates them in order).
fn write_ids(out: &mut Vec<u8>, ids: &BTreeSet<i64>) {
    out.push(b'[');
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_int(out, *id);
    }
    out.push(b']');
}

/// Java's SyncStateSet: `{"syncStateSet":[1],"syncStateSetEpoch":1}`.
pub fn sync_state_set_json(set: &BTreeSet<i64>, epoch: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.push(b'{');
    write_key(&mut out, "syncStateSet");
    write_ids(&mut out, set);
    out.push(b',');
    write_key(&mut out, "syncStateSetEpoch");
    write_int(&mut out, i64::from(epoch));
    out.push(b'}');
    out
}

pub fn encode_body(body: &Body) -> Vec<u8> {
    match body {
        Body::SyncStateSet { set, epoch } => sync_state_set_json(set, *epoch),
        Body::Elected { set, members } => {
            let mut out = Vec::with_capacity(160);
            out.push(b'{');
            if let Some(group) = members {
                write_key(&mut out, "brokerMemberGroup");
                out.push(b'{');
                write_key(&mut out, "brokerAddrs");
                out.push(b'{');
                for (i, (id, addr)) in group.broker_addrs.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_int_key(&mut out, *id, JsonStyle::Fastjson);
                    write_str(&mut out, addr, JsonStyle::Fastjson);
                }
                out.extend_from_slice(b"},");
                write_key(&mut out, "brokerName");
                write_str(&mut out, &group.broker_name, JsonStyle::Fastjson);
                out.push(b',');
                write_key(&mut out, "cluster");
                write_str(&mut out, &group.cluster, JsonStyle::Fastjson);
                out.extend_from_slice(b"},");
            }
            write_key(&mut out, "syncStateSet");
            write_ids(&mut out, set);
            out.push(b'}');
            out
        }
    }
}

/// CONTROLLER_GET_SYNC_STATE_DATA's body, Java's BrokerReplicasInfo: for each named group known, its
/// master and its replicas in and out of the SyncStateSet, each with whether it is alive.
pub fn broker_replicas_info(
    groups: &[(String, BrokerReplicaInfo, SyncStateInfo)],
    alive: &dyn Fn(&str, &str, i64) -> bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"replicasInfoTable\":{");
    let names: Vec<&str> = groups.iter().map(|(name, _, _)| name.as_str()).collect();
    for (i, at) in java_hash_order(&names).into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let (name, replicas, sync) = &groups[at];
        write_key(&mut out, name);
        write_replicas_info(&mut out, name, replicas, sync, alive);
    }
    out.extend_from_slice(b"}}");
    out
}

/// One group of BrokerReplicasInfo's table: Java's BrokerReplicasInfo.ReplicasInfo.
fn write_replicas_info(
    out: &mut Vec<u8>,
    name: &str,
    replicas: &BrokerReplicaInfo,
    sync: &SyncStateInfo,
    alive: &dyn Fn(&str, &str, i64) -> bool,
) {
    let replica = |out: &mut Vec<u8>, id: i64, addr: &str| {
        out.extend_from_slice(b"{\"alive\":");
        write_bool(out, alive(&replicas.cluster, name, id));
        out.push(b',');
        write_key(out, "brokerAddress");
        write_str(out, addr, JsonStyle::Fastjson);
        out.push(b',');
        write_key(out, "brokerId");
        write_int(out, id);
        out.push(b',');
        write_key(out, "brokerName");
        write_str(out, name, JsonStyle::Fastjson);
        out.push(b'}');
    };
    let list = |out: &mut Vec<u8>, in_sync: bool| {
        out.push(b'[');
        let members = replicas.brokers.iter().filter(|(id, _)| sync.sync_state_set.contains(id) == in_sync);
        for (i, (id, entry)) in members.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            replica(out, *id, &entry.address);
        }
        out.push(b']');
    };
    out.push(b'{');
    write_key(out, "inSyncReplicas");
    list(out, true);
    out.push(b',');
    if let Some(addr) = replicas.address(sync.master) {
        write_key(out, "masterAddress");
        write_str(out, addr, JsonStyle::Fastjson);
        out.push(b',');
    }
    if let Some(master) = sync.master {
        write_key(out, "masterBrokerId");
        write_int(out, master);
        out.push(b',');
    }
    write_key(out, "masterEpoch");
    write_int(out, i64::from(sync.master_epoch));
    out.push(b',');
    write_key(out, "notInSyncReplicas");
    list(out, false);
    out.push(b',');
    write_key(out, "syncStateSetEpoch");
    write_int(out, i64::from(sync.sync_state_set_epoch));
    out.push(b'}');
}

/// Where each of `names` (each once) comes in the order a Java HashMap of them iterates (by bucket, then
/// as put), as fastjson writes the map.
fn java_hash_order(names: &[&str]) -> Vec<usize> {
    let len = names.len();
    let mut ordered: Vec<(u32, usize)> =
        names.iter().enumerate().map(|(i, n)| (crate::protocol::java_hash::bucket(n, len), i)).collect();
    ordered.sort_unstable();
    ordered.into_iter().map(|(_, i)| i).collect()
}
