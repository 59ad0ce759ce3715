//! Any bytes as an UPDATE_NAMESRV_CONFIG body: refused or applied, never a panic; an accepted update only
//! ever changes allow-listed keys and never holds a line break.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::NamesrvConfig;
use rocketns::config::UPDATABLE_KEYS;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let base = NamesrvConfig::default();
    if let Ok(next) = base.with_remote_update(text) {
        let (before, after) = (base.entries(), next.entries());
        for (key, value) in &after {
            assert!(!value.contains('\n') && !value.contains('\r'));
            if before.get(key) != Some(value) {
                assert!(UPDATABLE_KEYS.contains(&key.as_str()), "{key} changed");
            }
        }
    }
});
