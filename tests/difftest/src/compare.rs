//! How each step's replies are compared: byte for byte, except where a COMPATIBILITY.md row names a
//! normalization for that request (the same ones the fixed corpus uses, and no others).

use rocketns::testing::reply::{Compare, HASH_ORDER, Reply};

/// The paths, the address and the port of GET_NAMESRV_CONFIG are each server's own.
pub const CONFIG: Compare = Compare::Properties {
    ignore: &["rocketmqHome", "kvConfigPath", "configStorePath", "bindAddress", "listenPort"],
    row: "namesrv-config-keys",
};

/// The comparison for a reply to `code`.
pub fn compare_for(code: i32) -> Compare {
    match code {
        // Routes, cluster info, topic lists and KV tables (a namespace's list, the order topic configs in a
        // registration's reply): Java's HashMap order.
        103 | 105 | 106 | 206 | 219 | 224 | 311 | 312 | 313 => HASH_ORDER,
        304 => Compare::Unordered { ignore: &["brokerAddr"], row: "system-topics-broker" },
        319 => CONFIG,
        _ => Compare::Exact,
    }
}

/// rocketns's reply in the shapes of Java 4.9.7's classes, for the report against a 4.x NameServer: its FAQ
/// link in remarks, and BrokerData without `enableActingMaster` (COMPATIBILITY.md, cluster-test-4x-shapes).
/// The differences that remain are behaviour.
pub fn as_4x(reply: &Reply) -> Reply {
    let mut out = reply.clone();
    out.remark = out.remark.map(|r| {
        r.replace("https://rocketmq.apache.org/docs/bestPractice/06FAQ", "http://rocketmq.apache.org/docs/faq/")
    });
    out.body =
        out.body.map(|b| b.replace(",\"enableActingMaster\":false", "").replace(",\"enableActingMaster\":true", ""));
    out
}
