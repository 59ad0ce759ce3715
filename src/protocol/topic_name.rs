//! Java's `TopicValidator` rules for topic names: 1 to 127 characters of `[%|a-zA-Z0-9_-]`.
//!
//! Java brokers never register other names (they validate on creation), so a name that breaks these rules
//! comes from a faulty or hostile peer: registrations skip it, REGISTER_TOPIC_IN_NAMESRV refuses it.

/// `TopicValidator.TOPIC_MAX_LENGTH`.
pub const TOPIC_MAX_LENGTH: usize = 127;

pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_MAX_LENGTH
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_rules() {
        for ok in ["TopicTest", "%RETRY%group", "rmq_sys_SYNC_BROKER_MEMBER_broker-a", "a|b", &"t".repeat(127)] {
            assert!(is_valid_topic_name(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "中", "a\"b", &"t".repeat(128), "a\nb"] {
            assert!(!is_valid_topic_name(bad), "{bad:?}");
        }
    }
}
