#![no_main]
//! `cargo +nightly fuzz run memcache`: see linerate::fuzz::memcache.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| linerate::fuzz::memcache(data));
