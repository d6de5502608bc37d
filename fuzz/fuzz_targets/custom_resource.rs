//! What a custom resource's author controls, through the run's variables,
//! copies and the YAML/JSON parsers: any text, no panic, no stack overflow,
//! no runaway expansion.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| enka::fuzz::custom_resource(data));
