//! A spec written by linerate reads back and writes again byte for byte.
//!
//! Every `"spec": {...}` block in the committed results (each point, each
//! mixed test's groups, each manifest point) is parsed as a `TestSpec`,
//! written again with `to_string_pretty` and compared as text, so key
//! order, names and defaults are held (serde_json's `Value` would sort the
//! keys and miss a reordering). Results from before a field was added read
//! back with the same values for the keys they have. This guards the
//! redesign of how a test kind owns its options: the results, the
//! control protocol's `Setup` and `--resume` manifests carry this shape.

use linerate::model::spec::TestSpec;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every JSON file under `dir`: points and manifests.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// Each `"spec": {` block of a pretty-printed file: (line, the block's
/// text from `{` to its `}`, unindented).
fn spec_blocks(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        // A test's spec opens with its workload (a lab's `spec` is another
        // record).
        if t != "\"spec\": {"
            || !lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("\"workload\":"))
        {
            continue;
        }
        let indent = l.len() - t.len();
        let close = format!("{}}}", " ".repeat(indent));
        let end = (i + 1..lines.len())
            .find(|&j| lines[j] == close || lines[j] == format!("{close},"))
            .unwrap_or_else(|| panic!("line {}: spec block never closes", i + 1));
        let mut block = String::from("{");
        for l in &lines[i + 1..=end] {
            block.push('\n');
            block.push_str(l.strip_prefix(&" ".repeat(indent)).unwrap_or(l));
        }
        let block = block.trim_end_matches(',').to_string();
        out.push((i + 1, block));
    }
    out
}

#[test]
fn every_committed_spec_writes_back_byte_for_byte() {
    let mut files = Vec::new();
    json_files(&fixtures(), &mut files);
    files.sort();
    let (mut exact, mut older) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, block) in spec_blocks(&text) {
            let at = format!("{}:{line}", f.strip_prefix(fixtures()).unwrap().display());
            let spec: TestSpec =
                serde_json::from_str(&block).unwrap_or_else(|e| panic!("{at}: {e}"));
            let again = serde_json::to_string_pretty(&spec).unwrap();
            if again == block {
                exact += 1;
                continue;
            }
            // Written before some field existed: every key it has keeps
            // its value, and it lacks keys rather than having others.
            let was: serde_json::Map<String, Value> = serde_json::from_str(&block).unwrap();
            let now: serde_json::Map<String, Value> = serde_json::from_str(&again).unwrap();
            assert!(
                was.len() < now.len(),
                "{at}: the spec's keys changed (written {}, now {}):\n{}",
                was.len(),
                now.len(),
                diff(&block, &again)
            );
            for (k, v) in &was {
                assert_eq!(now.get(k), Some(v), "{at}: {k}");
            }
            // The keys it has come in today's order (the maps are sorted:
            // the order is read from the texts).
            let positions: Vec<usize> = was
                .keys()
                .map(|k| again.find(&format!("\n  \"{k}\":")).unwrap())
                .collect();
            let written: Vec<usize> = was
                .keys()
                .map(|k| block.find(&format!("\n  \"{k}\":")).unwrap())
                .collect();
            let mut by_written: Vec<(usize, usize)> = written.into_iter().zip(positions).collect();
            by_written.sort();
            assert!(
                by_written.windows(2).all(|w| w[0].1 < w[1].1),
                "{at}: the keys it has are in another order now"
            );
            older += 1;
        }
    }
    // The fixtures made since the spec's current shape are most of them,
    // and each kind has some (see tests/fixtures/README.md).
    assert!(
        exact >= 30,
        "only {exact} specs written back exactly ({older} older)"
    );
}

/// The first lines where two texts differ, for a failure message.
fn diff(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .take(5)
        .map(|(x, y)| format!("  written {x}\n  now     {y}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `linerate run WORKLOAD [options]` as the command line parses it (the
/// options' own parser: the same `TestOptions` the roof flattens).
#[derive(clap::Parser)]
struct Run {
    #[arg(value_parser = linerate::workload::parser())]
    workload: linerate::model::spec::Workload,
    #[command(flatten)]
    opts: linerate::model::options::TestOptions,
}

/// One command line per kind (and a few variants), each pinning what
/// depends on the host (workers from the CPU count, the I/O mode, the
/// open loop's pacing): the spec each builds is committed under
/// tests/fixtures/specs/, so a change of a default, of a section or of
/// the keys' order shows here. `LINERATE_BLESS=1` writes them again.
const LINES: &[(&str, &str)] = &[
    ("stream", "stream -T 1 --agent-workers 1 --io epoll"),
    (
        "stream-rx-bytes",
        "stream --direction rx --bytes 10M --message 1M -T 1 --agent-workers 1 --io epoll",
    ),
    (
        "rr",
        "rr --request 200 --response 1000 -T 1 --agent-workers 1 --io epoll",
    ),
    (
        "rr-open-loop",
        "rr --rate 1000 --arrivals poisson --pacing sleep -T 1 --agent-workers 1 --io epoll",
    ),
    (
        "rr-search",
        "rr --search p99<=300us --pacing sleep -T 1 --agent-workers 1 --io epoll",
    ),
    (
        "crr",
        "crr --request 64 --response 8K -T 1 --agent-workers 1 --io epoll",
    ),
    ("conn", "conn --flows 100 -T 1 --agent-workers 1"),
    (
        "tls-handshake",
        "tls-handshake --flows 2 -T 1 --agent-workers 1",
    ),
    (
        "udp-stream",
        "udp-stream --message 64 --flows 2 -T 1 --agent-workers 1",
    ),
    (
        "udp-rr",
        "udp-rr --request 64 --response 64 -T 1 --agent-workers 1",
    ),
    ("memcache", "memcache --flows 4 -T 1 --agent-workers 1"),
    ("cipher", "cipher --cipher aes256-gcm"),
    ("rrul", "rrul -T 2 --agent-workers 2 --io epoll"),
    ("rpm", "rpm --rpm-order sequential --mad 5 --mnp 8"),
    (
        "http",
        "http --http-version 1.1 --http-method post --request 2K --response 16K --flows 4 --tls",
    ),
    ("scp", "scp --bytes 8M"),
    (
        "exec",
        "exec --bytes 4M --sshd -- scp -F {ssh_config} {file} server:/tmp/",
    ),
];

#[test]
fn each_kind_builds_the_committed_spec_from_its_command_line() {
    use clap::Parser;
    let dir = fixtures().join("specs");
    let bless = std::env::var_os("LINERATE_BLESS").is_some();
    let mut wrong = Vec::new();
    for (name, line) in LINES {
        let args = std::iter::once("run").chain(line.split(' '));
        let r = Run::try_parse_from(args).unwrap_or_else(|e| panic!("{line}: {e}"));
        let mut o = r.opts;
        o.run.workload = Some(r.workload);
        let spec = linerate::workload::build(&o, false).unwrap_or_else(|e| panic!("{line}: {e}"));
        let text = serde_json::to_string_pretty(&spec).unwrap() + "\n";
        let file = dir.join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&file, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e} (LINERATE_BLESS=1 writes it)", file.display()));
        if want != text {
            wrong.push(format!(
                "{name} (`linerate run {line}`):\n{}",
                diff(&want, &text)
            ));
        }
    }
    assert!(wrong.is_empty(), "specs changed:\n{}", wrong.join("\n"));
    // Every file there has its line (none left from a renamed case).
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for n in names {
        let stem = n.trim_end_matches(".json");
        assert!(
            LINES.iter().any(|(k, _)| *k == stem),
            "{n} has no command line"
        );
    }
}
