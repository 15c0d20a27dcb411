//! Replays every saved fuzz input (`fuzz/corpus/TARGET/*`: seeds and what
//! the fuzzers kept; `fuzz/regressions/TARGET/*`: inputs that once crashed
//! and were fixed) through the same entry points the fuzz targets call, so
//! a crash found once stays fixed without a nightly toolchain in CI.

use std::path::Path;
use std::time::{Duration, Instant};

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_saved_fuzz_input_runs_clean_and_fast() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut total = 0;
    for (name, target) in linerate::fuzz::TARGETS {
        let corpus = inputs(&root.join("corpus").join(name));
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} has no seeds");
        let regressions = inputs(&root.join("regressions").join(name));
        for p in corpus.iter().chain(&regressions) {
            let data = std::fs::read(p).unwrap();
            let t = Instant::now();
            // A panic names the input through the test's own message.
            let ok = std::panic::catch_unwind(|| target(&data));
            assert!(ok.is_ok(), "{name}: {} panics", p.display());
            // No input may take long (a fuzzer's timeout is 1 s per run;
            // debug builds are slower, hence the margin).
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{name}: {} took {:?}",
                p.display(),
                t.elapsed()
            );
            total += 1;
        }
    }
    assert!(total >= 40, "{total} inputs replayed");
}

#[test]
fn the_fuzz_crate_has_a_target_for_every_entry_point() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for (name, _) in linerate::fuzz::TARGETS {
        let src = root.join(format!("fuzz_targets/{name}.rs"));
        let text =
            std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        assert!(text.contains(&format!("linerate::fuzz::{name}(")), "{name}");
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
    }
}
