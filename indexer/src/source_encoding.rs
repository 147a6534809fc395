//! Decoding a Python source file's bytes as Python does (PEP 263).
//!
//! Python reads source as UTF-8 unless a comment on the first or second line declares another
//! encoding (`# -*- coding: latin-1 -*-`). Older code, and code from places where a national
//! encoding was the norm, still carries such declarations; reading those files as UTF-8 would
//! skip them as "not valid UTF-8" although Python runs them. The decoded text is what the rest of
//! fresco sees (units' byte spans are offsets into it); the file's revision stays the hash of the
//! bytes on disk, so freshness is judged on what is really there.
//!
//! Names are matched as CPython does: its tokenizer's own normal forms for UTF-8 and Latin-1 (the
//! first twelve characters, case and `_`/`-` folded), then the aliases of its `encodings`
//! package for the encodings a source file plausibly uses, then the WHATWG labels that
//! `encoding_rs` knows. Python's `latin-1` is exact (byte `n` is U+00nn), not the WHATWG reading of
//! that label as windows-1252, and `ascii` refuses bytes above 0x7F.
//!
//! Where fresco and Python differ (checked against Python 3.11's `compile`): the WHATWG tables
//! read a few rare characters differently (the C1 range of `iso-8859-9` and `iso-8859-11`, read
//! as windows-1254 and windows-874; `koi8-u` read as KOI8-RU; Shift_JIS as Microsoft's variant,
//! 0x8160 as U+FF5E, not U+301C) and accept bytes Python's codecs refuse (vendor extensions);
//! DOS code pages (`cp437`, `cp850`) are not decoded (the file is skipped, saying so); a byte
//! order mark with a declaration of another encoding, which Python refuses, is read as UTF-8.
//! None of it changes what a file defines or calls, only characters inside strings and comments.

use std::borrow::Cow;

use encoding_rs::Encoding;

/// Why a file's bytes are not Python source text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No declaration (or a UTF-8 one, or a byte order mark), and the bytes are not UTF-8.
    NotUtf8,
    /// The declared encoding is known and the bytes are not valid in it.
    NotValidIn { encoding: String },
    /// The declared encoding is not one fresco can decode.
    UnknownEncoding { encoding: String },
}

/// The encodings fresco decodes by hand or through `encoding_rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SourceEncoding {
    Utf8,
    Latin1,
    Ascii,
    Whatwg(&'static Encoding),
}

/// Decodes `bytes` as Python would read them as source. Borrowed when they are UTF-8 already.
pub fn decode_source(bytes: &[u8]) -> Result<Cow<'_, str>, DecodeError> {
    const BOM: &[u8] = b"\xef\xbb\xbf";
    // With a byte order mark Python reads UTF-8 whatever a declaration says (it refuses a
    // contradicting one; reading the text is still the most useful answer). The mark itself is
    // kept: the frontend skips it as Python does.
    let declared = if bytes.starts_with(BOM) { None } else { coding_declaration(bytes).map(|(_, name)| name) };
    let Some(name) = declared else {
        return std::str::from_utf8(bytes).map(Cow::Borrowed).map_err(|_| DecodeError::NotUtf8);
    };
    let Some(encoding) = lookup(&name) else {
        return Err(DecodeError::UnknownEncoding { encoding: name });
    };
    match encoding {
        SourceEncoding::Utf8 => std::str::from_utf8(bytes).map(Cow::Borrowed).map_err(|_| DecodeError::NotUtf8),
        SourceEncoding::Latin1 => Ok(Cow::Owned(bytes.iter().map(|&b| char::from(b)).collect())),
        SourceEncoding::Ascii => match std::str::from_utf8(bytes) {
            Ok(text) if text.is_ascii() => Ok(Cow::Borrowed(text)),
            _ => Err(DecodeError::NotValidIn { encoding: name }),
        },
        SourceEncoding::Whatwg(encoding) => encoding
            .decode_without_bom_handling_and_without_replacement(bytes)
            .ok_or(DecodeError::NotValidIn { encoding: name }),
    }
}

/// The file's coding declaration: on line 1, or on line 2 when line 1 is blank or a comment
/// (Python's rule), as the line's index (0 or 1) and the encoding's name as written.
pub(crate) fn coding_declaration(bytes: &[u8]) -> Option<(usize, String)> {
    let (first, rest) = split_line(bytes);
    if let Some(name) = coding_in(first) {
        return Some((0, name));
    }
    if !is_blank_or_comment(first) {
        return None;
    }
    coding_in(split_line(rest?).0).map(|name| (1, name))
}

/// The first line and what follows it, if anything. Python ends a line at `\n`, `\r\n` or a
/// lone `\r`.
fn split_line(bytes: &[u8]) -> (&[u8], Option<&[u8]>) {
    match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
        None => (bytes, None),
        Some(end) => {
            let next = if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') { end + 2 } else { end + 1 };
            (&bytes[..end], Some(&bytes[next..]))
        }
    }
}

