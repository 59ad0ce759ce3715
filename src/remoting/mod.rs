//! The RocketMQ remoting protocol: frames, command headers in both encodings, and the queue of replies.

pub mod command;
pub mod decode;
pub mod frame;
mod json_header;
mod json_header_plain;
pub mod lent;
mod out_queue;
pub mod repeated;

#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use command::{ExtFields, LanguageCode, RemotingCommand};
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use decode::{HeaderError, decode_command, decode_command_into, peek_header};
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use frame::{FrameDecoder, FrameError, RawFrame, SerializeType, announced_frame_len};
pub use out_queue::OutQueue;
pub use repeated::RepeatedHeader;
