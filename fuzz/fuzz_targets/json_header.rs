//! Any bytes as a JSON header: decoded or refused, never a panic; what decodes re-encodes and decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::remoting::decode::decode_json_header;

fuzz_target!(|data: &[u8]| {
    if let Ok(cmd) = decode_json_header(data) {
        let mut out = Vec::new();
        cmd.write_json_header(&mut out);
        let again = decode_json_header(&out).expect("our own header decodes");
        assert_eq!(
            (again.code, again.opaque, again.flag, &again.ext_fields),
            (cmd.code, cmd.opaque, cmd.flag, &cmd.ext_fields)
        );
    }
});
