//! `RemotingCommand`: the header every request and response carries, and how it is written in both encodings.

use bytes::{BufMut, Bytes, BytesMut};
use compact_str::CompactString;
use smallvec::SmallVec;

use super::frame::{SerializeType, frame_prefix};
use crate::json::{self, JsonStyle};

/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: the request is oneway and must not be answered.
pub const FLAG_ONEWAY: i32 = 0x2;

/// `LanguageCode`: the byte is the ordinal used by the binary header, the name the one used in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LanguageCode {
    Java,
    Cpp,
    Dotnet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
}

const LANGUAGES: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::Dotnet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    pub fn from_code(code: u8) -> Option<Self> {
        LANGUAGES.get(code as usize).map(|(l, _)| *l)
    }

    pub fn from_name(name: &str) -> Option<Self> {
        LANGUAGES.iter().find(|(_, n)| *n == name).map(|(l, _)| *l)
    }

    pub fn code(self) -> u8 {
        LANGUAGES.iter().position(|(l, _)| *l == self).unwrap_or(0) as u8
    }

    pub fn name(self) -> &'static str {
        LANGUAGES[self.code() as usize].1
    }
}

/// The `extFields` map: custom header fields, all values as strings.
///
/// Kept as a list because a request has a handful of fields; on a repeated key the last one wins, as when
/// Java fills its `HashMap`. A typical request's fields (a few, short) live inline: decoding a route query
/// allocates nothing for them.
#[derive(Debug, Clone, Default)]
pub struct ExtFields(SmallVec<[(CompactString, CompactString); 2]>);

/// Two maps are equal when they hold the same fields, in whatever order.
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.sorted() == other.sorted()
    }
}

impl Eq for ExtFields {}

impl ExtFields {
    pub fn new() -> Self {
        ExtFields(SmallVec::new())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Adds or replaces a field (the one `get` reads, when a decoded header repeated the key).
    pub fn insert(&mut self, key: impl Into<CompactString>, value: impl Into<CompactString>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().rev().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Appends without looking for an earlier value: for decoders, where `get` already prefers the last.
    pub(crate) fn push(&mut self, key: CompactString, value: CompactString) {
        self.0.push((key, value));
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Fields sorted by key, so that written headers are deterministic.
    fn sorted(&self) -> Vec<(&str, &str)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }
}

impl<K: Into<CompactString>, V: Into<CompactString>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut e = ExtFields::new();
        for (k, v) in iter {
            e.insert(k, v);
        }
        e
    }
}

/// A request or response as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    pub code: i32,
    pub language: Option<LanguageCode>,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    /// `None` omits `extFields`; `Some` of an empty map writes `{}` as Java does when a header class is set.
    pub ext_fields: Option<ExtFields>,
    pub body: Bytes,
}

impl RemotingCommand {
    /// A request as a client would send it (used by tests, the load generator and tools).
    pub fn request(code: i32, ext_fields: ExtFields) -> Self {
        RemotingCommand {
            code,
            language: Some(LanguageCode::Java),
            version: crate::protocol::codes::version::CURRENT,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: Some(ext_fields),
            body: Bytes::new(),
        }
    }

    /// A reply from this server: Java 5.3's language and version; `opaque` is set when it is sent.
    pub fn response(code: i32, remark: Option<String>) -> Self {
        RemotingCommand {
            code,
            language: Some(LanguageCode::Java),
            version: crate::protocol::codes::version::CURRENT,
            opaque: 0,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: None,
            body: Bytes::new(),
        }
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref().and_then(|e| e.get(key))
    }

    /// Writes the whole frame (prefix, header, body) into `dst`.
    pub fn encode(&self, ty: SerializeType, dst: &mut BytesMut) {
        self.encode_head(ty, self.body.len(), dst);
        dst.extend_from_slice(&self.body);
    }

