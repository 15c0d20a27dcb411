#![no_main]
//! `cargo +nightly fuzz run study_toml`: see linerate::fuzz::study_toml.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::study_toml(data));
