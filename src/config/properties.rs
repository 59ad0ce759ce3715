//! Java properties text as `java.util.Properties.store(OutputStream, ...)` writes it, for the `-c` file that
//! UPDATE_NAMESRV_CONFIG writes back: both readers of that file, Java's `Properties.load` (ISO-8859-1 with
//! `\uXXXX` escapes) and rocketns's own (the `java-properties` crate), read back exactly the values written.
//!
//! The rules are `Properties.saveConvert`'s with `escUnicode`: a backslash, and `=`, `:`, `#`, `!`, are
//! escaped with a backslash; tab, newline, carriage return and form feed as `\t`, `\n`, `\r`, `\f`; a space
//! everywhere in a key but only first in a value; every other character outside printable ASCII as `\uXXXX`
//! (upper-case hex, UTF-16 units, as Java writes them). The output is ASCII. The `java-properties` crate's
//! own writer differs (lower-case, unpadded `\u` escapes, which Java's reader refuses for control
//! characters), hence this one. Values read from a properties file never hold characters beyond the BMP
//! (both readers decode bytes one by one), so no surrogate pair is ever written.

/// `key=value` lines in the order given, each escaped as `Properties.store` escapes it.
pub(crate) fn store_text<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (key, value) in entries {
        escape(&mut out, key, true);
        out.push('=');
        escape(&mut out, value, false);
        out.push('\n');
    }
    out
}

fn escape(out: &mut String, text: &str, is_key: bool) {
    let mut units = [0u16; 2];
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' ' if i == 0 || is_key => out.push_str("\\ "),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                for unit in c.encode_utf16(&mut units).iter() {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys and values that need every kind of escape, and non-ASCII text.
    const TRICKY: &[(&str, &str)] = &[
        ("plain", "value"),
        ("path", r"C:\rocketmq\store"),
        ("separators", "a=b:c"),
        ("comment marks", "#not a comment!"),
        ("leading", "  two spaces, then more   "),
        ("controls", "tab\there\nnew line\rreturn\x0cfeed\x01"),
        ("accents", "café Zürich"),
        ("cjk", "名字服务"),
        ("ключ", "значение"),
    ];

    #[test]
    fn escapes_as_java_properties_store() {
        let text = store_text(TRICKY.iter().copied());
        assert!(text.is_ascii());
        // Written out by hand from Properties.saveConvert's rules (JDK 17), line by line.
        let expected = [
            r"plain=value",
            r"path=C\:\\rocketmq\\store",
            r"separators=a\=b\:c",
            r"comment\ marks=\#not a comment\!",
            r"leading=\  two spaces, then more   ",
            r"controls=tab\there\nnew line\rreturn\ffeed\u0001",
            r"accents=caf\u00E9 Z\u00FCrich",
            r"cjk=\u540D\u5B57\u670D\u52A1",
            r"\u043A\u043B\u044E\u0447=\u0437\u043D\u0430\u0447\u0435\u043D\u0438\u0435",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }

    /// rocketns's reader gets back every key and value.
    #[test]
    fn reads_back_the_same() {
        let text = store_text(TRICKY.iter().copied());
        let read = java_properties::read(text.as_bytes()).unwrap();
        assert_eq!(read.len(), TRICKY.len());
        for (k, v) in TRICKY {
            assert_eq!(read.get(*k).map(String::as_str), Some(*v), "{k}");
        }
    }
}
