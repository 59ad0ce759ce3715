//! A connection's last request header, kept to read the next one faster. A polling client sends the same
//! JSON header again and again but for two values: the request's opaque and the topic it asks. Once a
//! header with a topic has been read in full, the next is compared with it byte for byte around those two
//! values (at `memcmp`'s speed), instead of being scanned key by key; the two values are read as the plain
//! reader reads them. Any other difference, or a value the plain reader would not take as plain (an
//! escape, a byte outside ASCII, an int out of range), reads the header in full again. So a header read
//! here means what reading it in full would, and the general reader stays the definition of meaning (the
//! unit tests below and the `repeated_header` fuzz target compare them).

use std::ops::Range;

use super::command::{ExtFields, FieldSpans, LanguageCode, RemotingCommand};
use super::decode::{HeaderError, decode_command_into};
use super::frame::{RawFrame, SerializeType};
use super::json_header::{decode_json_frame_marked, plain_int};
use super::json_header_plain::STRING_STOP;

/// The longest header kept, and the most `extFields` (a client's route lookup is 150 to 400 bytes, with one
/// to six fields): with them, what a connection holds for it is under 3 KiB (the text, its remark, the
/// fields' positions; SECURITY.md, "Each connection's own").
pub const KEPT_MAX: usize = 1024;
pub const KEPT_FIELDS: usize = 16;

/// The last header with a topic that a connection read in full, and what it meant.
#[derive(Default)]
pub struct RepeatedHeader {
    /// Boxed: a connection's state holds a pointer, and the header only while one is kept.
    last: Option<Box<Kept>>,
}

struct Kept {
    text: Vec<u8>,
    /// Where the opaque's number and the topic's text are in `text`.
    opaque: Range<usize>,
    topic: Range<usize>,
    code: i32,
    language: Option<LanguageCode>,
    version: i32,
    flag: i32,
    remark: Option<String>,
    /// The `extFields`' key and value ranges in `text`.
    fields: FieldSpans,
}

impl RepeatedHeader {
    /// Whether a header is kept.
    pub fn is_kept(&self) -> bool {
        self.last.is_some()
    }

    /// Lets the kept header go: a connection that has gone quiet (a client between two polls, 30 s apart)
    /// keeps nothing for its next request, which is read in full.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// `decode_command_into`, through the last header where the frame's repeats it.
    pub fn decode_into(&mut self, frame: RawFrame, cmd: &mut RemotingCommand) -> Result<(), HeaderError> {
        if frame.serialize_type != SerializeType::Json || !frame.body.is_empty() {
            return decode_command_into(frame, cmd);
        }
        let header = frame.header;
        if let Some(kept) = &self.last
            && kept.read(&header, cmd)
        {
            cmd.attach_frame(header);
        } else if let Some(opaque) = decode_json_frame_marked(header.clone(), cmd)? {
            // Read in full by the plain reader; a header of another shape keeps the last one.
            if let Some(kept) = Kept::of(&header, cmd, opaque) {
                self.last = Some(Box::new(kept));
            }
        }
        cmd.body = frame.body;
        Ok(())
    }
}

impl Kept {
    fn of(header: &[u8], cmd: &RemotingCommand, opaque: Range<usize>) -> Option<Kept> {
        let ext = cmd.ext_fields.as_ref()?;
        // A header without a topic (most that are not lookups) is not kept: said before listing its fields.
        if header.len() > KEPT_MAX || ext.len() > KEPT_FIELDS || ext.get("topic").is_none() {
            return None;
        }
        let fields = ext.frame_spans()?;
        // The field `get("topic")` reads: the last of that key.
        let topic = fields.iter().rev().find(|(key, _)| header.get(key.clone()) == Some(b"topic"))?.1.clone();
        Some(Kept {
            text: header.to_vec(),
            opaque,
            topic,
            code: cmd.code,
            language: cmd.language,
            version: cmd.version,
            flag: cmd.flag,
            remark: cmd.remark.clone(),
            fields,
        })
    }

    /// Fills `cmd` from `header` (its fields' ranges in it, the header itself not attached) if it differs
    /// from the kept one in its opaque's number and its topic's text alone.
    fn read(&self, header: &[u8], cmd: &mut RemotingCommand) -> bool {
        let Some((opaque, [opaque_at, topic_at])) = self.find(header) else { return false };
        (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) =
            (self.code, self.language, self.version, opaque, self.flag);
        cmd.remark.clone_from(&self.remark);
        let ext = cmd.ext_fields.get_or_insert_with(ExtFields::new);
        ext.clear();
        // A range after a value moved by as much as that value's text grew.
        let grew = |old: &Range<usize>, new: &Range<usize>| new.len() as isize - old.len() as isize;
        let moved = |r: &Range<usize>| {
            if *r == self.topic {
                return topic_at.clone();
            }
            let mut by = 0;
            if r.start >= self.topic.end {
                by += grew(&self.topic, &topic_at);
            }
            if r.start >= self.opaque.end {
                by += grew(&self.opaque, &opaque_at);
            }
            r.start.wrapping_add_signed(by)..r.end.wrapping_add_signed(by)
        };
        for (key, value) in &self.fields {
            ext.push_frame_span(moved(key), moved(value));
        }
        true
    }

