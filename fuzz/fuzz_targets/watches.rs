//! watches.yaml parsing: any bytes, no panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| enka::fuzz::watches(data));
