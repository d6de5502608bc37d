//! Template compiling, rendering and condition judging: any text, no panic,
//! no runaway (the render's fuel is small).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| enka::fuzz::template(data));
