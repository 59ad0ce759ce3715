//! Optional access control (`aclEnable`, off by default): the RocketMQ ACL 1.0 request signature that Java
//! brokers, clients and admin tools already send when given credentials (`AclClientRPCHook`).
//!
//! The signer puts `AccessKey` (and `SecurityToken`, if any) into `extFields`, concatenates the values of all
//! fields but `Signature` in key order, appends the body, and sends Base64(HmacSHA1(secretKey, that)) as
//! `Signature`. The Java NameServer checks none of this; rocketns checks it for every request that changes
//! the route table, the KV store or the configuration, and for unknown codes (fail closed). Route reads stay
//! open unless `aclProtectReads` is set, since producers and consumers often run without credentials.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

use crate::protocol::codes::request;
use crate::remoting::{ExtFields, RemotingCommand};

pub const ACCESS_KEY: &str = "AccessKey";
pub const SIGNATURE: &str = "Signature";

/// Requests anyone may send with access control on (unless `aclProtectReads`): they read routes, cluster
/// state, topic lists, KV values and the configuration, and change nothing.
const READS: &[i32] = &[
    request::GET_ROUTEINFO_BY_TOPIC,
    request::GET_BROKER_CLUSTER_INFO,
    request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    request::GET_TOPICS_BY_CLUSTER,
    request::GET_SYSTEM_TOPIC_LIST_FROM_NS,
    request::GET_UNIT_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    request::GET_BROKER_MEMBER_GROUP,
    request::GET_KV_CONFIG,
    request::GET_KVLIST_BY_NAMESPACE,
    request::GET_NAMESRV_CONFIG,
];

/// Whether `code` only reads (a read is safe to answer twice).
pub fn is_read(code: i32) -> bool {
    READS.contains(&code)
}

#[derive(Debug, thiserror::Error)]
pub enum AclLoadError {
    #[error("aclEnable=true needs aclCredentialsPath (a properties file of accessKey=secretKey lines)")]
    NoCredentialsPath,
    #[error("cannot read ACL credentials {path}: {message}")]
    Read { path: String, message: String },
    #[error("ACL credentials {path} hold no accessKey=secretKey line")]
    Empty { path: String },
}

/// Why a request was refused; the remark the client gets.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AccessDenied {
    #[error("access denied: request code {0} needs an ACL signature (AccessKey and Signature)")]
    Unsigned(i32),
    #[error("access denied: no ACL credentials for AccessKey {0}")]
    UnknownAccessKey(String),
    #[error("access denied: signature check failed for AccessKey {0}")]
    BadSignature(String),
}

/// The accounts from `aclCredentialsPath`, and whether reads need a signature too.
#[derive(Debug)]
pub struct AccessControl {
    secrets: HashMap<String, String>,
    protect_reads: bool,
}

impl AccessControl {
    /// Reads the credentials file: Java properties syntax, one `accessKey=secretKey` per line.
    pub fn load(path: &str, protect_reads: bool) -> Result<Self, AclLoadError> {
        if path.is_empty() {
            return Err(AclLoadError::NoCredentialsPath);
        }
        let read_error = |message: String| AclLoadError::Read { path: path.to_string(), message };
        let text = std::fs::read(Path::new(path)).map_err(|e| read_error(e.to_string()))?;
        let secrets: HashMap<String, String> =
            java_properties::read(text.as_slice()).map_err(|e| read_error(e.to_string()))?.into_iter().collect();
        if secrets.is_empty() {
            return Err(AclLoadError::Empty { path: path.to_string() });
        }
        Ok(AccessControl::new(secrets, protect_reads))
    }

    /// From accounts already read (accessKey → secretKey).
    pub fn new(secrets: HashMap<String, String>, protect_reads: bool) -> Self {
        AccessControl { secrets, protect_reads }
    }

    pub fn accounts(&self) -> usize {
        self.secrets.len()
    }

    /// Whether a request with this code must be signed.
    pub fn needs_signature(&self, code: i32) -> bool {
        self.protect_reads || !READS.contains(&code)
    }

    /// Lets the request through, or says why not.
    pub fn check(&self, req: &RemotingCommand) -> Result<(), AccessDenied> {
        self.check_parts(req.code, req.ext_fields.as_ref(), &req.body)
    }

