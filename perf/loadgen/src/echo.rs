//! The yardstick: servers that answer every frame with one fixed reply, a real route reply's bytes with the
//! request's opaque, decoding nothing else and looking nothing up.
//!
//! - The plain echo (the default, and what ratios are stated against): the best simple server for those
//!   replies, sharing none of rocketns's code on its path: large reads, its own frame splitter, every reply
//!   of a read assembled in one contiguous buffer, one write.
//! - The rocketns-shaped echo (`--rocketns-shaped`): reads and writes exactly as rocketns does (its frame
//!   decoder, reply queue and vectored writes), so the gap between the two echoes is rocketns's I/O, and the
//!   gap between it and rocketns is the rest.

use bytes::{Buf, Bytes, BytesMut};
use rocketns::protocol::json::JsonStyle;
use rocketns::protocol::route_data::TopicRouteParts;
use rocketns::protocol::{BrokerData, QueueData};
use rocketns::remoting::{OutQueue, RemotingCommand, SerializeType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

use crate::wire::{Field, header_int};

/// The standard-JSON route of a topic on `brokers` broker groups (with `slaves`), as rocketns encodes it.
pub fn route_body(brokers: usize, slaves: bool) -> Bytes {
    let datas: Vec<BrokerData> = (0..brokers)
        .map(|b| {
            let mut d = BrokerData::new("DefaultCluster".into(), format!("broker-{b}").into());
            d.broker_addrs.insert(0, format!("10.0.{b}.1:10911").into());
            if slaves {
                d.broker_addrs.insert(1, format!("10.0.{b}.2:10911").into());
            }
            d
        })
        .collect();
    let queues: Vec<QueueData> = (0..brokers)
        .map(|b| QueueData {
            broker_name: format!("broker-{b}").into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_sys_flag: 0,
        })
        .collect();
    let datas: Vec<&BrokerData> = datas.iter().collect();
    let queues: Vec<&QueueData> = queues.iter().collect();
    let parts = TopicRouteParts {
        broker_datas: &datas,
        filter_servers: &[],
        order_topic_conf: None,
        queue_datas: &queues,
        mappings: None,
    };
    Bytes::from(parts.encode(JsonStyle::Standard))
}

pub async fn serve(listener: TcpListener, body: Bytes, rocketns_shaped: bool) {
    let reply = PlainReply::new(body.clone());
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        if rocketns_shaped {
            tokio::spawn(rocketns_shaped_echo(stream, body.clone()));
        } else {
            tokio::spawn(plain_echo(stream, reply.clone()));
        }
    }
}

/// A reply's bytes around its opaque: rocketns's own encoding of a successful reply with that body, taken
/// once at start (not on the path), split where the opaque's digits go.
#[derive(Clone)]
struct PlainReply {
    before_opaque: Bytes,
    after_opaque: Bytes,
    body: Bytes,
}

impl PlainReply {
    fn new(body: Bytes) -> Self {
        const MARK: i32 = 987_654_321;
        let mut reply = RemotingCommand::response(0, None);
        reply.opaque = MARK;
        let mut head = BytesMut::new();
        reply.encode_head(SerializeType::Json, reply.body.len(), &mut head);
        // The JSON header starts after the frame length and the header length.
        let header = &head[8..];
        let mark = MARK.to_string();
        let at = header.windows(mark.len()).position(|w| w == mark.as_bytes()).expect("opaque in the header");
        PlainReply {
            before_opaque: Bytes::copy_from_slice(&header[..at]),
            after_opaque: Bytes::copy_from_slice(&header[at + mark.len()..]),
            body,
        }
    }

    fn append(&self, opaque: i32, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(opaque).as_bytes();
        let header_len = self.before_opaque.len() + digits.len() + self.after_opaque.len();
        out.extend_from_slice(&((4 + header_len + self.body.len()) as u32).to_be_bytes());
        out.extend_from_slice(&(header_len as u32).to_be_bytes());
        out.extend_from_slice(&self.before_opaque);
        out.extend_from_slice(digits);
        out.extend_from_slice(&self.after_opaque);
        out.extend_from_slice(&self.body);
    }
}

async fn plain_echo(mut stream: TcpStream, reply: PlainReply) {
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        let mut at = 0;
        while input.len() - at >= 8 {
            let frame = &input[at..];
            let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            if frame.len() < 4 + len {
                // A large frame (a registration): room for all of it.
                input.reserve(4 + len - frame.len());
                break;
            }
            let header_field = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            let header_len = ((header_field & 0x00FF_FFFF) as usize).min(len.saturating_sub(4));
            let header = &frame[8..8 + header_len];
            reply.append(header_int(header, header_field >> 24 == 1, Field::Opaque).unwrap_or(0) as i32, &mut out);
            at += 4 + len;
        }
        input.advance(at);
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if input.capacity() - input.len() < 16 * 1024 {
            input.reserve(64 * 1024);
        }
        match stream.read_buf(&mut input).await {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}

async fn rocketns_shaped_echo(mut stream: TcpStream, body: Bytes) {
    let mut decoder = rocketns::remoting::FrameDecoder::default();
    let mut rbuf = BytesMut::with_capacity(8 * 1024);
    let mut out = OutQueue::new(SerializeType::Json);
    let mut reply = RemotingCommand::response(0, None);
    reply.body = body;
    loop {
        while let Ok(Some(frame)) = decoder.decode(&mut rbuf) {
            let binary = frame.serialize_type == SerializeType::RocketMq;
            reply.opaque = header_int(&frame.header, binary, Field::Opaque).unwrap_or(0) as i32;
            out.push(&reply);
        }
        if out.flush(&mut stream).await.is_err() {
            return;
        }
        match stream.read_buf(&mut rbuf).await {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}
