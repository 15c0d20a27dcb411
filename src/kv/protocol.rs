//! The memcached wire protocol, client side: requests written straight
//! into a connection's output buffer, replies parsed from the front of its
//! input buffer. `parse` is stateless (an incomplete reply is parsed again
//! when more bytes came), never reads past its input and never panics: a
//! peer's bytes are data, not trusted.
//!
//! Text protocol: `get k1 k2` / `set k flags 0 len`, replies `VALUE`,
//! `END`, `STORED`... Meta commands (memcached >= 1.6): `mg k v f k` /
//! `ms k len F<flags>`, replies `VA`, `EN`, `HD`... Both families' reply
//! words are accepted in both dialects (they do not clash).

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Text,
    Meta,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// "ERROR": an unknown command.
    Error,
    /// "CLIENT_ERROR msg": the request was malformed.
    Client,
    /// "SERVER_ERROR msg": memcached could not do it (out of memory ...).
    Server,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// A value (text `VALUE`, meta `VA` with its `f` and `k` flags).
    Value {
        key: &'a [u8],
        flags: u32,
        data: &'a [u8],
    },
    /// Text `END`: the end of one get's values.
    End,
    /// Meta `EN`: one mg missed.
    Miss,
    /// Text `STORED`, meta `HD`.
    Stored,
    /// `NOT_STORED`/`NS`, `EXISTS`/`EX`, `NOT_FOUND`/`NF`.
    NotStored,
    Exists,
    NotFound,
    Error {
        kind: ErrorKind,
        message: &'a [u8],
    },
}

/// Bytes that are no memcached reply: the connection cannot continue.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// A reply line longer than this without CRLF is garbage, not "incomplete".
pub const MAX_LINE: usize = 2048;
/// Values above this are refused (memcached's largest item is 1 MB by
/// default, 1 GB at most; linerate never sets more than 1 MB).
pub const MAX_VALUE: usize = 16 << 20;

/// Up to 60 bytes of `b`, escaped, for messages.
fn quote(b: &[u8]) -> String {
    let cut = &b[..b.len().min(60)];
    let mut s: String = cut.escape_ascii().to_string();
    if b.len() > 60 {
        s.push_str("...");
    }
    s
}

fn bad(what: &str, line: &[u8]) -> ProtocolError {
    ProtocolError(format!("{what}: '{}'", quote(line)))
}

/// Appends a get of `keys`: text one `get` for all of them, meta one `mg`
/// per key asking for the value, the client flags and the key back.
pub fn encode_get(d: Dialect, keys: &[&[u8]], out: &mut Vec<u8>) {
    encode_get_with(d, keys.len(), |i, o| o.extend_from_slice(keys[i]), out);
}

/// `encode_get` with key `i` of `n` appended by `key` straight into the
/// output (a flow's requests allocate nothing).
pub fn encode_get_with(
    d: Dialect,
    n: usize,
    mut key: impl FnMut(usize, &mut Vec<u8>),
    out: &mut Vec<u8>,
) {
    match d {
        Dialect::Text => {
            out.extend_from_slice(b"get");
            for i in 0..n {
                out.push(b' ');
                key(i, out);
            }
            out.extend_from_slice(b"\r\n");
        }
        Dialect::Meta => {
            for i in 0..n {
                out.extend_from_slice(b"mg ");
                key(i, out);
                out.extend_from_slice(b" v f k\r\n");
            }
        }
    }
}

/// Appends a set of `key` with client `flags` and a value of `len` bytes
/// that `fill` writes in place.
pub fn encode_set(
    d: Dialect,
    key: &[u8],
    flags: u32,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
    out: &mut Vec<u8>,
) {
    use std::io::Write;
    match d {
        Dialect::Text => {
            out.extend_from_slice(b"set ");
            out.extend_from_slice(key);
            let _ = write!(out, " {flags} 0 {len}\r\n");
        }
        Dialect::Meta => {
            out.extend_from_slice(b"ms ");
            out.extend_from_slice(key);
            let _ = write!(out, " {len} F{flags}\r\n");
        }
    }
    let at = out.len();
    out.resize(at + len, 0);
    fill(&mut out[at..]);
    out.extend_from_slice(b"\r\n");
}

fn num<T: std::str::FromStr>(tok: &[u8], what: &str, line: &[u8]) -> Result<T, ProtocolError> {
    std::str::from_utf8(tok)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("{what} is not a number"), line))
}

/// The value block after a header line ending at `body`: `len` bytes and
/// CRLF. None: not all here yet.
fn value_at<'a>(
    buf: &'a [u8],
    body: usize,
    len: usize,
    line: &[u8],
) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
    if len > MAX_VALUE {
        return Err(bad("a value larger than 16 MiB", line));
    }
    let end = body + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(bad("a value not followed by CRLF", line));
    }
    Ok(Some((&buf[body..end], end + 2)))
}