    /// Writes the frame prefix and header of a frame whose body, `body_len` bytes, the caller writes next
    /// (`self.body`, or a body the command does not hold).
    pub fn encode_head(&self, ty: SerializeType, body_len: usize, dst: &mut BytesMut) {
        let start = dst.len();
        dst.put_bytes(0, 8);
        match ty {
            SerializeType::Json => self.write_json_header(dst),
            SerializeType::RocketMq => self.write_binary_header(dst),
        }
        let header_len = dst.len() - start - 8;
        dst[start..start + 8].copy_from_slice(&frame_prefix(ty, header_len, body_len));
    }

    /// The JSON header exactly as fastjson writes a `RemotingCommand`: alphabetical, nulls omitted.
    pub fn write_json_header<B: BufMut>(&self, out: &mut B) {
        out.put_slice(b"{\"code\":");
        json::write_int(out, self.code as i64);
        if let Some(ext) = &self.ext_fields {
            out.put_slice(b",\"extFields\":{");
            for (i, (k, v)) in ext.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                json::write_key(out, k);
                json::write_str(out, v, JsonStyle::Fastjson);
            }
            out.put_u8(b'}');
        }
        out.put_slice(b",\"flag\":");
        json::write_int(out, self.flag as i64);
        if let Some(lang) = self.language {
            out.put_slice(b",\"language\":\"");
            out.put_slice(lang.name().as_bytes());
            out.put_u8(b'"');
        }
        out.put_slice(b",\"opaque\":");
        json::write_int(out, self.opaque as i64);
        if let Some(remark) = &self.remark {
            out.put_slice(b",\"remark\":");
            json::write_str(out, remark, JsonStyle::Fastjson);
        }
        out.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
        json::write_int(out, self.version as i64);
        out.put_u8(b'}');
    }

    /// The ROCKETMQ binary header (`RocketMQSerializable`).
    pub fn write_binary_header<B: BufMut>(&self, out: &mut B) {
        out.put_i16(self.code as i16);
        out.put_u8(self.language.map(LanguageCode::code).unwrap_or(0));
        out.put_i16(self.version as i16);
        out.put_i32(self.opaque);
        out.put_i32(self.flag);
        match self.remark.as_deref() {
            Some(r) if !r.is_empty() => {
                out.put_i32(r.len() as i32);
                out.put_slice(r.as_bytes());
            }
            _ => out.put_i32(0),
        }
        let mut map = Vec::new();
        if let Some(ext) = &self.ext_fields {
            for (k, v) in ext.sorted() {
                map.put_i16(k.len() as i16);
                map.put_slice(k.as_bytes());
                map.put_i32(v.len() as i32);
                map.put_slice(v.as_bytes());
            }
        }
        out.put_i32(map.len() as i32);
        out.put_slice(&map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(opaque: i32) -> RemotingCommand {
        RemotingCommand {
            code: 0,
            language: Some(LanguageCode::Java),
            version: 479,
            opaque,
            flag: FLAG_RESPONSE,
            remark: None,
            ext_fields: None,
            body: Bytes::new(),
        }
    }

    /// Literal headers produced by Java 5.3 (protocol.md §1.3).
    #[test]
    fn json_headers_match_java() {
        let mut out = Vec::new();
        response(1).write_json_header(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}"#
        );
        let mut with_hdr = response(3);
        with_hdr.ext_fields =
            Some([("masterAddr", "192.168.0.1:10911"), ("haServerAddr", "192.168.0.1:10912")].into_iter().collect());
        let mut out = Vec::new();
        with_hdr.write_json_header(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"code":0,"extFields":{"haServerAddr":"192.168.0.1:10912","masterAddr":"192.168.0.1:10911"},"flag":1,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}"#
        );
    }

    /// The 21-byte binary success header of protocol.md §1.4.
    #[test]
    fn binary_header_matches_java() {
        let mut out = Vec::new();
        response(1).write_binary_header(&mut out);
        assert_eq!(out, [0, 0, 0, 0x01, 0xdf, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn language_codes() {
        assert_eq!(LanguageCode::from_code(12), Some(LanguageCode::Rust));
        assert_eq!(LanguageCode::from_name("RUST"), Some(LanguageCode::Rust));
        assert_eq!(LanguageCode::from_name("KLINGON"), None);
        assert_eq!(LanguageCode::from_code(200), None);
        assert_eq!(LanguageCode::NodeJs.code(), 13);
    }
}
