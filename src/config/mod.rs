//! NameServer configuration: Java's `NamesrvConfig` and `NettyServerConfig` keys, read from a Java properties
//! file (`-c`), with Java's defaults.
//!
//! Every key the Java NameServer reads is accepted so that an existing `namesrv.properties` works unchanged;
//! keys that only tune Java internals (thread pools, Netty buffers) are recorded and reported but have no
//! effect. Unknown keys are warned about, not fatal.

mod client_properties;
mod properties;
mod update;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

pub use client_properties::ClientProperties;
pub use update::{ConfigUpdateError, UPDATABLE_KEYS};

/// The configuration handlers read: replaced whole by UPDATE_NAMESRV_CONFIG, never locked.
pub type SharedConfig = Arc<arc_swap::ArcSwap<NamesrvConfig>>;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot parse config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid value {value:?} for {key}: expected {expected}")]
    InvalidValue { key: String, value: String, expected: &'static str },
}

/// How a config value is read from and written to its properties text.
trait ConfigValue: Sized {
    const EXPECTED: &'static str;
    fn parse(s: &str) -> Option<Self>;
    fn render(&self) -> String;
    /// A value that is accepted but probably not what was meant: the warning to log.
    fn doubt(_s: &str) -> Option<String> {
        None
    }
}

impl ConfigValue for bool {
    const EXPECTED: &'static str = "true or false";
    /// Java's `Boolean.parseBoolean`: anything but `true` (in any case) is false.
    fn parse(s: &str) -> Option<Self> {
        Some(crate::protocol::lenient::parse_java_bool(s))
    }
    fn render(&self) -> String {
        self.to_string()
    }
    fn doubt(s: &str) -> Option<String> {
        let plain = s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false");
        let quoted = crate::error::shown(s, 64);
        (!plain).then(|| format!("{quoted:?} is not true or false; read as false, as Java reads it"))
    }
}

