//! The RocketMQ remoting protocol: frames, command headers in both encodings.

pub mod command;
pub mod decode;
pub mod frame;
mod json_header;
mod json_header_plain;

pub use command::{ExtFields, LanguageCode, RemotingCommand};
pub use decode::{HeaderError, decode_command};
pub use frame::{FrameDecoder, FrameError, RawFrame, SerializeType, announced_frame_len};
