//! The controller's settings that an admin may change while it runs (UPDATE_CONTROLLER_CONFIG, 1009, as
//! `mqadmin updateControllerConfig` sends it): whether an election may pick a broker outside the
//! SyncStateSet, whether brokers are told of a new master, and how often the leader looks for groups
//! without one. Java reads the first two while running, the third when a node first leads, and takes
//! any other key too, to no effect until a restart; here any other key is refused, as UPDATE_NAMESRV_CONFIG refuses its start-up keys
//! (`config::update`). A change is written to `controller.properties` under `controllerStorePath` before
//! it is answered, and read back at start over the `-c` file's values: an update answered SUCCESS
//! survives a restart, one refused changes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::ControllerError;
use crate::config::{ConfigUpdateError, NamesrvConfig};
use crate::error::RequestError;
use crate::store::fsutil::{ReplaceError, replace_durably};

/// The keys UPDATE_CONTROLLER_CONFIG may change; each applies from the next decision or scan.
pub const UPDATABLE_KEYS: &[&str] =
    &["enableElectUncleanMaster", "notifyBrokerRoleChanged", "scanInactiveMasterInterval"];

/// The file under `controllerStorePath` that keeps the changes.
pub const FILE: &str = "controller.properties";

/// The longest update body taken (as UPDATE_NAMESRV_CONFIG's).
const MAX_UPDATE_BODY: usize = 64 * 1024;

pub struct Switches {
    /// The configuration the controller started with, its updatable keys as last changed: read by
    /// decisions without a lock; replaced whole by `update`, which alone writes it.
    current: ArcSwap<NamesrvConfig>,
    file: PathBuf,
    /// One update at a time, from the check to the file being written and the change applied.
    updating: tokio::sync::Mutex<()>,
}

impl Switches {
    /// `config`'s values, with those kept in `store_path`'s file by earlier updates over them. A file that
    /// cannot be read or holds a value that cannot be taken stops the start: the controller would
    /// otherwise run on values other than the ones it acknowledged.
    pub fn load(config: &NamesrvConfig, store_path: &Path) -> Result<Switches, ControllerError> {
        let file = store_path.join(FILE);
        let failed = |source| ControllerError::Store { path: file.display().to_string(), source };
        let current = match std::fs::read(&file) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let current = config
                    .with_remote_update_of(&text, UPDATABLE_KEYS)
                    .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
                tracing::info!(file = %file.display(), "controller: settings changed by UPDATE_CONTROLLER_CONFIG read back");
                current
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => config.clone(),
            Err(e) => return Err(failed(e)),
        };
        Ok(Switches { current: ArcSwap::from_pointee(current), file, updating: tokio::sync::Mutex::new(()) })
    }

    pub fn elect_unclean_master(&self) -> bool {
        self.current.load().enable_elect_unclean_master
    }

    pub fn notify_broker_role_changed(&self) -> bool {
        self.current.load().notify_broker_role_changed
    }

    pub fn scan_inactive_master_interval(&self) -> Duration {
        Duration::from_millis(self.current.load().scan_inactive_master_interval.max(1))
    }

    /// The updatable keys as `key=value` lines, for GET_CONTROLLER_CONFIG.
    pub fn text(&self) -> String {
        text_of(&self.current.load())
    }

    /// Applies an update given as Java properties text, all or nothing: checked, written durably, then
    /// applied. Refusals are UPDATE_NAMESRV_CONFIG's, with its codes (a deny-listed key: Java's
    /// NO_PERMISSION and remark).
    pub async fn update(&self, body: &[u8]) -> Result<(), RequestError> {
        if body.len() > MAX_UPDATE_BODY {
            return Err(ConfigUpdateError::TooLarge(body.len()).into());
        }
        let text = std::str::from_utf8(body).map_err(|_| ConfigUpdateError::Unparsable)?;
        let _one_at_a_time = self.updating.lock().await;
        let next = self.current.load().with_remote_update_of(text, UPDATABLE_KEYS)?;
        let contents = format!(
            "# Written by rocketns on UPDATE_CONTROLLER_CONFIG; read at start over the -c file.\n{}",
            text_of(&next)
        );
        let file = self.file.clone();
        let written = tokio::task::spawn_blocking(move || replace_durably(&file, contents.as_bytes()))
            .await
            .unwrap_or_else(|e| Err(ReplaceError::Unchanged(std::io::Error::other(e))));
        match written {
            Ok(()) => {
                self.current.store(Arc::new(next));
                // Anyone who reaches the port may update it: a turn of the client lines, as the NameServer's.
                crate::limits::throttle::client_log!(
                    info,
                    update = %crate::error::shown(text.trim(), 256),
                    "controller config updated"
                );
                Ok(())
            }
            Err(ReplaceError::Unchanged(e)) => {
                tracing::warn!(error = %e, "controller config update refused: its file could not be written");
                Err(RequestError::Persist(format!("cannot write {}: {e}", self.file.display())))
            }
            Err(ReplaceError::Replaced(e)) => {
                // The file holds the update, durable or not: the controller follows it, as a restart would.
                self.current.store(Arc::new(next));
                Err(RequestError::Persist(format!("cannot write {} durably: {e}", self.file.display())))
            }
        }
    }
}

