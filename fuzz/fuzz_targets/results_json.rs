#![no_main]
//! `cargo +nightly fuzz run results_json`: see linerate::fuzz::results_json.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::results_json(data));
