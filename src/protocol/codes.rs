//! RocketMQ request and response codes the NameServer speaks (`RequestCode.java`, `ResponseCode.java`).

/// Request codes (`RequestCode`).
pub mod request {
    pub const PUT_KV_CONFIG: i32 = 100;
    pub const GET_KV_CONFIG: i32 = 101;
    pub const DELETE_KV_CONFIG: i32 = 102;
    pub const REGISTER_BROKER: i32 = 103;
    pub const UNREGISTER_BROKER: i32 = 104;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const WIPE_WRITE_PERM_OF_BROKER: i32 = 205;
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const REGISTER_TOPIC_IN_NAMESRV: i32 = 217;
    pub const GET_KVLIST_BY_NAMESPACE: i32 = 219;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: i32 = 304;
    pub const GET_UNIT_TOPIC_LIST: i32 = 311;
    pub const GET_HAS_UNIT_SUB_TOPIC_LIST: i32 = 312;
    pub const GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: i32 = 313;
    pub const UPDATE_NAMESRV_CONFIG: i32 = 318;
    pub const GET_NAMESRV_CONFIG: i32 = 319;
    pub const QUERY_DATA_VERSION: i32 = 322;
    pub const ADD_WRITE_PERM_OF_BROKER: i32 = 327;
    pub const GET_BROKER_MEMBER_GROUP: i32 = 901;
    pub const BROKER_HEARTBEAT: i32 = 904;
    /// Sent by the NameServer to brokers (`notifyMinBrokerIdChanged`), never received.
    pub const NOTIFY_MIN_BROKER_ID_CHANGE: i32 = 905;
}

/// Response codes (`RemotingSysResponseCode`, `ResponseCode`).
pub mod response {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const GO_AWAY: i32 = 1500;
}

/// The controller's request codes (`RequestCode`), on the `controllerDLegerPeers` addresses.
pub mod controller_request {
    pub const ALTER_SYNC_STATE_SET: i32 = 1001;
    pub const ELECT_MASTER: i32 = 1002;
    pub const REGISTER_BROKER: i32 = 1003;
    pub const GET_REPLICA_INFO: i32 = 1004;
    pub const GET_METADATA_INFO: i32 = 1005;
    pub const GET_SYNC_STATE_DATA: i32 = 1006;
    /// Sent by the controller to brokers, never received.
    pub const NOTIFY_BROKER_ROLE_CHANGED: i32 = 1008;
    pub const UPDATE_CONTROLLER_CONFIG: i32 = 1009;
    pub const GET_CONTROLLER_CONFIG: i32 = 1010;
    pub const CLEAN_BROKER_DATA: i32 = 1011;
    pub const GET_NEXT_BROKER_ID: i32 = 1012;
    pub const APPLY_BROKER_ID: i32 = 1013;
    /// rocketns's own, between controller nodes (openraft's RPCs, JSON bodies), outside RocketMQ's codes;
    /// a Java (DLedger) controller node cannot join a rocketns group (COMPATIBILITY.md).
    pub const RAFT_APPEND_ENTRIES: i32 = 60001;
    pub const RAFT_VOTE: i32 = 60002;
    pub const RAFT_INSTALL_SNAPSHOT: i32 = 60003;
}

/// The controller's response codes (`ResponseCode`, 2000-2016) that it answers.
pub mod controller {
    pub const FENCED_MASTER_EPOCH: i32 = 2000;
    pub const FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
    pub const INVALID_MASTER: i32 = 2002;
    pub const INVALID_REPLICAS: i32 = 2003;
    pub const MASTER_NOT_AVAILABLE: i32 = 2004;
    pub const INVALID_REQUEST: i32 = 2005;
    pub const BROKER_NOT_ALIVE: i32 = 2006;
    pub const NOT_LEADER: i32 = 2007;
    pub const BROKER_METADATA_NOT_EXIST: i32 = 2008;
    pub const INVALID_CLEAN_BROKER_METADATA: i32 = 2009;
    pub const BROKER_NEED_TO_BE_REGISTERED: i32 = 2010;
    pub const MASTER_STILL_EXIST: i32 = 2011;
    pub const ELECT_MASTER_FAILED: i32 = 2012;
    pub const ALTER_SYNC_STATE_SET_FAILED: i32 = 2013;
    pub const BROKER_ID_INVALID: i32 = 2014;
}

/// `MQVersion.Version` ordinals that change what the NameServer does.
pub mod version {
    /// V3_0_11: from here on REGISTER_BROKER carries a RegisterBrokerBody.
    pub const V3_0_11: i32 = 37;
    /// V4_9_4: from here on routes are answered in standard JSON.
    pub const V4_9_4: i32 = 401;
    /// V5_0_0: the compressed registration body carries static-topic mappings.
    pub const V5_0_0: i32 = 413;
    /// V5_3_1: clients newer than this are told GO_AWAY during a graceful shutdown.
    pub const V5_3_1: i32 = 475;
    /// V5_3_3: the version this server announces in its replies, like the Java 5.3 NameServer.
    pub const CURRENT: i32 = 479;
}
