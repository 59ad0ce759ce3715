//! Request failures, and the one place where they become RocketMQ response codes and remarks.

use crate::config::ConfigUpdateError;
use crate::protocol::codes::response;
use crate::protocol::register_body::BodyError;
use crate::remoting::{ExtFields, RemotingCommand};
use crate::route::RegisterError;
use crate::route::writer::SubmitError;

/// The longest remark sent: a remark quotes client values (a topic, a KV key), which may be megabytes.
const MAX_REMARK: usize = 4096;

/// Client-supplied text as remarks and log lines show it: at most `max` bytes, cut at a character
/// boundary and marked, so that no value a client chose is copied whole into a reply or the log.
pub fn shown(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...({} bytes)", &text[..end], text.len()).into()
}

/// Java's remark for a missing route, FAQ pointer included (`FAQUrl.APPLY_TOPIC_URL`).
const FAQ_SUFFIX: &str = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("missing header field {0}")]
    MissingField(&'static str),
    #[error("header field {field} has an invalid value {value:?}")]
    InvalidField { field: &'static str, value: String },
    #[error("header field {field} of {len} bytes: at most {max}")]
    FieldTooLong { field: &'static str, len: usize, max: usize },
    #[error("crc32 not match")]
    CrcMismatch,
    #[error("{0}")]
    InvalidBody(String),
    #[error("register broker failed")]
    RegisterFailed,
    #[error("No topic route info in name server for the topic: {0}{FAQ_SUFFIX}")]
    TopicNotExist(String),
    #[error("disable")]
    Disabled,
    /// Java's remark when its request executor refuses work; here, too many cluster-test lookups wait.
    #[error("[OVERLOAD]system busy, start flow control for a while")]
    Busy,
    #[error("the route writer queue is full, try again later")]
    QueueFull,
    #[error("the name server is shutting down")]
    ShuttingDown,
    #[error("name server not ready")]
    NotReady,
    #[error("namespace or key is null")]
    KvNamespaceOrKeyNull,
    #[error("value is null")]
    KvValueNull,
    #[error("No config item, Namespace: {namespace} Key: {key}")]
    KvNotFound { namespace: String, key: String },
    #[error("No config item, Namespace: {0}")]
    KvNamespaceNotFound(String),
    #[error("{0}")]
    Persist(String),
    #[error(transparent)]
    ConfigUpdate(#[from] ConfigUpdateError),
    #[error(" request type {0} not supported")]
    NotSupported(i32),
    #[error(transparent)]
    AccessDenied(#[from] crate::processor::acl::AccessDenied),
    /// A controller request Java refuses as invalid (a heartbeat without its broker id).
    #[error("{0}")]
    ControllerInvalidRequest(String),
    /// A controller request that only the leader serves, sent to a node that is not it.
    #[error("The controller is not in leader state")]
    ControllerNotLeader,
    /// The controller's log did not take a decision in time (Java waits 5 s for its DLedger append).
    #[error("the controller could not replicate the change: {0}")]
    ControllerReplication(String),
    /// A Raft frame the peer fence stopped (`controller::gate`).
    #[error("refused: {0}")]
    ControllerPeerRefused(#[from] crate::controller::gate::Refused),
}

impl RequestError {
    pub fn response_code(&self) -> i32 {
        match self {
            RequestError::TopicNotExist(_) => response::TOPIC_NOT_EXIST,
            RequestError::NotSupported(_) => response::REQUEST_CODE_NOT_SUPPORTED,
            RequestError::Busy => response::SYSTEM_BUSY,
            RequestError::KvNotFound { .. } | RequestError::KvNamespaceNotFound(_) => response::QUERY_NOT_FOUND,
            RequestError::ConfigUpdate(
                ConfigUpdateError::BlackListed(_) | ConfigUpdateError::StartupOnly(_) | ConfigUpdateError::Unknown(_),
            )
            | RequestError::AccessDenied(_)
            | RequestError::ControllerPeerRefused(_) => response::NO_PERMISSION,
            RequestError::ControllerInvalidRequest(_) => crate::protocol::codes::controller::INVALID_REQUEST,
            RequestError::ControllerNotLeader => crate::protocol::codes::controller::NOT_LEADER,
            RequestError::MissingField(_)
            | RequestError::InvalidField { .. }
            | RequestError::FieldTooLong { .. }
            | RequestError::CrcMismatch
            | RequestError::InvalidBody(_)
            | RequestError::RegisterFailed
            | RequestError::Disabled
            | RequestError::QueueFull
            | RequestError::ShuttingDown
            | RequestError::NotReady
            | RequestError::KvNamespaceOrKeyNull
            | RequestError::KvValueNull
            | RequestError::Persist(_)
            | RequestError::ConfigUpdate(_)
            | RequestError::ControllerReplication(_) => response::SYSTEM_ERROR,
        }
    }

    /// The reply for this error. Requests whose Java handler attaches a response header class keep an empty
    /// `extFields` on errors too, as Java does.
    pub fn to_response(&self, request_code: i32) -> RemotingCommand {
        use crate::protocol::codes::request;
        let remark = self.to_string();
        let remark = if remark.len() > MAX_REMARK { shown(&remark, MAX_REMARK).into_owned() } else { remark };
        let mut resp = RemotingCommand::response(self.response_code(), Some(remark));
        if matches!(request_code, request::REGISTER_BROKER | request::GET_KV_CONFIG) {
            resp.ext_fields = Some(ExtFields::new());
        }
        resp
    }
}

impl From<RegisterError> for RequestError {
    fn from(e: RegisterError) -> Self {
        match e {
            RegisterError::FirstRegistrationWithOneTopic => RequestError::RegisterFailed,
        }
    }
}

impl From<BodyError> for RequestError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::CrcMismatch => RequestError::CrcMismatch,
            e => RequestError::InvalidBody(e.to_string()),
        }
    }
}

impl From<SubmitError> for RequestError {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::QueueFull => RequestError::QueueFull,
            SubmitError::Stopped => RequestError::ShuttingDown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_remarks() {
        assert_eq!(RequestError::NotSupported(99999).to_string(), " request type 99999 not supported");
        assert_eq!(
            RequestError::TopicNotExist("X".into()).to_string(),
            "No topic route info in name server for the topic: X\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
        );
        assert_eq!(RequestError::TopicNotExist("X".into()).response_code(), 17);
    }

    #[test]
    fn long_client_values_are_cut_in_remarks() {
        let error = RequestError::TopicNotExist("é".repeat(10_000));
        let full = error.to_string().len();
        let remark = error.to_response(105).remark.expect("a remark");
        assert!(remark.len() < MAX_REMARK + 32, "{} bytes", remark.len());
        assert!(remark.ends_with(&format!("...({full} bytes)")), "{}", &remark[remark.len() - 40..]);
    }
}
