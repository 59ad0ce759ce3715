//! Any bytes as a REGISTER_BROKER body, JSON or zlib, old or new broker version: parsed or refused, never a
//! panic, never more than the inflate limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::protocol::RegisterBrokerBody;

fuzz_target!(|data: &[u8]| {
    for (compressed, version) in [(false, 479), (true, 479), (false, 0), (true, 413)] {
        let _ = RegisterBrokerBody::decode(data, compressed, version);
    }
});
