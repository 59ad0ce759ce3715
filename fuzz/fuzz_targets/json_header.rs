//! Any bytes as a JSON header: decoded or refused, never a panic; the fast reader means the same as the
//! general reader (same command, or both refuse); what decodes re-encodes and decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::remoting::decode::{decode_general, decode_json_header};

fuzz_target!(|data: &[u8]| {
    let decoded = decode_json_header(data);
    assert_eq!(decoded.is_ok(), decode_general(data).is_ok(), "{:?}", String::from_utf8_lossy(data));
    if let Ok(cmd) = decoded {
        assert_eq!(Ok(&cmd), decode_general(data).as_ref());
        let mut out = Vec::new();
        cmd.write_json_header(&mut out);
        let again = decode_json_header(&out).expect("our own header decodes");
        assert_eq!(
            (again.code, again.opaque, again.flag, &again.ext_fields),
            (cmd.code, cmd.opaque, cmd.flag, &cmd.ext_fields)
        );
    }
});