macro_rules! int_value {
    ($($t:ty => $expected:literal),*) => {$(
        impl ConfigValue for $t {
            const EXPECTED: &'static str = $expected;
            fn parse(s: &str) -> Option<Self> {
                crate::protocol::lenient::parse_java_long(s).and_then(|v| <$t>::try_from(v).ok())
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_value!(
    i32 => "an integer from -2147483648 to 2147483647",
    i64 => "an integer from -9223372036854775808 to 9223372036854775807",
    u16 => "an integer from 0 to 65535",
    u64 => "an integer from 0 to 9223372036854775807 (a Java long)"
);

impl ConfigValue for String {
    const EXPECTED: &'static str = "text";
    fn parse(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

/// `namesrvPeers` at most: each is a connection and a comparison every scan period.
pub const MAX_NAMESRV_PEERS: usize = 16;

/// Java's ControllerConfig keys that its NamesrvConfig lacks (see [`NamesrvConfig::namesrv_entries`]).
pub const CONTROLLER_KEYS: &[&str] = &[
    "controllerDLegerGroup",
    "controllerDLegerPeers",
    "controllerDLegerSelfId",
    "controllerStorePath",
    "controllerType",
    "controllerPeerSecretFile",
    "controllerAllowUnsignedPeers",
    "controllerReleaseUnelectedGroupMillis",
    "enableElectUncleanMaster",
    "notifyBrokerRoleChanged",
    "scanInactiveMasterInterval",
    "controllerThreadPoolNums",
    "controllerRequestThreadPoolQueueCapacity",
    "mappedFileSize",
    "electMasterMaxRetryCount",
];

fn home_path(rest: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
    format!("{home}/{rest}")
}

macro_rules! namesrv_config {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty = $default:expr => $key:literal, )*) => {
        /// The effective configuration; field docs say what rocketns does with each key.
        #[derive(Debug, Clone, PartialEq)]
        pub struct NamesrvConfig {
            $( $(#[$doc])* pub $field: $ty, )*
            /// Keys of the `-c` file that rocketns does not know; kept and shown by GET_NAMESRV_CONFIG, as Java does.
            pub extra: BTreeMap<String, String>,
            /// Which of [`CONTROLLER_KEYS`] the `-c` file gives.
            pub given_controller_keys: BTreeSet<String>,
        }

        impl Default for NamesrvConfig {
            fn default() -> Self {
                NamesrvConfig { $( $field: $default, )* extra: BTreeMap::new(), given_controller_keys: BTreeSet::new() }
            }
        }

        impl NamesrvConfig {
            /// Sets one key; `Ok(false)` when the key is unknown.
            pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
                let value = value.trim();
                match key {
                    $( $key => {
                        self.$field = <$ty as ConfigValue>::parse(value).ok_or_else(|| ConfigError::InvalidValue {
                            key: key.to_string(),
                            value: value.to_string(),
                            expected: <$ty as ConfigValue>::EXPECTED,
                        })?;
                        if let Some(doubt) = <$ty as ConfigValue>::doubt(value) {
                            // An update's value is a client's: the line through the client-line rate limit.
                            crate::limits::throttle::client_log!(warn, key, "config value {doubt}");
                        }
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// Every key with its value (unknown `-c` keys included), sorted by key.
            pub fn entries(&self) -> BTreeMap<String, String> {
                let mut m = self.extra.clone();
                $( m.insert($key.to_string(), self.$field.render()); )*
                m
            }

            /// Whether rocketns knows the key.
            pub fn is_known_key(key: &str) -> bool {
                matches!(key, $( $key )|*)
            }
        }
    };
}

namesrv_config! {
    /// `ROCKETMQ_HOME`; informational (Java refuses to start without it, rocketns does not need it).
    rocketmq_home: String = std::env::var("ROCKETMQ_HOME").unwrap_or_default() => "rocketmqHome",
    /// Where the KV store is kept.
    kv_config_path: String = home_path("namesrv/kvConfig.json") => "kvConfigPath",
    /// Where runtime config updates are written; replaced by the `-c` file when one is given.
    config_store_path: String = home_path("namesrv/namesrv.properties") => "configStorePath",
    product_env_name: String = "center".into() => "productEnvName",
    cluster_test: bool = false => "clusterTest",
    /// Routes carry `orderTopicConf` from KV namespace ORDER_TOPIC_CONFIG.
    order_message_enable: bool = false => "orderMessageEnable",
    return_order_topic_config_to_broker: bool = true => "returnOrderTopicConfigToBroker",
    client_request_thread_pool_nums: i32 = 8 => "clientRequestThreadPoolNums",
    default_thread_pool_nums: i32 = 16 => "defaultThreadPoolNums",
    client_request_thread_pool_queue_capacity: i32 = 50000 => "clientRequestThreadPoolQueueCapacity",
    default_thread_pool_queue_capacity: i32 = 10000 => "defaultThreadPoolQueueCapacity",
    /// Period of the inactive-broker scan, in milliseconds.
    scan_not_active_broker_interval: u64 = 5000 => "scanNotActiveBrokerInterval",
    /// How many unregistrations may wait for the route writer at once (Java's batch unregistration queue);
    /// beyond it UNREGISTER_BROKER answers SYSTEM_ERROR. Other changes wait for room instead.
    un_register_broker_queue_capacity: i32 = 3000 => "unRegisterBrokerQueueCapacity",
    support_acting_master: bool = false => "supportActingMaster",
    enable_all_topic_list: bool = true => "enableAllTopicList",
    enable_topic_list: bool = true => "enableTopicList",
    notify_min_broker_id_changed: bool = false => "notifyMinBrokerIdChanged",
    /// Also run the controller (src/controller/): master election for brokers in controller mode, on the
    /// `controllerDLegerPeers` addresses, as Java 5.x does with this key.
    enable_controller_in_namesrv: bool = false => "enableControllerInNamesrv",
    /// The controller group's name, as `GET_METADATA_INFO` (1005) reports it.
    controller_dleger_group: String = String::new() => "controllerDLegerGroup",
    /// The controller nodes, `id-host:port` separated by `;` (`n0-127.0.0.1:9878;n1-...`): each node listens
    /// at its own address, for brokers and for the other nodes. The same on every node.
    controller_dleger_peers: String = String::new() => "controllerDLegerPeers",
    /// Which of `controllerDLegerPeers` this node is.
    controller_dleger_self_id: String = String::new() => "controllerDLegerSelfId",
    /// Where the controller keeps its Raft log and snapshots; empty means `~/DledgerController`.
    controller_store_path: String = String::new() => "controllerStorePath",
    /// A file whose content (16 bytes or more) every node of the group shares: the Raft frames between
    /// nodes are signed with it and others refused (SECURITY.md). Not a Java key; a group of more than
    /// one node needs it, or `controllerAllowUnsignedPeers`.
    controller_peer_secret_file: String = String::new() => "controllerPeerSecretFile",
    /// Without `controllerPeerSecretFile`, take the Raft frames of a group of several nodes from the
    /// peers' addresses alone: whoever can send from a peer's host can then speak for it (SECURITY.md).
    /// Not a Java key.
    controller_allow_unsigned_peers: bool = false => "controllerAllowUnsignedPeers",
    /// A group no master was ever elected for, none of whose brokers has beaten to the leader for this
    /// long (milliseconds), is removed by a decision of the leader's (SECURITY.md); 0 keeps them, as Java
    /// does. Not a Java key.
    controller_release_unelected_group_millis: u64 = 600_000 => "controllerReleaseUnelectedGroupMillis",
    /// Only `DLedger` (Java's default) is accepted: rocketns replicates on openraft under either name's
    /// keys, and Java's `jRaft` keys are not read.
    controller_type: String = "DLedger".into() => "controllerType",
    /// An election may choose a live broker outside the SyncStateSet when none in it is live.
    enable_elect_unclean_master: bool = false => "enableElectUncleanMaster",
    /// Tell a group's live brokers of a new master (NOTIFY_BROKER_ROLE_CHANGED, 1008).
    notify_broker_role_changed: bool = true => "notifyBrokerRoleChanged",
    /// How often the leader looks for groups whose master is gone, in milliseconds.
    scan_inactive_master_interval: u64 = 5000 => "scanInactiveMasterInterval",
    /// Java's controller thread pool and queue; requests are served on the controller's own runtime here.
    controller_thread_pool_nums: i32 = 16 => "controllerThreadPoolNums",
    controller_request_thread_pool_queue_capacity: i32 = 50000 => "controllerRequestThreadPoolQueueCapacity",
    /// DLedger's mapped file size; the openraft log has no mapped files.
    mapped_file_size: i32 = 1024 * 1024 * 1024 => "mappedFileSize",
    elect_master_max_retry_count: i32 = 3 => "electMasterMaxRetryCount",
    need_wait_for_service: bool = false => "needWaitForService",
    wait_seconds_for_service: i32 = 45 => "waitSecondsForService",
    /// A full registration drops the broker's topics it no longer lists.
    delete_topic_with_broker_registration: bool = false => "deleteTopicWithBrokerRegistration",
    config_black_list: String = "configBlackList;configStorePath;kvConfigPath".into() => "configBlackList",
    /// Address to listen on.
    bind_address: String = "0.0.0.0".into() => "bindAddress",
    /// Port to listen on (9876, as `mqnamesrv`).
    listen_port: u16 = 9876 => "listenPort",
    server_worker_threads: i32 = 8 => "serverWorkerThreads",
    server_callback_executor_threads: i32 = 0 => "serverCallbackExecutorThreads",
    server_selector_threads: i32 = 3 => "serverSelectorThreads",
    server_oneway_semaphore_value: i32 = 256 => "serverOnewaySemaphoreValue",
    server_async_semaphore_value: i32 = 64 => "serverAsyncSemaphoreValue",
    /// A connection with no traffic for this long is closed (brokers on it are then removed).
    server_channel_max_idle_time_seconds: u64 = 120 => "serverChannelMaxIdleTimeSeconds",
    /// SO_SNDBUF and SO_RCVBUF of each connection, when over 0 (as Java sets them); otherwise the kernel's.
    server_socket_snd_buf_size: i32 = 0 => "serverSocketSndBufSize",
    server_socket_rcv_buf_size: i32 = 0 => "serverSocketRcvBufSize",
    /// A connection stops reading requests while this many bytes of its replies wait to be written (Java's
    /// Netty option; 0 means rocketns's 16 KiB, where Netty's is 64 KiB). Replies over 16 KiB are counted in
    /// `largeReplyBufferBytes` instead.
    write_buffer_high_water_mark: i32 = 0 => "writeBufferHighWaterMark",
    write_buffer_low_water_mark: i32 = 0 => "writeBufferLowWaterMark",
    /// The listen backlog (accept queue); the kernel caps it at `net.core.somaxconn`.
    server_socket_backlog: i32 = 1024 => "serverSocketBacklog",
    server_netty_worker_group_enable: bool = true => "serverNettyWorkerGroupEnable",
    server_pooled_byte_buf_allocator_enable: bool = true => "serverPooledByteBufAllocatorEnable",
    enable_shutdown_gracefully: bool = false => "enableShutdownGracefully",
    shutdown_wait_time_seconds: i32 = 30 => "shutdownWaitTimeSeconds",
    use_epoll_native_selector: bool = false => "useEpollNativeSelector",
    /// Port of the HTTP endpoint for metrics, health and route dumps (on `bindAddress`); 0 turns it off.
    metrics_port: u16 = 0 => "metricsPort",
    /// The audit log of state-changing requests, as JSON lines appended to this file; empty logs them under
    /// the target `rocketns::audit` instead (src/ops/audit.rs).
    audit_log_path: String = String::new() => "auditLogPath",
    /// A Unix socket where the running server hands its listening sockets to a new process started with
    /// `--take-over` (zero-downtime upgrade, src/service/upgrade.rs); empty turns upgrades off.
    upgrade_socket_path: String = String::new() => "upgradeSocketPath",
    /// The ordinary log's format: `text`, or `json` (one JSON object a line, for log shippers).
    log_format: String = "text".into() => "logFormat",
    /// Warm restart: save the route tables periodically and at shutdown, and serve them at once on start.
    warm_restart: bool = true => "warmRestart",
    /// The route snapshot file of warm restart; empty means `routeSnapshot.json` beside `kvConfigPath`.
    route_snapshot_path: String = String::new() => "routeSnapshotPath",
    /// How often the route snapshot file is rewritten (when the routes changed), in seconds.
    route_snapshot_interval_seconds: u64 = 30 => "routeSnapshotIntervalSeconds",
    /// The other NameServers of this cluster (`host:port`, `;`-separated, Java or rocketns). A node that
    /// starts without a route file copies the routes of the first that answers before it opens its port
    /// (src/service/peer_copy.rs), and every scan period compares its brokers with each
    /// (src/service/peer_compare.rs). At most [`MAX_NAMESRV_PEERS`].
    namesrv_peers: String = String::new() => "namesrvPeers",
    /// Header encoding of replies, `JSON` (what every client reads, and the only one the C++ client reads) or
    /// `ROCKETMQ`; Java's `rocketmq.serialize.type`. The environment variable `ROCKETMQ_SERIALIZE_TYPE`
    /// sets the default, as for Java.
    serialize_type: String = std::env::var("ROCKETMQ_SERIALIZE_TYPE").unwrap_or_else(|_| "JSON".into()) => "serializeType",
    /// Largest frame accepted, 4-byte prefix included (Java's `com.rocketmq.remoting.frameMaxLength`).
    frame_max_length: u64 = crate::remoting::frame::DEFAULT_MAX_FRAME_LEN as u64 => "frameMaxLength",
    /// The memory budget's `requests` pool (src/limits/budget.rs): frames over 16 KiB from their length prefix until
    /// processed, each with room for what its request builds (a registration's parsed topic configs), and
    /// parsed registrations waiting for the route writer, all connections together. At least
    /// `frameMaxLength` × 7/4, so that one largest registration always fits; at most 4 GiB.
    large_frame_buffer_bytes: u64 = 64 << 20 => "largeFrameBufferBytes",
    /// The memory budget's `replies` pool: reply bodies over 16 KiB (a 100,000-topic list, a large cluster
    /// info) queued until their peers take them, all connections together. At most 4 GiB.
    large_reply_buffer_bytes: u64 = 32 << 20 => "largeReplyBufferBytes",
    /// Bytes a second of reply bodies over 16 KiB, all connections together (0: no limit). A hundred
    /// 100,000-topic lists a second by default: clients reading them as fast as they could took gigabytes a
    /// second through the kernel, on the cores that answer lookups.
    large_reply_bytes_per_second: u64 = 128 << 20 => "largeReplyBytesPerSecond",
    /// Once a frame over 16 KiB has room, its bytes must all arrive within this long; a large reply must
    /// be taken by its peer within this long. Otherwise the connection is closed. Waiting for room does not
    /// count: a connection waits, unread, as long as it takes.
    large_frame_timeout_millis: u64 = 20_000 => "largeFrameTimeoutMillis",
    /// Connections served at once; more are closed as soon as they are accepted.
    server_max_connections: u64 = 50_000 => "serverMaxConnections",
    /// Access control: requests that change anything must carry a valid RocketMQ ACL signature (SECURITY.md).
    acl_enable: bool = false => "aclEnable",
    /// The accounts of access control: a properties file of `accessKey=secretKey` lines.
    acl_credentials_path: String = String::new() => "aclCredentialsPath",
    /// With access control on, reads (routes, cluster info, topic lists, KV and config reads) need a
    /// signature too.
    acl_protect_reads: bool = false => "aclProtectReads",
    /// TLS: `disabled`, `permissive` (TLS and plain connections on the same port, told apart by the first
    /// byte, as Java does) or `enforcing` (TLS only). Java's `tls.server.mode`.
    tls_server_mode: String = "disabled".into() => "tls.server.mode",
    /// The server certificate chain, PEM. Java's `tls.server.certPath`.
    tls_server_cert_path: String = String::new() => "tls.server.certPath",
    /// The server's private key, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted. Java's `tls.server.keyPath`.
    tls_server_key_path: String = String::new() => "tls.server.keyPath",
}

impl NamesrvConfig {
    /// Applies a properties text; returns the unknown keys (already warned about).
    pub fn apply_properties(&mut self, text: impl AsRef<[u8]>, origin: &str) -> Result<Vec<String>, ConfigError> {
        let props = java_properties::read(text.as_ref())
            .map_err(|e| ConfigError::Parse { path: origin.to_string(), message: e.to_string() })?;
        let mut props: Vec<_> = props.into_iter().collect();
        props.sort();
        let mut unknown = Vec::new();
        for (key, value) in props {
            if CONTROLLER_KEYS.contains(&key.as_str()) {
                self.given_controller_keys.insert(key.clone());
            }
            if !self.set(&key, &value)? {
                tracing::warn!(key = %key, file = %origin, "unknown config key ignored");
                self.extra.insert(key.clone(), value);
                unknown.push(key);
            }
        }
        Ok(unknown)
    }

    /// Checks what the key-by-key parse cannot: values that must be one of a few words.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.serialize_type.as_str(), "JSON" | "ROCKETMQ") {
            return Err(ConfigError::InvalidValue {
                key: "serializeType".into(),
                value: self.serialize_type.clone(),
                expected: "JSON or ROCKETMQ",
            });
        }
        if !matches!(self.tls_server_mode.as_str(), "disabled" | "permissive" | "enforcing") {
            return Err(ConfigError::InvalidValue {
                key: "tls.server.mode".into(),
                value: self.tls_server_mode.clone(),
                expected: "disabled, permissive or enforcing",
            });
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(ConfigError::InvalidValue {
                key: "logFormat".into(),
                value: self.log_format.clone(),
                expected: "text or json",
            });
        }
        if self.enable_controller_in_namesrv && !self.upgrade_socket_path.is_empty() {
            return Err(ConfigError::InvalidValue {
                key: "upgradeSocketPath".into(),
                value: self.upgrade_socket_path.clone(),
                expected: "empty with enableControllerInNamesrv (the controller's port and store are not handed over)",
            });
        }
        if self.peers().len() > MAX_NAMESRV_PEERS {
            return Err(ConfigError::InvalidValue {
                key: "namesrvPeers".into(),
                value: self.namesrv_peers.clone(),
                expected: "at most 16 addresses",
            });
        }
        let pool_max = crate::limits::budget::MAX_POOL as u64;
        if self.large_frame_buffer_bytes < crate::limits::budget::large_frame_room(self.frame_max_length)
            || self.large_frame_buffer_bytes > pool_max
        {
            return Err(ConfigError::InvalidValue {
                key: "largeFrameBufferBytes".into(),
                value: self.large_frame_buffer_bytes.to_string(),
                expected: "from frameMaxLength × 7/4 (so that one largest registration always fits) to 4 GiB",
            });
        }
        if self.large_reply_buffer_bytes > pool_max {
            return Err(ConfigError::InvalidValue {
                key: "largeReplyBufferBytes".into(),
                value: self.large_reply_buffer_bytes.to_string(),
                expected: "at most 4 GiB",
            });
        }
        Ok(())
    }

    /// The configuration with derived values spelled out (the route snapshot file beside the KV file), as
    /// `-p` prints it.
    pub fn effective(&self) -> NamesrvConfig {
        let mut shown = self.clone();
        shown.route_snapshot_path = self.route_snapshot_file().display().to_string();
        shown
    }

    /// `largeFrameTimeoutMillis` as a duration, at most a hundred years (see `channel_idle_timeout`).
    pub fn large_frame_timeout(&self) -> std::time::Duration {
        const CENTURY_MS: u64 = 100 * 365 * 24 * 3600 * 1000;
        std::time::Duration::from_millis(self.large_frame_timeout_millis.min(CENTURY_MS))
    }

    /// `namesrvPeers`' addresses, in order, each once.
    pub fn peers(&self) -> Vec<String> {
        let mut peers: Vec<String> = Vec::new();
        for peer in self.namesrv_peers.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            if !peers.iter().any(|p| p == peer) {
                peers.push(peer.to_string());
            }
        }
        peers
    }

    /// Where warm restart keeps the routes.
    pub fn route_snapshot_file(&self) -> std::path::PathBuf {
        if !self.route_snapshot_path.is_empty() {
            return self.route_snapshot_path.clone().into();
        }
        let kv = Path::new(&self.kv_config_path);
        kv.parent().unwrap_or(Path::new(".")).join("routeSnapshot.json")
    }

    /// `serverChannelMaxIdleTimeSeconds` as a duration, from a second to a hundred years (an instant that
    /// far ahead can still be computed: `Instant + u64::MAX seconds` would overflow and panic).
    pub fn channel_idle_timeout(&self) -> std::time::Duration {
        const CENTURY: u64 = 100 * 365 * 24 * 3600;
        std::time::Duration::from_secs(self.server_channel_max_idle_time_seconds.clamp(1, CENTURY))
    }

    /// `writeBufferHighWaterMark`, or 16 KiB when it is 0 or less.
    pub fn reply_high_water_mark(&self) -> usize {
        match usize::try_from(self.write_buffer_high_water_mark) {
            Ok(0) | Err(_) => 16 * 1024,
            Ok(bytes) => bytes,
        }
    }

    pub fn reply_serialize_type(&self) -> crate::remoting::SerializeType {
        match self.serialize_type.as_str() {
            "ROCKETMQ" => crate::remoting::SerializeType::RocketMq,
            _ => crate::remoting::SerializeType::Json,
        }
    }

    /// Reads a `-c` file; like Java, that file then becomes `configStorePath`.
    pub fn load_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        // Bytes, not text: Java's Properties.load reads the file as ISO-8859-1 (the properties reader decodes
        // it byte by byte), so a Latin-1 file that is not UTF-8 loads as it does in Java.
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Read { path: origin.clone(), source })?;
        let mut config = NamesrvConfig::default();
        config.apply_properties(&bytes, &origin)?;
        config.config_store_path = origin;
        config.validate()?;
        Ok(config)
    }

    /// The keys the NameServer's own configuration shows (GET_NAMESRV_CONFIG, the file written back): all
    /// but the controller's that the `-c` file does not give. Java's NameServer shows its NamesrvConfig and
    /// the `-c` file's properties; the controller's keys are its ControllerConfig's, on GET_CONTROLLER_CONFIG.
    pub fn namesrv_entries(&self) -> BTreeMap<String, String> {
        let mut entries = self.entries();
        entries.retain(|k, _| !CONTROLLER_KEYS.contains(&k.as_str()) || self.given_controller_keys.contains(k));
        entries
    }

    /// `key=value` lines sorted by key: what GET_NAMESRV_CONFIG answers (Java's `MixAll.properties2String`,
    /// with backslashes escaped so that an admin tool's `Properties.load` reads them back), or with
    /// `every_key` what `-p` prints: the controller's keys too.
    pub fn to_properties_text(&self, every_key: bool) -> String {
        let entries = if every_key { self.entries() } else { self.namesrv_entries() };
        entries.into_iter().map(|(k, v)| format!("{k}={}\n", v.replace('\\', "\\\\"))).collect()
    }

    /// The `-c` file an update writes back: the NameServer's keys ([`Self::namesrv_entries`]), escaped as
    /// `Properties.store` escapes (see `properties.rs`), so that Java's reader and rocketns's read the same
    /// values.
    pub fn to_properties_file(&self) -> String {
        let entries = self.namesrv_entries();
        let mut text = String::from("# Written by rocketns on UPDATE_NAMESRV_CONFIG; Java properties (ISO-8859-1).\n");
        text.push_str(&properties::store_text(entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GET_NAMESRV_CONFIG as Java's: the controller's keys only as the `-c` file gives them; `-p` all.
    #[test]
    fn the_controller_keys_show_where_java_shows_them() {
        let mut c = NamesrvConfig::default();
        let shown = c.to_properties_text(false);
        assert!(shown.contains("enableControllerInNamesrv=false\n"), "a NamesrvConfig key");
        assert!(!shown.contains("controllerDLegerPeers") && !shown.contains("enableElectUncleanMaster"), "{shown}");
        assert!(c.to_properties_text(true).contains("enableElectUncleanMaster=false\n"));
        c.apply_properties("controllerDLegerPeers=n0-127.0.0.1:9878\n", "test").unwrap();
        let shown = c.to_properties_text(false);
        assert!(shown.contains("controllerDLegerPeers=n0-127.0.0.1:9878\n") && !shown.contains("mappedFileSize"));
        assert!(c.to_properties_file().contains("controllerDLegerPeers=n0-127.0.0.1\\:9878\n"), "kept in the file");
    }

    #[test]
    fn java_keys_and_defaults() {
        let mut c = NamesrvConfig::default();
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.scan_not_active_broker_interval, 5000);
        let unknown = c
            .apply_properties(
                "# comment\nlistenPort = 9877\norderMessageEnable=TRUE\nkvConfigPath=/tmp/kv.json\nbogusKey=1\n",
                "test",
            )
            .unwrap();
        assert_eq!(unknown, vec!["bogusKey".to_string()]);
        assert_eq!(c.listen_port, 9877);
        assert!(c.order_message_enable);
        assert_eq!(c.kv_config_path, "/tmp/kv.json");
        assert!(c.to_properties_text(false).contains("listenPort=9877\n"));
    }

    /// A file in Latin-1, as Java tools write them: read byte by byte, as Java's Properties.load reads it.
    #[test]
    fn latin1_files_load_as_in_java() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv.properties");
        std::fs::write(&path, b"listenPort=9877\nowner=Jos\xe9\n").unwrap();
        let c = NamesrvConfig::load_file(&path).expect("a Latin-1 file loads");
        assert_eq!(c.listen_port, 9877);
        assert_eq!(c.extra.get("owner").map(String::as_str), Some("Jos\u{e9}"));
    }

    #[test]
    fn bad_numbers_are_errors() {
        let mut c = NamesrvConfig::default();
        let err = c.apply_properties("listenPort=lots\n", "test").unwrap_err();
        assert!(err.to_string().contains("listenPort"), "{err}");
        let err = c.apply_properties("listenPort=70000\n", "test").unwrap_err();
        assert!(err.to_string().contains("expected an integer from 0 to 65535"), "{err}");
        let err = c.apply_properties("scanNotActiveBrokerInterval=-5\n", "test").unwrap_err();
        assert!(err.to_string().contains("from 0 to"), "{err}");
    }

    #[test]
    fn doubtful_booleans_keep_javas_meaning() {
        assert_eq!(<bool as ConfigValue>::doubt("TRUE"), None);
        assert_eq!(<bool as ConfigValue>::doubt("false"), None);
        assert!(<bool as ConfigValue>::doubt("yes").unwrap().contains("read as false"));
        // Quoted clipped: UPDATE_NAMESRV_CONFIG takes a 60,000-character value (issue 44: 60 KB lines).
        let long = "y".repeat(60_000);
        assert!(<bool as ConfigValue>::doubt(&long).unwrap().len() < 200);
        let mut c = NamesrvConfig::default();
        c.apply_properties("orderMessageEnable=yes\n", "test").unwrap();
        assert!(!c.order_message_enable);
    }

    #[test]
    fn effective_config_names_the_route_file() {
        let c = NamesrvConfig { kv_config_path: "/data/ns/kvConfig.json".into(), ..NamesrvConfig::default() };
        assert!(c.effective().to_properties_text(true).contains("routeSnapshotPath=/data/ns/routeSnapshot.json\n"));
        assert_eq!(c.route_snapshot_path, "", "the configuration itself keeps the derived default");
    }
}
