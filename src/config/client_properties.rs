//! What Java's clients read, besides their own settings, to find a NameServer: JVM system properties
//! (`-Dkey=value`, as in `JAVA_OPT`) over the environment. rocketns reads them for cluster-test mode, which
//! finds the product environment's NameServer as Java's admin client does. They are not NameServer keys
//! (Java ignores them in the `-c` file), so they come from rocketns's own `-D` options and the environment.

/// `MixAll.NAMESRV_ADDR_PROPERTY`, `NAMESRV_ADDR_ENV`, and the address server's domain and subgroup.
pub const NAMESRV_ADDR_PROPERTY: &str = "rocketmq.namesrv.addr";
pub const NAMESRV_ADDR_ENV: &str = "NAMESRV_ADDR";
pub const NAMESRV_DOMAIN_PROPERTY: &str = "rocketmq.namesrv.domain";
pub const NAMESRV_DOMAIN_SUBGROUP_PROPERTY: &str = "rocketmq.namesrv.domain.subgroup";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientProperties {
    /// `host:port;host:port`; when set the address server is not asked.
    pub namesrv_addr: Option<String>,
    /// The address server's host (`jmenv.tbsite.net`), port 8080 unless it names one.
    pub namesrv_domain: String,
    /// `nsaddr`: the address server's path is `/rocketmq/{subgroup}-{productEnvName}?nofix=1`.
    pub namesrv_domain_subgroup: String,
}

impl ClientProperties {
    /// From `defines` (`-D` options, the last of a key winning) and, for the NameServer list, the
    /// environment's `NAMESRV_ADDR`, as Java's `System.getProperty(key, System.getenv(env))`. A blank value
    /// counts as unset.
    pub fn from_defines(defines: &[(String, String)]) -> ClientProperties {
        let get = |key: &str| {
            defines.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty())
        };
        let env = std::env::var(NAMESRV_ADDR_ENV).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        ClientProperties {
            namesrv_addr: get(NAMESRV_ADDR_PROPERTY).or(env),
            namesrv_domain: get(NAMESRV_DOMAIN_PROPERTY).unwrap_or_else(|| "jmenv.tbsite.net".to_string()),
            namesrv_domain_subgroup: get(NAMESRV_DOMAIN_SUBGROUP_PROPERTY).unwrap_or_else(|| "nsaddr".to_string()),
        }
    }
}
