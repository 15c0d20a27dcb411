//! Entry points for the fuzz targets (`fuzz/fuzz_targets/*.rs`, run with
//! cargo-fuzz) and for the corpus replay test (`tests/fuzz_corpus.rs`),
//! which feeds every saved input through the same functions on every CI
//! run, so a crash once found stays fixed. Each takes arbitrary bytes, as a
//! peer, a file or the kernel could hand them to linerate, and must return
//! without panicking, hanging or allocating without bound.
//!
//! The top floor: it reaches into every parser below.

use crate::control::protocol::{self, Msg, Opener, Sealer};

/// The control channel: a handshake frame, a sealed frame (with a key the
/// fuzzer cannot know, so only its framing and checks are reached), and
/// the message decoder itself on the bytes as JSON, with what the agent
/// does next to a test request (its checks) and to histograms (decode).
pub fn control(data: &[u8]) {
    let _ = protocol::read_msg(&mut &data[..]);
    let mut opener = Opener::new([7; 32], "the fuzzer");
    let mut r = data;
    while let Ok(_m) = opener.open(&mut r) {}
    if let Ok(m) = serde_json::from_slice::<Msg>(data) {
        match &m {
            Msg::Setup { spec, .. } | Msg::SetupClient { spec, .. } => {
                let _ = crate::control::check(spec);
            }
            Msg::Interval { hist: Some(h), .. } => {
                let _ = crate::measure::histogram::decode(&h.latency);
                let _ = crate::measure::histogram::decode(&h.corrected);
            }
            _ => {}
        }
        // What decodes must seal and open again unchanged in kind.
        let key = [9; 32];
        if let Ok(frame) = Sealer::new(key).seal(&m) {
            let back = Opener::new(key, "the fuzzer").open(&mut &frame[..]);
            assert!(back.is_ok(), "a sealed message did not open: {m:?}");
        }
    }
}

/// A study file as `study run FILE` reads it, then its points.
pub fn study_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(s) = crate::study::file::Study::parse(text, "fuzz.toml", "fuzz") {
        let _ = crate::study::sweep::expand(&s, &Default::default());
    }
}

/// A lab's link as a study's `[lab]` table (the same options as `lab up`'s
/// flags), checked and combined into the emulator's spec.
pub fn lab_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(o) = toml::from_str::<crate::lab::spec::LabOptions>(text) {
        if let Ok(spec) = o.build() {
            for dir in 0..2 {
                let _ = crate::lab::spec::shaping(&spec, dir);
            }
        }
    }
}

/// A netlink datagram from NFQUEUE (the emulator's input from the kernel).
pub fn nfqueue(data: &[u8]) {
    let n = u16::from_be_bytes([data.first().copied().unwrap_or(0), 0]);
    let _ = crate::lab::nfqueue::messages_in(data, n);
    let _ = crate::lab::nfqueue::messages_in(data, 0);
}

/// A stored result as `report` and `compare` read it, and the landscape
/// figures drawn from it.
pub fn results_json(data: &[u8]) {
    if let Ok(r) = serde_json::from_slice::<crate::model::result::TestResult>(data) {
        let point = crate::study::sweep::Point {
            groups: Vec::new(),
            index: 0,
            id: "fuzz".into(),
            params: vec![],
            spec: r.spec.clone(),
            confidence: Default::default(),
        };
        let row = crate::report::analysis::landscape::row(point, vec![r]);
        for (_, e) in row.values.iter() {
            let _ = e.mean.is_finite();
        }
    }
    let _ = serde_json::from_slice::<crate::study::folder::Manifest>(data);
}

/// memcached's replies in both dialects, and its `stats` block.
pub fn memcache(data: &[u8]) {
    use crate::kv::protocol::{parse, parse_stats, Dialect};
    for d in [Dialect::Text, Dialect::Meta] {
        let mut rest = data;
        // Every reply in a buffer, as a flow consumes them.
        while let Ok(Some((_, used))) = parse(d, rest) {
            if used == 0 || used > rest.len() {
                panic!("the parser consumed {used} of {} bytes", rest.len());
            }
            rest = &rest[used..];
        }
    }
    let _ = parse_stats(data);
}

/// linerate's UDP datagram header and the TCP flow header.
pub fn udp_header(data: &[u8]) {
    let cookie = data
        .get(8..16)
        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0);
    let _ = crate::engine::udp::Header::read(data, cookie);
    let _ = crate::engine::udp::Header::read(data, 0);
    if let Some(h) = data.get(..crate::engine::flow::HEADER_LEN) {
        let h: &[u8; crate::engine::flow::HEADER_LEN] = h.try_into().expect("length checked");
        let _ = crate::engine::flow::decode_header(h, cookie);
    }
}

/// A fuzz entry point: arbitrary bytes in, nothing out but a panic.
pub type Target = fn(&[u8]);

/// Every target by name: the fuzz crate's binaries and the replay test.
pub const TARGETS: &[(&str, Target)] = &[
    ("control", control),
    ("study_toml", study_toml),
    ("lab_spec", lab_spec),
    ("nfqueue", nfqueue),
    ("results_json", results_json),
    ("memcache", memcache),
    ("udp_header", udp_header),
];
