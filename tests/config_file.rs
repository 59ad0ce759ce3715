//! The `-c` file that UPDATE_NAMESRV_CONFIG writes back: keys and values that need escaping (separators,
//! comment marks, spaces, control characters, a backslashed path) and non-ASCII text survive the round trip,
//! read back by rocketns and, in the Java stage (`tests/java/reference.sh`), by Java's `Properties.load`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use rocketns::NamesrvConfig;

/// Unknown keys are kept and written back as they were read; each needs some escape, and some are not ASCII.
const TRICKY: &[(&str, &str)] = &[
    ("x.path", r"C:\rocketmq\store"),
    ("x.separators", "a=b:c"),
    ("x.comment marks", "#not a comment!"),
    ("x.leading", "  two spaces, then more   "),
    ("x.controls", "tab\there\nnew line\rreturn\x0cfeed"),
    ("x.accents", "café Zürich"),
    ("x.cjk", "名字服务"),
    ("x.ключ", "значение"),
];

/// The first file, written by hand in Properties' escaped form (what `Properties.store` writes).
const FIRST_FILE: &str = "x.path=C\\:\\\\rocketmq\\\\store\n\
    x.separators=a\\=b\\:c\n\
    x.comment\\ marks=\\#not a comment\\!\n\
    x.leading=\\  two spaces, then more   \n\
    x.controls=tab\\there\\nnew line\\rreturn\\ffeed\n\
    x.accents=caf\\u00E9 Z\\u00FCrich\n\
    x.cjk=\\u540D\\u5B57\\u670D\\u52A1\n\
    x.\\u043A\\u043B\\u044E\\u0447=\\u0437\\u043D\\u0430\\u0447\\u0435\\u043D\\u0438\\u0435\n";

/// Starts a server with `-c` = FIRST_FILE plus a KV path with a space and an accent, updates one switch
/// over the wire, and returns the file the server wrote back and the config it started with.
async fn written_back() -> (PathBuf, NamesrvConfig) {
    let config = test_config();
    let dir = config_dir(&config);
    let kv_dir = dir.join("kv store é");
    let file = dir.join("namesrv.properties");
    let kv_path = kv_dir.join("kvConfig.json").display().to_string();
    let escaped_kv_path = kv_path.replace('\\', "\\\\").replace(':', "\\:").replace('é', "\\u00E9");
    std::fs::write(&file, format!("{FIRST_FILE}bindAddress=127.0.0.1\nlistenPort=0\nkvConfigPath={escaped_kv_path}\n"))
        .unwrap();
    let started = NamesrvConfig::load_file(&file).expect("the first file reads");
    assert_eq!(started.kv_config_path, kv_path);
    let server = start_with_file(started.clone(), Some(file.clone())).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(update_config("orderMessageEnable=true")).await.code, 0);
    server.shutdown().await;
    (file, started)
}

fn expected(started: &NamesrvConfig) -> BTreeMap<String, String> {
    // The NameServer's keys, which the file holds (the controller's defaults are not written).
    let mut expected = started.namesrv_entries();
    expected.insert("orderMessageEnable".into(), "true".into());
    for (k, v) in TRICKY {
        assert_eq!(expected.get(*k).map(String::as_str), Some(*v), "{k} was read from the first file");
    }
    expected
}

#[tokio::test]
async fn rocketns_reads_back_what_an_update_wrote() {
    let (file, started) = written_back().await;
    let text = std::fs::read(&file).unwrap();
    assert!(text.is_ascii(), "Java reads the file as ISO-8859-1: everything else is escaped");
    let reread = NamesrvConfig::load_file(&file).expect("rocketns reads its own file");
    assert_eq!(reread.namesrv_entries(), expected(&started));
}

/// Java's `Properties.load` reads the same keys and values (run by the Java stage: needs `java`).
#[tokio::test]
#[ignore = "needs a JDK: run by tests/java/reference.sh"]
async fn java_reads_back_what_an_update_wrote() {
    let (file, started) = written_back().await;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/PropertiesLoad.java");
    let out = std::process::Command::new("java").arg(&source).arg(&file).output().expect("run java");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let unhex = |h: &str| {
        let units: Vec<u16> = (0..h.len()).step_by(4).map(|i| u16::from_str_radix(&h[i..i + 4], 16).unwrap()).collect();
        String::from_utf16(&units).unwrap()
    };
    let read: BTreeMap<String, String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (unhex(k), unhex(v))
        })
        .collect();
    assert_eq!(read, expected(&started));
}
