//! KV durability under SIGKILL: the real binary is killed at varying moments while four clients write KV
//! entries, again and again on the same file. After every kill the file must parse, hold every acknowledged
//! write (or, for an overwritten key, a newer one that was in flight), and hold nothing the clients never sent.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{blocking_request, kv_put, spawn_binary};

const ROUNDS: u64 = 8;
const CLIENTS: usize = 4;

#[derive(Default)]
struct Sent {
    /// key → values written, in order; the last `acked` of them were acknowledged.
    values: BTreeMap<String, Vec<String>>,
    acked: BTreeMap<String, usize>,
}

fn client(addr: String, id: usize, round: u64, sent: Arc<Mutex<Sent>>) {
    let Ok(mut stream) = std::net::TcpStream::connect(&addr) else { return };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    for seq in 0.. {
        // Fresh keys and one key overwritten again and again.
        let (key, value) = if seq % 2 == 0 {
            (format!("c{id}-r{round}-{seq}"), format!("v{seq}"))
        } else {
            (format!("last-{id}"), format!("r{round}-{seq}"))
        };
        let index = {
            let mut s = sent.lock().unwrap();
            let values = s.values.entry(key.clone()).or_default();
            values.push(value.clone());
            values.len()
        };
        let put = kv_put("crash", &key, &value);
        match blocking_request(&mut stream, &put) {
            Some(resp) if resp.code == 0 => {
                sent.lock().unwrap().acked.insert(key, index);
            }
            _ => return,
        }
    }
}

#[test]
fn kv_file_survives_sigkill_during_writes() {
    let dir = tempfile::tempdir().unwrap();
    let kv_path = dir.path().join("kvConfig.json");
    let config = common::properties_file(dir.path(), 0, "");
    let sent = Arc::new(Mutex::new(Sent::default()));
    let mut total_acked = 0;
    for round in 0..ROUNDS {
        let (mut child, addr) = spawn_binary(&config);
        let acked_before = sent.lock().unwrap().acked.len();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| {
                let (addr, sent) = (addr.clone(), sent.clone());
                std::thread::spawn(move || client(addr, id, round, sent))
            })
            .collect();
        // Each round kills only once a write of its own is acknowledged (fsync takes what it takes on a busy
        // machine; the bound only stops a broken server from hanging the test), then at a different moment
        // each round, 0 to 140 ms later.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while sent.lock().unwrap().acked.len() == acked_before {
            assert!(std::time::Instant::now() < deadline, "no write acknowledged within 60 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis((round * 37) % 140));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        for c in clients {
            c.join().expect("client thread");
        }

        let s = sent.lock().unwrap();
        let text = match std::fs::read(&kv_path) {
            Ok(text) => text,
            // No file is right only while nothing was ever acknowledged.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && s.acked.is_empty() => continue,
            Err(e) => panic!("the KV file is missing after {} acknowledged writes: {e}", s.acked.len()),
        };
        let file: serde_json::Value = serde_json::from_slice(&text).expect("the KV file parses after SIGKILL");
        let stored = file["configTable"]["crash"].as_object().expect("namespace present");
        for (key, value) in stored {
            let written = s.values.get(key).unwrap_or_else(|| panic!("{key} was never written"));
            let at = written.iter().position(|v| v == value).unwrap_or_else(|| panic!("{key}={value} never sent"));
            let acked = s.acked.get(key).copied().unwrap_or(0);
            assert!(at + 1 >= acked, "{key}: file holds {value}, older than the acknowledged write #{acked}");
        }
        for key in s.acked.keys() {
            assert!(stored.contains_key(key), "acknowledged {key} lost");
        }
        total_acked = s.acked.len();
    }
    // Every round waited for a write of its own to be acknowledged.
    assert!(total_acked >= ROUNDS as usize, "the clients got writes through: {total_acked}");
}
