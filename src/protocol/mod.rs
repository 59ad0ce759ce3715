//! RocketMQ's data types as the NameServer sees them, and their exact JSON forms.

pub mod broker_versions;
pub mod codes;
pub mod data_version;
pub mod java_hash;
pub mod json;
pub mod lenient;
pub mod meter;
pub mod register_body;
pub mod remote_route;
pub mod route_data;
pub mod static_topic;
pub mod topic_name;

pub use data_version::DataVersion;
pub use register_body::{RegisterBrokerBody, TopicConfig};
pub use route_data::{BrokerData, QueueConfig, QueueData};
pub use static_topic::TopicQueueMappingInfo;
