//! Comparing a recorded value with enka's, shared by the conformance
//! corpus and the template fuzzer.

use serde_json::Value as Json;

/// JSON equality with floats compared to Python's printing precision.
pub fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            x.is_f64() == y.is_f64()
                && x.as_f64()
                    .zip(y.as_f64())
                    .is_some_and(|(p, q)| p == q || (p - q).abs() <= 1e-12 * p.abs().max(1.0))
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}
