//! Two JSON headers on one connection, the second read through the first (the input's first two bytes,
//! little-endian, say how long the first is): the second must decode to what the general reader makes of
//! it, or be refused by both, whether or not the kept first header read it.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rocketns::remoting::decode::decode_general;
use rocketns::remoting::{RawFrame, RemotingCommand, RepeatedHeader, SerializeType};

fn frame(header: &[u8]) -> RawFrame {
    RawFrame { serialize_type: SerializeType::Json, header: Bytes::copy_from_slice(header), body: Bytes::new() }
}

fuzz_target!(|data: &[u8]| {
    let Some((split, rest)) = data.split_first_chunk::<2>() else { return };
    let (first, second) = rest.split_at((u16::from_le_bytes(*split) as usize).min(rest.len()));
    let mut headers = RepeatedHeader::default();
    let _ = headers.decode_into(frame(first), &mut RemotingCommand::blank());
    let mut cmd = RemotingCommand::blank();
    let got = headers.decode_into(frame(second), &mut cmd).map(|()| cmd);
    let want = decode_general(second);
    assert_eq!(got.is_ok(), want.is_ok(), "{:?}", String::from_utf8_lossy(second));
    if let (Ok(got), Ok(want)) = (got, want) {
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(second));
        let fields = |c: &RemotingCommand| {
            c.ext_fields.as_ref().map(|e| e.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>())
        };
        assert_eq!(fields(&got), fields(&want));
    }
});
