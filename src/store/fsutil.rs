//! Writing files so that a crash at any moment leaves either the old or the new content, never a torn file,
//! and a write that fails leaves the old content in place.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a file was not replaced, and what it holds now.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The file holds what it held before.
    #[error(transparent)]
    Unchanged(std::io::Error),
    /// The new content was renamed into place but its directory could not be synced, and the old content
    /// could not be put back: the file holds the new content, which a power loss may undo.
    #[error("{0} (the new content is in place, but not known to be durable)")]
    Replaced(std::io::Error),
}

/// Writes `contents` to a temporary file beside `path`, syncs it, renames it over `path` and syncs the
/// directory. Each write has a temporary file of its own, so no two writes can ever share one, even if a
/// caller lets a write run on after it stopped waiting for it. A directory that cannot be synced after the
/// rename is `Replaced`: the caller has no old content to put back (the route file: written again later).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), ReplaceError> {
    write_atomically_with(path, |out| out.write_all(contents))
}

/// [`write_atomically`] of what `write` writes, through a buffer: for content too large to hold in memory
/// first (the route file of a million topics).
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), ReplaceError> {
    let (dir, tmp) = temporary(path).map_err(ReplaceError::Unchanged)?;
    let written = (|| {
        let mut out = BufWriter::with_capacity(64 * 1024, File::create(&tmp)?);
        write(&mut out)?;
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(ReplaceError::Unchanged(e));
    }
    sync_dir(&dir).map_err(ReplaceError::Replaced)
}

/// `write_atomically`, for a change a client is told about: if the directory cannot be synced after the
/// rename, the old content (or no file, if there was none) is put back, so that a change reported as
/// failed has changed nothing.
pub fn replace_durably(path: &Path, contents: &[u8]) -> Result<(), ReplaceError> {
    let previous = match fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ReplaceError::Unchanged(e)),
    };
    let failed = match write_atomically(path, contents) {
        Err(ReplaceError::Replaced(e)) => e,
        other => return other,
    };
    let restored = match &previous {
        Some(old) => match write_atomically(path, old) {
            // The old content is back in place, durable or not: either way nothing reported changed.
            Ok(()) | Err(ReplaceError::Replaced(_)) => true,
            Err(ReplaceError::Unchanged(_)) => false,
        },
        None => fs::remove_file(path).is_ok(),
    };
    Err(if restored { ReplaceError::Unchanged(failed) } else { ReplaceError::Replaced(failed) })
}

/// The directory of `path` (created if missing) and a temporary name in it for one write.
fn temporary(path: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    let seq = WRITES.fetch_add(1, Ordering::Relaxed);
    Ok((dir.clone(), dir.join(format!(".{name}.tmp-{}-{seq}", std::process::id()))))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes the temporary files a killed process left beside `path` (a process still running keeps its
/// own: two rocketns share a folder during an upgrade).
pub fn remove_stale_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        let pid = rest.split('-').next().unwrap_or_default();
        let running = !pid.is_empty() && Path::new("/proc").join(pid).exists();
        if !running && fs::remove_file(entry.path()).is_ok() {
            tracing::info!(file = %entry.path().display(), "removed a temporary file left by a stopped process");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("kv.json");
        write_atomically(&path, b"one").unwrap();
        replace_durably(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("kv.json")]);
    }

    /// Two writes of the same file at once (a caller that stopped waiting for one, and the next) each have
    /// a temporary file of their own: the file always ends as one whole content, never a mix.
    #[test]
    fn writes_at_once_never_share_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.json");
        let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 256 * 1024]).collect();
        for _ in 0..10 {
            std::thread::scope(|s| {
                for c in &contents {
                    let path = &path;
                    s.spawn(move || write_atomically(path, c).expect("written"));
                }
            });
            let now = fs::read(&path).unwrap();
            assert!(contents.contains(&now), "a whole content, not a mix of two");
        }
    }

    #[test]
    fn stale_temporaries_of_stopped_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.json");
        let stale = dir.path().join(".kv.json.tmp-999999999-3");
        let ours = dir.path().join(format!(".kv.json.tmp-{}-7", std::process::id()));
        fs::write(&stale, b"x").unwrap();
        fs::write(&ours, b"y").unwrap();
        remove_stale_temporaries(&path);
        assert!(!stale.exists() && ours.exists());
    }
}
