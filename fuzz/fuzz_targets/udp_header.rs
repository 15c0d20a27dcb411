#![no_main]
//! `cargo +nightly fuzz run udp_header`: see linerate::fuzz::udp_header.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::udp_header(data));
