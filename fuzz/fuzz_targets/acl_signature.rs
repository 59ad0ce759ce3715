//! Any frame through the signature check, with access control on: let through or refused, never a panic.
//! A frame signed with the fuzzer's own fields must pass, and must fail once its body changes.
#![no_main]

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use rocketns::processor::acl::{ACCESS_KEY, AccessControl, SIGNATURE, signature};
use rocketns::remoting::{FrameDecoder, decode_command};
use tokio_util::codec::Decoder;

const SECRET: &str = "fuzz-secret";

fn access_control() -> &'static AccessControl {
    static ACL: OnceLock<AccessControl> = OnceLock::new();
    ACL.get_or_init(|| AccessControl::new(HashMap::from([("fuzz-ak".to_string(), SECRET.to_string())]), true))
}

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    let Ok(Some(frame)) = FrameDecoder::new(1 << 20).decode(&mut buf) else { return };
    let Ok(mut cmd) = decode_command(frame) else { return };
    let _ = access_control().check(&cmd);

    let ext = cmd.ext_fields.get_or_insert_with(Default::default);
    ext.insert(ACCESS_KEY, "fuzz-ak");
    let sig = signature(SECRET, ext, &cmd.body);
    ext.insert(SIGNATURE, sig);
    assert!(access_control().check(&cmd).is_ok(), "a correctly signed request was refused");
    let mut body = cmd.body.to_vec();
    body.push(0);
    cmd.body = Bytes::from(body);
    assert!(access_control().check(&cmd).is_err(), "a changed body kept its signature");
});
