//! Glob matching for names and paths: `*` matches any run of characters (dots and slashes
//! included), `?` one character; everything else matches itself.

/// Works on the two strings in place (no copies): a query's pattern is matched against every
/// unit, and collecting a long pattern into characters for each of them made a 1 MB pattern
/// take 5 s over 2,000 units. Most candidates now fail within their first characters.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let char_len = |s: &str, at: usize| s[at..].chars().next().map_or(1, char::len_utf8);
    let (mut pi, mut ti) = (0usize, 0usize);
    // Where the last `*` was, and where in the text its current match ends.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let tc = char_len(text, ti);
        if pi < p.len() && p[pi] == b'?' {
            pi += 1;
            ti += tc;
        } else if pi < p.len() && p[pi] != b'*' && pattern[pi..].starts_with(&text[ti..ti + tc]) {
            pi += tc;
            ti += tc;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            let advanced = st + char_len(text, st);
            pi = sp + 1;
            ti = advanced;
            star = Some((sp, advanced));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches("to_key*", "to_key_val_list"));
        assert!(matches("*.to_key*", "requests.utils.to_key_val_list"));
        assert!(matches("django/db/*", "django/db/models/base.py"));
        assert!(!matches("django/db/*", "django/core/x.py"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("*", ""));
        assert!(matches("é?日*", "éx日本語"));
        assert!(!matches("é?日", "éx日本語"));
        assert!(matches("*語", "日本語"));
        assert!(matches("??", "日本"));
        assert!(!matches("???", "日本"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
    }
}