/// Parses one reply at the start of `buf`: Ok(None) while incomplete,
/// else the reply and the bytes it took.
pub fn parse(_d: Dialect, buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ProtocolError> {
    let Some(eol) = buf.windows(2).take(MAX_LINE + 1).position(|w| w == b"\r\n") else {
        if buf.len() > MAX_LINE {
            return Err(bad("a reply line longer than 2048 bytes", buf));
        }
        return Ok(None);
    };
    let line = &buf[..eol];
    let body = eol + 2;
    let mut toks = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let word = toks.next().unwrap_or(b"");
    let simple = |r: Reply<'static>| Ok(Some((r, body)));
    match word {
        b"VALUE" => {
            let key = toks
                .next()
                .ok_or_else(|| bad("VALUE without a key", line))?;
            let flags: u32 = num(toks.next().unwrap_or(b""), "VALUE's flags", line)?;
            let len: usize = num(toks.next().unwrap_or(b""), "VALUE's length", line)?;
            Ok(value_at(buf, body, len, line)?
                .map(|(data, used)| (Reply::Value { key, flags, data }, used)))
        }
        b"VA" => {
            let len: usize = num(toks.next().unwrap_or(b""), "VA's length", line)?;
            let (mut key, mut flags) = (&b""[..], 0u32);
            for t in toks {
                match t[0] {
                    b'f' => flags = num(&t[1..], "VA's f flag", line)?,
                    b'k' => key = &t[1..],
                    _ => {}
                }
            }
            Ok(value_at(buf, body, len, line)?
                .map(|(data, used)| (Reply::Value { key, flags, data }, used)))
        }
        b"END" => simple(Reply::End),
        b"EN" => simple(Reply::Miss),
        b"STORED" | b"HD" => simple(Reply::Stored),
        b"NOT_STORED" | b"NS" => simple(Reply::NotStored),
        b"EXISTS" | b"EX" => simple(Reply::Exists),
        b"NOT_FOUND" | b"NF" => simple(Reply::NotFound),
        b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => {
            let kind = match word {
                b"ERROR" => ErrorKind::Error,
                b"CLIENT_ERROR" => ErrorKind::Client,
                _ => ErrorKind::Server,
            };
            let message = line.get(word.len() + 1..).unwrap_or(b"");
            Ok(Some((Reply::Error { kind, message }, body)))
        }
        _ => Err(bad("not a memcached reply", line)),
    }
}

/// The reply to `stats`: `STAT name value` lines up to `END`, as a map.
/// Ok(None) while incomplete.
pub fn parse_stats(buf: &[u8]) -> Result<Option<BTreeMap<String, String>>, ProtocolError> {
    let mut out = BTreeMap::new();
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            if rest.len() > MAX_LINE {
                return Err(bad("a stats line longer than 2048 bytes", rest));
            }
            return Ok(None);
        };
        let line = &rest[..eol];
        at += eol + 2;
        if line == b"END" {
            return Ok(Some(out));
        }
        let text = std::str::from_utf8(line).map_err(|_| bad("a stats line not in UTF-8", line))?;
        let mut parts = text.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("STAT"), Some(name), Some(value)) => {
                out.insert(name.to_string(), value.to_string());
            }
            _ => return Err(bad("not a STAT line", line)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn one(buf: &[u8]) -> (Reply<'_>, usize) {
        parse(Dialect::Text, buf).unwrap().unwrap()
    }

    #[test]
    fn requests_in_both_dialects() {
        let mut out = Vec::new();
        encode_get(Dialect::Text, &[b"a", b"bc"], &mut out);
        assert_eq!(out, b"get a bc\r\n");
        out.clear();
        encode_get(Dialect::Meta, &[b"a", b"bc"], &mut out);
        assert_eq!(out, b"mg a v f k\r\nmg bc v f k\r\n");
        out.clear();
        encode_set(Dialect::Text, b"k", 7, 3, |b| b.fill(b'x'), &mut out);
        assert_eq!(out, b"set k 7 0 3\r\nxxx\r\n");
        out.clear();
        encode_set(Dialect::Meta, b"k", 7, 3, |b| b.fill(b'x'), &mut out);
        assert_eq!(out, b"ms k 3 F7\r\nxxx\r\n");
    }

    #[test]
    fn every_reply_kind() {
        let v = b"VALUE k1 42 3\r\nabc\r\n";
        assert_eq!(
            one(v),
            (
                Reply::Value {
                    key: b"k1",
                    flags: 42,
                    data: b"abc"
                },
                v.len()
            )
        );
        // A cas field after the length is allowed.
        assert!(matches!(
            one(b"VALUE k 0 1 99\r\nx\r\n").0,
            Reply::Value { .. }
        ));
        let va = b"VA 2 f9 kkey t-1\r\nhi\r\n";
        assert_eq!(
            one(va),
            (
                Reply::Value {
                    key: b"key",
                    flags: 9,
                    data: b"hi"
                },
                va.len()
            )
        );
        for (w, r) in [
            (&b"END\r\n"[..], Reply::End),
            (b"EN\r\n", Reply::Miss),
            (b"STORED\r\n", Reply::Stored),
            (b"HD\r\n", Reply::Stored),
            (b"NOT_STORED\r\n", Reply::NotStored),
            (b"NS\r\n", Reply::NotStored),
            (b"EXISTS\r\n", Reply::Exists),
            (b"EX\r\n", Reply::Exists),
            (b"NOT_FOUND\r\n", Reply::NotFound),
            (b"NF\r\n", Reply::NotFound),
        ] {
            assert_eq!(parse(Dialect::Meta, w).unwrap().unwrap(), (r, w.len()));
        }
        assert_eq!(
            one(b"SERVER_ERROR out of memory storing object\r\n").0,
            Reply::Error {
                kind: ErrorKind::Server,
                message: b"out of memory storing object"
            }
        );
        assert_eq!(
            one(b"ERROR\r\n").0,
            Reply::Error {
                kind: ErrorKind::Error,
                message: b""
            }
        );
        assert!(matches!(
            one(b"CLIENT_ERROR bad data chunk\r\n").0,
            Reply::Error {
                kind: ErrorKind::Client,
                ..
            }
        ));
    }

    #[test]
    fn split_anywhere_is_incomplete_until_whole() {
        let mut whole = Vec::new();
        let value: Vec<u8> = (0..300).map(|i| (i % 251) as u8).collect();
        whole.extend_from_slice(b"VALUE lr001 5 300\r\n");
        whole.extend_from_slice(&value);
        whole.extend_from_slice(b"\r\nVALUE lr002 6 1\r\nz\r\nEND\r\n");
        let first = b"VALUE lr001 5 300\r\n".len() + 302;
        for cut in 0..first {
            assert_eq!(
                parse(Dialect::Text, &whole[..cut]).unwrap(),
                None,
                "cut {cut}"
            );
        }
        // Back to back: three replies in one buffer.
        let mut at = 0;
        let mut seen = Vec::new();
        while let Some((r, used)) = parse(Dialect::Text, &whole[at..]).unwrap() {
            seen.push(format!("{r:?}").chars().take(5).collect::<String>());
            at += used;
        }
        assert_eq!(at, whole.len());
        assert_eq!(seen, ["Value", "Value", "End"]);
    }

    #[test]
    fn garbage_is_an_error_not_a_wait() {
        let e = |b: &[u8]| parse(Dialect::Text, b).unwrap_err().0;
        assert!(e(b"HTTP/1.1 200 OK\r\n").contains("not a memcached reply"));
        assert!(e(b"VALUE k x 3\r\nabc\r\n").contains("flags"));
        assert!(e(b"VALUE k 0 99999999999\r\n").contains("16 MiB"));
        assert!(e(b"VALUE k 0 3\r\nabcXY").contains("CRLF"));
        assert!(e(&[b'a'; 3000]).contains("2048"));
        assert!(e(b"VA x\r\n").contains("length"));
    }

    #[test]
    fn stats_reply() {
        let s = b"STAT pid 12\r\nSTAT version 1.6.21\r\nSTAT cmd_get 5\r\nEND\r\n";
        let m = parse_stats(s).unwrap().unwrap();
        assert_eq!(m["cmd_get"], "5");
        assert_eq!(m["version"], "1.6.21");
        assert_eq!(parse_stats(&s[..20]).unwrap(), None);
        assert!(parse_stats(b"nope\r\n").is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let words: [&[u8]; 6] = [b"VALUE ", b"VA ", b"END", b"\r\n", b" 3 ", b"STAT "];
        for _ in 0..10_000 {
            let n = rng.random_range(0..64);
            let mut b = Vec::new();
            for _ in 0..n {
                if rng.random_bool(0.3) {
                    b.extend_from_slice(words[rng.random_range(0..words.len())]);
                } else {
                    b.push(rng.random());
                }
            }
            let _ = parse(Dialect::Text, &b);
            let _ = parse(Dialect::Meta, &b);
            let _ = parse_stats(&b);
        }
    }
}
