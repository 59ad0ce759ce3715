//! A shrunk sequence kept with the reference's replies (tests/difftest/fixtures/*.json), so that plain
//! `cargo test` replays it against rocketns without a JVM (tests/replay.rs).

use std::path::{Path, PathBuf};

use rocketns::testing::reply::Reply;
use serde::{Deserialize, Serialize};

use crate::model::Sequence;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fixture {
    /// What the sequence shows, and what was done about it.
    pub about: String,
    /// The Java NameServer version the replies are from.
    pub java: String,
    /// Where it came from: the seed and the date.
    pub found: String,
    /// The COMPATIBILITY.md row when rocketns keeps its own reply at the last step; `None` when rocketns was
    /// fixed and must answer every step as Java did.
    #[serde(default)]
    pub row: Option<String>,
    pub sequence: Sequence,
    /// Java's replies, step by step.
    pub replies: Vec<Vec<Reply>>,
}

impl Fixture {
    pub fn read(path: &Path) -> Result<Fixture, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// The committed fixtures, by name.
pub fn committed() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
}
