//! Any byte stream, cut at every point: the frame splitter never panics, never yields a frame larger than the
//! input, and a stream that splits cleanly splits the same way whole or in pieces.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rocketns::remoting::{FrameDecoder, decode_command};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let mut whole = BytesMut::from(data);
    let mut decoder = FrameDecoder::new(1 << 20);
    let mut frames = Vec::new();
    while let Ok(Some(frame)) = decoder.decode(&mut whole) {
        assert!(frame.header.len() + frame.body.len() + 8 <= data.len());
        let _ = decode_command(frame.clone());
        frames.push(frame);
    }
    let mut pieces = BytesMut::new();
    let mut again = Vec::new();
    for chunk in data.chunks(7) {
        pieces.extend_from_slice(chunk);
        while let Ok(Some(frame)) = decoder.decode(&mut pieces) {
            again.push(frame);
        }
    }
    assert_eq!(frames.len(), again.len());
});
