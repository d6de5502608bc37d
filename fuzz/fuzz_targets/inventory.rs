//! Inventory reading (INI, YAML, host lists, host ranges): any bytes as
//! an inventory file and as a host list, no panic, no runaway.
#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

static SCRATCH: LazyLock<PathBuf> =
    LazyLock::new(|| std::env::temp_dir().join(format!("enka-fuzz-inventory-{}", std::process::id())));

libfuzzer_sys::fuzz_target!(|data: &[u8]| enka::fuzz::inventory(data, &SCRATCH));
