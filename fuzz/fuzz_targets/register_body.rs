//! Any bytes as a REGISTER_BROKER body, JSON or zlib, old or new broker version: parsed or refused, never a
//! panic, never more than the inflate limit; and, decoded within an allowance as the server decodes it,
//! never building more than that allowance says.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketns::protocol::RegisterBrokerBody;
use rocketns::protocol::register_body::ReceivedBody;

fuzz_target!(|data: &[u8]| {
    for (compressed, version) in [(false, 479), (true, 479), (false, 0), (true, 413)] {
        let _ = RegisterBrokerBody::decode(data, compressed, version);
        let received = ReceivedBody { bytes: bytes::Bytes::copy_from_slice(data), compressed, version, crc32: 0 };
        if let Ok((_, used)) = received.decode_within(64 * 1024) {
            assert!(used <= 64 * 1024, "a decode within its allowance built {used} bytes");
        }
    }
});
