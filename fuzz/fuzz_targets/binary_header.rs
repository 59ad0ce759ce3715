//! Any bytes as a ROCKETMQ binary header: decoded or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::remoting::decode::decode_binary_header;

fuzz_target!(|data: &[u8]| {
    let _ = decode_binary_header(data);
});
