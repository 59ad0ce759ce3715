//! Any bytes as a ROCKETMQ binary header: decoded or refused, never a panic; what decodes re-encodes and
//! decodes to the same fields (those read in place from the frame and those replaced for invalid UTF-8; a
//! map of only null fields is written as no map).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::remoting::RemotingCommand;
use rocketns::remoting::decode::decode_binary_header;

fuzz_target!(|data: &[u8]| {
    if let Ok(cmd) = decode_binary_header(data) {
        let mut out = Vec::new();
        cmd.write_binary_header(&mut out);
        let again = decode_binary_header(&out).expect("our own header decodes");
        let fields = |c: &RemotingCommand| c.ext_fields.clone().unwrap_or_default();
        assert_eq!(
            (again.code, again.opaque, again.flag, fields(&again)),
            (cmd.code, cmd.opaque, cmd.flag, fields(&cmd))
        );
    }
});
