//! Role loading (YAML 1.1 tasks, keywords, module arguments, templates
//! compiled at load): any bytes as tasks/main.yml, no panic.
#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

static SCRATCH: LazyLock<PathBuf> =
    LazyLock::new(|| std::env::temp_dir().join(format!("enka-fuzz-role-{}", std::process::id())));

libfuzzer_sys::fuzz_target!(|data: &[u8]| enka::fuzz::role(data, &SCRATCH));
