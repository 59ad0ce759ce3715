//! UPDATE_NAMESRV_CONFIG, made safe.
//!
//! Java applies any key remotely and guards only a deny-list (CVE-2023-33246, CVE-2023-37582: a remote update
//! of a path key led to file writes and code execution). Here a remote update may touch only keys that are
//! safe to change while serving; a path, a start-up-only key, an unknown key or a value with a line break is
//! refused, and the update is all or nothing.

use super::{ConfigError, NamesrvConfig};

/// Keys a remote update may change; each takes effect at once, but `scanNotActiveBrokerInterval`, which
/// applies from the scan's next period.
pub const UPDATABLE_KEYS: &[&str] = &[
    "orderMessageEnable",
    "returnOrderTopicConfigToBroker",
    "enableAllTopicList",
    "enableTopicList",
    "scanNotActiveBrokerInterval",
    "deleteTopicWithBrokerRegistration",
    "supportActingMaster",
    "needWaitForService",
    "waitSecondsForService",
];

/// Keys Java itself never lets a remote update touch.
const ALWAYS_BLACK_LISTED: &[&str] = &["configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigUpdateError {
    /// Java's answer for its deny-list, kept word for word for admin tools that look for it.
    #[error("Can not update config in black list.")]
    BlackListed(String),
    #[error("config key {0} can only be set at start-up (in the -c file)")]
    StartupOnly(String),
    #[error("unknown config key {0}")]
    Unknown(String),
    #[error("the value of config key {0} contains a line break")]
    LineBreak(String),
    #[error("string2Properties error")]
    Unparsable,
    #[error("config update of {0} bytes refused: at most 65536 are taken")]
    TooLarge(usize),
    #[error("{0}")]
    Invalid(String),
}

impl NamesrvConfig {
    fn black_list(&self) -> impl Iterator<Item = &str> {
        ALWAYS_BLACK_LISTED.iter().copied().chain(self.config_black_list.split(';').map(str::trim))
    }

    /// The configuration after applying a remote update given as Java properties text, or why it is refused.
    /// `self` is left as it is either way.
    pub fn with_remote_update(&self, text: &str) -> Result<NamesrvConfig, ConfigUpdateError> {
        self.with_remote_update_of(text, UPDATABLE_KEYS)
    }

    /// [`Self::with_remote_update`] for another set of keys that may change (the controller's).
    pub fn with_remote_update_of(&self, text: &str, updatable: &[&str]) -> Result<NamesrvConfig, ConfigUpdateError> {
        let mut props: Vec<(String, String)> =
            java_properties::read(text.as_bytes()).map_err(|_| ConfigUpdateError::Unparsable)?.into_iter().collect();
        props.sort();
        // A deny-listed key refuses the whole update, whatever else it holds, as in Java.
        if let Some((key, _)) = props.iter().find(|(k, _)| self.black_list().any(|b| b == k)) {
            return Err(ConfigUpdateError::BlackListed(key.clone()));
        }
        let mut next = self.clone();
        for (key, value) in &props {
            if value.contains(['\n', '\r']) || key.contains(['\n', '\r']) {
                return Err(ConfigUpdateError::LineBreak(key.clone()));
            }
            if !NamesrvConfig::is_known_key(key) {
                return Err(ConfigUpdateError::Unknown(key.clone()));
            }
            if !updatable.contains(&key.as_str()) {
                return Err(ConfigUpdateError::StartupOnly(key.clone()));
            }
            next.set(key, value).map_err(|e: ConfigError| ConfigUpdateError::Invalid(e.to_string()))?;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_keys_apply() {
        let c = NamesrvConfig::default();
        let next = c.with_remote_update("orderMessageEnable=true\nscanNotActiveBrokerInterval=2000\n").unwrap();
        assert!(next.order_message_enable);
        assert_eq!(next.scan_not_active_broker_interval, 2000);
        assert!(!c.order_message_enable, "the original is untouched");
    }

    #[test]
    fn everything_else_is_refused_whole() {
        let c = NamesrvConfig::default();
        for (text, want) in [
            ("kvConfigPath=/tmp/x\n", ConfigUpdateError::BlackListed("kvConfigPath".into())),
            ("configStorePath=/etc/cron.d/x\n", ConfigUpdateError::BlackListed("configStorePath".into())),
            ("configBlackList=\n", ConfigUpdateError::BlackListed("configBlackList".into())),
            ("rocketmqHome=/tmp\n", ConfigUpdateError::BlackListed("rocketmqHome".into())),
            ("enableTopicList=true\nkvConfigPath=/tmp/x\n", ConfigUpdateError::BlackListed("kvConfigPath".into())),
            ("listenPort=1\n", ConfigUpdateError::StartupOnly("listenPort".into())),
            ("serverWorkerThreads=1\n", ConfigUpdateError::StartupOnly("serverWorkerThreads".into())),
            ("defaultThreadPoolNums=1\n", ConfigUpdateError::StartupOnly("defaultThreadPoolNums".into())),
            ("productEnvName=evil\n", ConfigUpdateError::StartupOnly("productEnvName".into())),
            ("whatever=1\n", ConfigUpdateError::Unknown("whatever".into())),
            ("enableTopicList=true\\nkvConfigPath=/tmp/x\n", ConfigUpdateError::LineBreak("enableTopicList".into())),
            (
                "orderMessageEnable=true\nwaitSecondsForService=soon\n",
                ConfigUpdateError::Invalid(
                    "invalid value \"soon\" for waitSecondsForService: expected an integer from -2147483648 to 2147483647"
                        .into(),
                ),
            ),
        ] {
            assert_eq!(c.with_remote_update(text).unwrap_err(), want, "{text:?}");
        }
    }

    #[test]
    fn configured_black_list_adds_keys() {
        let c = NamesrvConfig { config_black_list: "orderMessageEnable".into(), ..Default::default() };
        assert_eq!(
            c.with_remote_update("orderMessageEnable=true").unwrap_err(),
            ConfigUpdateError::BlackListed("orderMessageEnable".into())
        );
    }
}
