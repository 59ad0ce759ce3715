//! The physical limit: a server that answers every frame with one fixed, pre-encoded reply of the size of
//! a real route reply, copying only the request's opaque. It reads and writes exactly as rocketns does
//! (same frame splitter, same reply queue, same vectored writes), but decodes nothing and looks nothing up,
//! so no NameServer can answer the same load faster on the same machine.

use bytes::{Bytes, BytesMut};
use rocketns::json::JsonStyle;
use rocketns::protocol::route_data::TopicRouteParts;
use rocketns::protocol::{BrokerData, QueueData};
use rocketns::remoting::{RemotingCommand, SerializeType};
use rocketns::testing::OutQueue;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

use crate::wire::header_int;

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

pub async fn serve(listener: TcpListener, body: Bytes) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        tokio::spawn(echo(stream, body.clone()));
    }
}

async fn echo(mut stream: TcpStream, body: Bytes) {
    let mut decoder = rocketns::remoting::FrameDecoder::default();
    let mut rbuf = BytesMut::with_capacity(8 * 1024);
    let mut out = OutQueue::new(SerializeType::Json);
    let mut reply = RemotingCommand::response(0, None);
    reply.body = body;
    loop {
        while let Ok(Some(frame)) = decoder.decode(&mut rbuf) {
            let binary = frame.serialize_type == SerializeType::RocketMq;
            reply.opaque = header_int(&frame.header, binary, "opaque").unwrap_or(0) as i32;
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
