#![no_main]
//! `cargo +nightly fuzz run nfqueue`: see linerate::fuzz::nfqueue.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::nfqueue(data));