fn text_of(c: &NamesrvConfig) -> String {
    format!(
        "enableElectUncleanMaster={}\nnotifyBrokerRoleChanged={}\nscanInactiveMasterInterval={}\n",
        c.enable_elect_unclean_master, c.notify_broker_role_changed, c.scan_inactive_master_interval
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No file can be created in `dir`: immutable (`chattr +i`, which stops root too) or, for another
    /// user, read-only; `false` undoes it.
    fn lock(dir: &Path, locked: bool) {
        let root = std::fs::read_to_string("/proc/self/status")
            .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")));
        if root {
            let flag = if locked { "+i" } else { "-i" };
            let done = std::process::Command::new("chattr").arg(flag).arg(dir).status().expect("chattr");
            assert!(done.success(), "chattr {flag} (the test folder's filesystem must support it)");
        } else {
            use std::os::unix::fs::PermissionsExt;
            let mode = if locked { 0o555 } else { 0o755 };
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
    }

    #[tokio::test]
    async fn an_update_is_written_before_it_applies_and_one_that_cannot_be_changes_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = NamesrvConfig::default();
        let switches = Switches::load(&config, dir.path()).expect("load");
        assert!(!switches.elect_unclean_master() && switches.notify_broker_role_changed());
        switches.update(b"notifyBrokerRoleChanged=false\n").await.expect("update");
        assert!(!switches.notify_broker_role_changed());

        lock(dir.path(), true);
        let failed = switches.update(b"enableElectUncleanMaster=true\nnotifyBrokerRoleChanged=true\n").await;
        lock(dir.path(), false);
        assert!(matches!(failed, Err(RequestError::Persist(_))), "{failed:?}");
        assert!(!switches.elect_unclean_master() && !switches.notify_broker_role_changed(), "nothing applied");
        let kept = std::fs::read_to_string(dir.path().join(FILE)).expect("the file");
        assert!(
            kept.ends_with(
                "enableElectUncleanMaster=false\nnotifyBrokerRoleChanged=false\nscanInactiveMasterInterval=5000\n"
            ),
            "{kept}"
        );

        let refused = switches.update(b"enableElectUncleanMaster=true\nlistenPort=1\n").await;
        assert!(matches!(refused, Err(RequestError::ConfigUpdate(ConfigUpdateError::StartupOnly(_)))), "{refused:?}");
        assert!(!switches.elect_unclean_master(), "all or nothing");

        switches.update(b"enableElectUncleanMaster=true\n").await.expect("once the fault is gone");
        let restarted = Switches::load(&config, dir.path()).expect("load");
        assert!(restarted.elect_unclean_master() && !restarted.notify_broker_role_changed(), "read back at start");
    }
}
