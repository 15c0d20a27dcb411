#![no_main]
//! `cargo +nightly fuzz run lab_spec`: see linerate::fuzz::lab_spec.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::lab_spec(data));