    /// [`AccessControl::check`] of a request's code, header fields and body.
    pub fn check_parts(&self, code: i32, ext: Option<&ExtFields>, body: &[u8]) -> Result<(), AccessDenied> {
        if !self.needs_signature(code) {
            return Ok(());
        }
        let unsigned = || AccessDenied::Unsigned(code);
        let ext = ext.ok_or_else(unsigned)?;
        let (Some(access_key), Some(signature)) = (ext.get(ACCESS_KEY), ext.get(SIGNATURE)) else {
            return Err(unsigned());
        };
        let secret = self.secrets.get(access_key).ok_or_else(|| AccessDenied::UnknownAccessKey(access_key.into()))?;
        let bad = || AccessDenied::BadSignature(access_key.into());
        let claimed = BASE64.decode(signature).map_err(|_| bad())?;
        // verify_slice compares in constant time.
        signer(secret, ext, body).verify_slice(&claimed).map_err(|_| bad())
    }
}

#[cfg(any(test, feature = "testing"))]
/// The `Signature` a client with this secret sends for these fields and body (tests, the load generator).
pub fn signature(secret: &str, ext: &ExtFields, body: &[u8]) -> String {
    BASE64.encode(signer(secret, ext, body).finalize().into_bytes())
}

/// HMAC-SHA1 over the values of every field but `Signature` in key order, then the body. Keys are ordered
/// as Java's `TreeMap<String, String>` orders them (UTF-16 code units); of a repeated key the last value
/// counts, as when Java fills its `HashMap`.
fn signer(secret: &str, ext: &ExtFields, body: &[u8]) -> Hmac<Sha1> {
    let mut fields: Vec<(&str, &str)> = ext.iter().filter(|(k, _)| *k != SIGNATURE).collect();
    // Stable: equal keys keep their order, and the last of them is kept below.
    fields.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    for (i, (key, value)) in fields.iter().enumerate() {
        if fields.get(i + 1).is_some_and(|next| next.0 == *key) {
            continue;
        }
        mac.update(value.as_bytes());
    }
    mac.update(body);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(fields: &[(&str, &str)]) -> ExtFields {
        fields.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Expected values computed outside this code, with Python's standard library, for the string Java
    /// signs (values sorted by key, then the body):
    /// `base64.b64encode(hmac.new(b"12345678", b"rocketmqTopicTest" + b"body", hashlib.sha1).digest())`.
    #[test]
    fn matches_an_independent_hmac_sha1() {
        let fields = ext(&[("topic", "TopicTest"), (ACCESS_KEY, "rocketmq")]);
        assert_eq!(signature("12345678", &fields, b"body"), "VNO92eAS8ijESYO1g1yX4u1+PzI=");
    }

    /// A decoded header may repeat a key; the last value is the one read, signed and replaced.
    #[test]
    fn a_repeated_key_counts_once_with_its_last_value() {
        let mut repeated = ExtFields::new();
        repeated.push("topic", "first");
        repeated.push("topic", "T");
        repeated.push(ACCESS_KEY, "ak");
        assert_eq!(signature("sk", &repeated, b""), signature("sk", &ext(&[("topic", "T"), (ACCESS_KEY, "ak")]), b""));
        repeated.insert("topic", "U");
        assert_eq!(repeated.get("topic"), Some("U"));

        let acl = AccessControl::new(HashMap::from([("ak".to_string(), "sk".to_string())]), false);
        let mut req = RemotingCommand::request(request::PUT_KV_CONFIG, repeated);
        let sig = signature("sk", req.ext_fields.as_ref().expect("fields"), b"");
        req.ext_fields.as_mut().expect("fields").insert(SIGNATURE, sig);
        assert_eq!(acl.check(&req), Ok(()));
    }

    #[test]
    fn signature_and_order_of_arrival_do_not_count() {
        let a = ext(&[("topic", "T"), (ACCESS_KEY, "ak"), ("b", "2")]);
        let b = ext(&[("b", "2"), (ACCESS_KEY, "ak"), ("topic", "T"), (SIGNATURE, "whatever")]);
        assert_eq!(signature("sk", &a, b""), signature("sk", &b, b""));
    }
}