fn is_blank_or_comment(line: &[u8]) -> bool {
    let rest = trim_leading_space(line);
    rest.is_empty() || rest[0] == b'#'
}

fn trim_leading_space(line: &[u8]) -> &[u8] {
    let start = line.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\x0c')).unwrap_or(line.len());
    &line[start..]
}

/// Python's `^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)` on one line.
fn coding_in(line: &[u8]) -> Option<String> {
    let rest = trim_leading_space(line);
    let comment = rest.strip_prefix(b"#")?;
    // `.*?` takes the first `coding` followed by `:` or `=`.
    let mut from = 0;
    while let Some(at) = find(&comment[from..], b"coding") {
        let after = from + at + b"coding".len();
        if let Some(b':' | b'=') = comment.get(after) {
            let value = trim_leading_tabs_spaces(&comment[after + 1..]);
            let len =
                value.iter().take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')).count();
            if len > 0 {
                // No encoding's name is long; a long one is only quoted in a skip reason.
                const MAX_NAME: usize = 64;
                let name = String::from_utf8_lossy(&value[..len.min(MAX_NAME)]).into_owned();
                return Some(if len > MAX_NAME { format!("{name}...") } else { name });
            }
        }
        from = after;
    }
    None
}

fn trim_leading_tabs_spaces(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(s.len());
    &s[start..]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The encoding a declared name means to Python, if fresco can decode it.
fn lookup(declared: &str) -> Option<SourceEncoding> {
    // CPython's tokenizer (`get_normal_name`): the first twelve characters, lower case, `_` as `-`.
    let short: String =
        declared.chars().take(12).map(|c| if c == '_' { '-' } else { c.to_ascii_lowercase() }).collect();
    let with_suffix = |base: &str| short == base || short.starts_with(&format!("{base}-"));
    if with_suffix("utf-8") {
        return Some(SourceEncoding::Utf8);
    }
    if with_suffix("latin-1") || with_suffix("iso-8859-1") || with_suffix("iso-latin-1") {
        return Some(SourceEncoding::Latin1);
    }
    // Then the `encodings` package: lower case, other punctuation as `_`.
    let normal: String = declared
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c.to_ascii_lowercase() } else { '_' })
        .collect();
    let label = match normal.as_str() {
        "utf8" | "u8" | "utf" | "cp65001" | "utf8_ucs2" | "utf8_ucs4" => return Some(SourceEncoding::Utf8),
        "latin1" | "latin" | "l1" | "iso8859_1" | "iso_8859_1" | "8859" | "cp819" | "ibm819" | "iso_ir_100"
        | "csisolatin1" => {
            return Some(SourceEncoding::Latin1);
        }
        "ascii" | "us_ascii" | "646" | "us" | "ansi_x3.4_1968" | "ansi_x3_4_1968" | "iso646_us" | "cp367"
        | "csascii" => {
            return Some(SourceEncoding::Ascii);
        }
        // Windows code pages are `cpNNNN` to Python and `windows-NNNN` to WHATWG.
        "cp874" => "windows-874".to_string(),
        n if n.starts_with("cp125") && n.len() == 6 => format!("windows-{}", &n[2..]),
        "cp932" | "ms932" | "mskanji" | "ms_kanji" | "sjis" | "shiftjis" | "s_jis" | "shift_jis" => {
            "shift_jis".to_string()
        }
        "ujis" | "u_jis" | "eucjp" | "euc_jp" => "euc-jp".to_string(),
        "euckr" | "euc_kr" | "cp949" | "uhc" | "ks_c_5601_1987" | "ksc5601" | "ks_c_5601" => "euc-kr".to_string(),
        "cp936" | "ms936" | "936" | "gbk" | "gb2312" | "euc_cn" | "euccn" | "chinese" => "gbk".to_string(),
        "gb18030" | "gb18030_2000" => "gb18030".to_string(),
        "big5" | "big5_tw" | "csbig5" | "cp950" | "ms950" | "big5hkscs" | "big5_hkscs" | "hkscs" => "big5".to_string(),
        "latin9" | "l9" | "iso8859_15" | "iso_8859_15" => "iso-8859-15".to_string(),
        "koi8_r" => "koi8-r".to_string(),
        "koi8_u" => "koi8-u".to_string(),
        "mac_roman" | "macroman" | "macintosh" => "macintosh".to_string(),
        "cp866" | "866" | "ibm866" => "ibm866".to_string(),
        // `iso8859_N` and `iso_8859_N` to `iso-8859-N`; `latinN` and `lN` WHATWG knows as is.
        n => n.replace("iso8859_", "iso-8859-").replace("iso_8859_", "iso-8859-").replace('_', "-"),
    };
    let encoding = Encoding::for_label_no_replacement(label.as_bytes())?;
    // Not ASCII-compatible: Python cannot read a declaration in them either, and fresco's
    // frontend needs ASCII bytes to mean ASCII characters.
    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE || encoding == encoding_rs::X_USER_DEFINED
    {
        return None;
    }
    if encoding == encoding_rs::UTF_8 {
        return Some(SourceEncoding::Utf8);
    }
    Some(SourceEncoding::Whatwg(encoding))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_source_is_utf8() {
        assert_eq!(decode_source("s = 'é'\n".as_bytes()).as_deref(), Ok("s = 'é'\n"));
        assert_eq!(decode_source(b"s = '\xe9'\n"), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn latin1_declarations_decode_each_byte_as_its_code_point() {
        for declaration in [
            "# -*- coding: latin-1 -*-",
            "# coding=iso-8859-1",
            "#vim: set fileencoding=latin1 :",
            "# coding: ISO_8859_1",
        ] {
            let source = [declaration.as_bytes(), b"\ns = '\xe9\x80'\n"].concat();
            let text = decode_source(&source).unwrap_or_else(|e| panic!("{declaration}: {e:?}"));
            assert_eq!(text, format!("{declaration}\ns = '\u{e9}\u{80}'\n"), "{declaration}");
        }
    }

    #[test]
    fn the_second_line_counts_only_after_a_blank_or_comment_line() {
        let after_shebang = b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nname = 'Jos\xe9'\n";
        assert_eq!(
            decode_source(after_shebang).unwrap(),
            "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nname = 'Jos\u{e9}'\n"
        );
        let after_code = b"import os\n# coding: latin-1\nname = 'Jos\xe9'\n";
        assert_eq!(decode_source(after_code), Err(DecodeError::NotUtf8), "a declaration after code is only a comment");
        let third_line = b"#\n#\n# coding: latin-1\nname = 'Jos\xe9'\n";
        assert_eq!(decode_source(third_line), Err(DecodeError::NotUtf8));
        let not_a_comment = b"s = '# coding: latin-1 \xe9'\n";
        assert_eq!(decode_source(not_a_comment), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn national_encodings_decode_through_encoding_rs() {
        // "日本" in Shift_JIS and EUC-JP; "Привет" in cp1251 and KOI8-R.
        let cases: [(&str, &[u8], &str); 5] = [
            ("shift_jis", b"\x93\xfa\x96\x7b", "日本"),
            ("euc-jp", b"\xc6\xfc\xcb\xdc", "日本"),
            ("cp1251", b"\xcf\xf0\xe8\xe2\xe5\xf2", "Привет"),
            ("koi8-r", b"\xf0\xd2\xc9\xd7\xc5\xd4", "Привет"),
            ("cp1252", b"\x80", "€"),
        ];
        for (name, encoded, expected) in cases {
            let source = [format!("# coding: {name}\ns = '").as_bytes(), encoded, b"'\n"].concat();
            assert_eq!(
                decode_source(&source).as_deref(),
                Ok(format!("# coding: {name}\ns = '{expected}'\n").as_str()),
                "{name}"
            );
        }
    }

    #[test]
    fn undecodable_and_unknown_encodings_are_named() {
        assert_eq!(
            decode_source(b"# coding: ascii\ns = '\xe9'\n"),
            Err(DecodeError::NotValidIn { encoding: "ascii".into() })
        );
        assert_eq!(
            decode_source(b"# coding: shift_jis\ns = '\x81'\n"),
            Err(DecodeError::NotValidIn { encoding: "shift_jis".into() })
        );
        assert_eq!(
            decode_source(b"# coding: rot13\ns = 1\n"),
            Err(DecodeError::UnknownEncoding { encoding: "rot13".into() })
        );
        assert_eq!(
            decode_source(b"# coding: utf-16\ns = 1\n"),
            Err(DecodeError::UnknownEncoding { encoding: "utf-16".into() })
        );
        assert_eq!(decode_source(b"# coding: utf-8\ns = '\xe9'\n"), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line_as_it_does_for_python() {
        // Checked with Python 3.11's compile(): the first two are read as latin-1 and plain
        // code; the third has its declaration on line 3, which Python ignores.
        let leading = b"\r# coding: latin-1\ns = '\xe9'\n";
        assert_eq!(decode_source(leading).as_deref(), Ok("\r# coding: latin-1\ns = '\u{e9}'\n"));
        let code_after = b"# hello\rdef g(coding=None):\r    return 1\r";
        assert_eq!(decode_source(code_after).as_deref(), Ok("# hello\rdef g(coding=None):\r    return 1\r"));
        let third = b"#!/usr/bin/env python\r\rx = 1  # coding: latin-1\rs = '\xe9'\r";
        assert_eq!(decode_source(third), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn a_long_declared_name_is_cut_in_the_reason() {
        let source = format!("# coding: {}\nx = 1\n", "x".repeat(100_000));
        match decode_source(source.as_bytes()) {
            Err(DecodeError::UnknownEncoding { encoding }) => assert_eq!(encoding, format!("{}...", "x".repeat(64))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_byte_order_mark_means_utf8_whatever_the_declaration() {
        let source = "\u{feff}# coding: latin-1\ns = 'é'\n";
        assert_eq!(decode_source(source.as_bytes()).as_deref(), Ok(source));
    }
}
