//! `RemotingCommand`: the header every request and response carries, and how it is written in both encodings.

use bytes::{BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use super::frame::{SerializeType, frame_prefix};
use crate::protocol::json::{self, JsonStyle};

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
/// Java fills its `HashMap`. A decoded header's fields are spans of the frame's own bytes, which the map
/// then holds (`attach_frame`): reading a request copies no field and allocates nothing for them, however
/// long its topic name. Fields written here (built, unescaped or replaced) are copied into `own`.
#[derive(Debug, Clone, Default)]
pub struct ExtFields {
    frame: Bytes,
    own: String,
    fields: SmallVec<[Field; 4]>,
}

/// Each field's key and value ranges in a decoded header.
pub(crate) type FieldSpans = SmallVec<[(std::ops::Range<usize>, std::ops::Range<usize>); 4]>;

#[derive(Debug, Clone, Copy)]
struct Field {
    key: Span,
    value: Span,
}

/// `len` bytes at `at` of the frame, or of `own` when `at` has `IN_OWN` set. A header is at most 16 MiB (its
/// length has 24 bits), so a frame offset never reaches that bit.
#[derive(Debug, Clone, Copy)]
struct Span {
    at: u32,
    len: u32,
}

const IN_OWN: u32 = 1 << 31;

/// Two maps are equal when they hold the same fields, in whatever order.
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.sorted() == other.sorted()
    }
}

impl Eq for ExtFields {}

impl ExtFields {
    /// The most fields a decoded header may have (a client sends a dozen or two): a 16 MiB header of
    /// millions of tiny fields would take several times its size to index and sign. A header with more is
    /// undecodable, and its connection closed. (Java takes any number.)
    pub const MAX: usize = 65_536;

    pub fn new() -> Self {
        ExtFields::default()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let field = self.fields.iter().rev().find(|f| self.bytes(f.key) == key.as_bytes())?;
        Some(self.text(field.value))
    }

    /// Adds or replaces a field (the one `get` reads, when a decoded header repeated the key).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        let value = self.append(value);
        match self.fields.iter().rposition(|f| self.bytes(f.key) == key.as_bytes()) {
            Some(at) => self.fields[at].value = value,
            None => {
                let key = self.append(key);
                self.fields.push(Field { key, value });
            }
        }
    }

    /// Appends without looking for an earlier value: for decoders, where `get` already prefers the last.
    pub(crate) fn push(&mut self, key: &str, value: &str) {
        let (key, value) = (self.append(key), self.append(value));
        self.fields.push(Field { key, value });
    }

    /// Appends a field that is the `key` and `value` ranges of the header being decoded, which must be UTF-8
    /// and start and end there at ASCII delimiters; `attach_frame` then gives the map that header.
    pub(crate) fn push_frame_span(&mut self, key: std::ops::Range<usize>, value: std::ops::Range<usize>) {
        let span = |r: std::ops::Range<usize>| Span { at: r.start as u32 & !IN_OWN, len: r.len() as u32 };
        self.fields.push(Field { key: span(key), value: span(value) });
    }

    /// Gives the map the header its `push_frame_span` fields are ranges of.
    pub(crate) fn attach_frame(&mut self, header: Bytes) {
        self.frame = header;
    }

    /// Each field's key and value ranges in the attached header, when every field is one (a map as the
    /// plain reader fills it).
    pub(crate) fn frame_spans(&self) -> Option<FieldSpans> {
        let range = |s: Span| (s.at & IN_OWN == 0).then(|| s.at as usize..s.at as usize + s.len as usize);
        self.fields.iter().map(|f| Some((range(f.key)?, range(f.value)?))).collect()
    }

    /// Empties the map (keeping its memory) for a decoder to fill again.
    pub(crate) fn clear(&mut self) {
        self.frame = Bytes::new();
        self.own.clear();
        self.fields.clear();
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|f| (self.text(f.key), self.text(f.value)))
    }

    fn append(&mut self, text: &str) -> Span {
        let span = Span { at: self.own.len() as u32 | IN_OWN, len: text.len() as u32 };
        self.own.push_str(text);
        span
    }

    /// The bytes of a span; empty if they are not there (a span of a header that was never attached).
    fn bytes(&self, span: Span) -> &[u8] {
        let (text, at) = match span.at & IN_OWN {
            0 => (&self.frame[..], span.at),
            _ => (self.own.as_bytes(), span.at & !IN_OWN),
        };
        text.get(at as usize..at as usize + span.len as usize).unwrap_or_default()
    }

    /// A span as text: every span is UTF-8 (own text is a `String`, frame spans are checked when decoded).
    fn text(&self, span: Span) -> &str {
        std::str::from_utf8(self.bytes(span)).unwrap_or_default()
    }

    /// Fields sorted by key, so that written headers are deterministic.
    fn sorted(&self) -> Vec<(&str, &str)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
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
    /// A request as a Java 5.3 client sends it (also the NameServer's own, to brokers and the product
    /// environment's NameServer).
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

    /// Every field zero or absent: what a header that sets none means, and where a request is decoded into.
    pub fn blank() -> Self {
        RemotingCommand {
            code: 0,
            language: None,
            version: 0,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: None,
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

    /// Gives a decoded command's fields the header they are spans of (`ExtFields::push_frame_span`).
    pub(crate) fn attach_frame(&mut self, header: Bytes) {
        if let Some(ext) = self.ext_fields.as_mut() {
            ext.attach_frame(header);
        }
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

    /// Fields read from a frame and fields written here live side by side; a replaced value is the new one.
    #[test]
    fn frame_fields_and_written_fields_mix() {
        let mut ext = ExtFields::new();
        ext.push_frame_span(0..5, 6..36);
        ext.attach_frame(Bytes::from_static(b"topic=a-topic-name-over-24-bytes-long"));
        assert_eq!(ext.get("topic"), Some("a-topic-name-over-24-bytes-lon"));
        ext.insert("k", "v");
        ext.insert("topic", "T");
        assert_eq!(ext.iter().collect::<Vec<_>>(), [("topic", "T"), ("k", "v")]);
        assert_eq!(ext, [("k", "v"), ("topic", "T")].into_iter().collect());
        assert_eq!(ext.get("absent"), None);
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
