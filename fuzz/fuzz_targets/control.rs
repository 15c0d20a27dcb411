#![no_main]
//! `cargo +nightly fuzz run control`: see linerate::fuzz::control.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::control(data));