    /// The opaque, and where its number and the topic's text are in `header`, if everything else is the
    /// kept header's.
    fn find(&self, header: &[u8]) -> Option<(i32, [Range<usize>; 2])> {
        let opaque_first = self.opaque.start < self.topic.start;
        let vars = if opaque_first { [&self.opaque, &self.topic] } else { [&self.topic, &self.opaque] };
        let (mut at, mut from, mut opaque, mut found) = (0, 0, 0, [0..0, 0..0]);
        for (i, var) in vars.into_iter().enumerate() {
            let same = &self.text[from..var.start];
            if header.get(at..at + same.len())? != same {
                return None;
            }
            at += same.len();
            let start = at;
            if (i == 0) == opaque_first {
                (opaque, at) = plain_int(header, at)?;
                found[0] = start..at;
            } else {
                at += header.get(at..)?.iter().position(|&b| STRING_STOP[b as usize])?;
                found[1] = start..at;
            }
            from = var.end;
        }
        (header.get(at..)? == &self.text[from..]).then_some((opaque, found))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::remoting::decode::decode_general;
    use crate::testing::client_headers::ClientHeader;

    const JSON_CLIENTS: [ClientHeader; 5] =
        [ClientHeader::Java, ClientHeader::Go, ClientHeader::Rust, ClientHeader::Cpp, ClientHeader::Node];

    fn header(client: ClientHeader, topic: &str, opaque: i32) -> Vec<u8> {
        let mut out = Vec::new();
        client.put_route_header(&mut out, topic, opaque);
        out
    }

    fn frame(header: &[u8]) -> RawFrame {
        RawFrame { serialize_type: SerializeType::Json, header: Bytes::copy_from_slice(header), body: Bytes::new() }
    }

    /// A reader that has read `first` in full.
    fn primed(first: &[u8]) -> RepeatedHeader {
        let mut headers = RepeatedHeader::default();
        headers.decode_into(frame(first), &mut RemotingCommand::blank()).expect("the first header decodes");
        headers
    }

    /// `header` read after the primed one: what it decoded to, and whether the kept header read it.
    fn again(headers: &mut RepeatedHeader, header: &[u8]) -> (Result<RemotingCommand, HeaderError>, bool) {
        let repeated = headers.last.as_ref().is_some_and(|kept| kept.read(header, &mut RemotingCommand::blank()));
        let mut cmd = RemotingCommand::blank();
        (headers.decode_into(frame(header), &mut cmd).map(|()| cmd), repeated)
    }

    /// The same command, the fields in the same order (`==` on the maps ignores their order).
    fn assert_same(got: &Result<RemotingCommand, HeaderError>, header: &[u8]) {
        let want = decode_general(header);
        let text = String::from_utf8_lossy(header);
        assert_eq!(got.is_ok(), want.is_ok(), "{text}");
        if let (Ok(got), Ok(want)) = (got, want) {
            assert_eq!(got, &want, "{text}");
            let fields = |c: &RemotingCommand| {
                let ext = c.ext_fields.as_ref()?;
                Some(ext.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>())
            };
            assert_eq!(fields(got), fields(&want), "{text}");
        }
    }

    #[test]
    fn every_client_s_next_lookup_is_read_by_its_last_header() {
        let long = "T".repeat(127);
        for client in JSON_CLIENTS {
            let mut headers = primed(&header(client, "TopicTest", 7));
            for topic in ["TopicTest", "", "a", "%RETRY%group_1", long.as_str()] {
                for opaque in [7, 0, 9, 10, -1, 123_456, 2_147_000_000, i32::MAX, i32::MIN] {
                    let next = header(client, topic, opaque);
                    let (got, repeated) = again(&mut headers, &next);
                    assert!(repeated, "{client:?} {topic} {opaque}: read in full");
                    assert_same(&got, &next);
                    let got = got.expect("decodes");
                    assert_eq!((got.opaque, got.ext("topic")), (opaque, Some(topic)));
                }
            }
        }
    }

    /// Every header one byte away from a client's (each byte replaced by, or preceded by, bytes that end
    /// or change a token, or removed) means to the repeated reader what it means to the general one.
    #[test]
    fn a_header_one_byte_away_means_what_the_general_reader_says() {
        let bytes = [b'0', b'7', b'-', b'"', b'\\', b' ', b'}', b'{', b',', b':', b'a', b'n', 0x80, b'\n', 0, b'e'];
        for client in JSON_CLIENTS {
            let base = header(client, "TopicTest", 12345);
            let mut headers = primed(&base);
            let mut repeated_count = 0;
            let mut check = |h: &[u8]| {
                let (got, repeated) = again(&mut headers, h);
                repeated_count += repeated as usize;
                assert_same(&got, h);
                // Read in full again, a header of the same shape keeps it: put the base back.
                let _ = again(&mut headers, &base);
            };
            for at in 0..=base.len() {
                for &b in &bytes {
                    let mut h = base.clone();
                    h.insert(at, b);
                    check(&h);
                    if at < base.len() {
                        let mut h = base.clone();
                        h[at] = b;
                        check(&h);
                    }
                }
                if at < base.len() {
                    let mut h = base.clone();
                    h.remove(at);
                    check(&h);
                }
            }
            // Inside the opaque's digits and the topic's text the changes are read as repeats.
            assert!(repeated_count > 40, "{client:?}: {repeated_count} read as repeats");
        }
    }

    #[test]
    fn a_header_over_the_limits_is_not_kept() {
        let topic = "t".repeat(KEPT_MAX);
        assert!(primed(&header(ClientHeader::Java, &topic, 1)).last.is_none());
        let fields = |n: usize| (0..n).map(|i| format!(r#""k{i}":"","#)).collect::<String>();
        let many = |n: usize| format!(r#"{{"code":105,"extFields":{{{}"topic":"t"}},"opaque":1}}"#, fields(n));
        assert!(primed(many(KEPT_FIELDS).as_bytes()).last.is_none());
        assert!(primed(many(KEPT_FIELDS - 1).as_bytes()).last.is_some());
        assert!(primed(&header(ClientHeader::Java, "TopicTest", 1)).last.is_some());
    }
}
