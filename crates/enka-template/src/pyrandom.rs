//! Python's `random.Random(seed)`: the Mersenne Twister CPython uses,
//! seeded as `Random.seed` seeds it, drawing as `randrange`, `choice` and
//! `shuffle` draw. Ansible's `random(seed=…)` and `shuffle(seed=…)` filters
//! use it so that a role gets the same value for the same seed on every
//! run (`seed=inventory_hostname`); enka must give the value Ansible gives.

use minijinja::Value;
use minijinja::value::ValueKind;
use sha2::{Digest, Sha512};

const N: usize = 624;
const M: usize = 397;

/// A generator in the state `random.Random(seed)` starts from.
pub(crate) struct PyRandom {
    state: Box<[u32; N]>,
    index: usize,
}

/// Why a value cannot seed Python's generator.
#[derive(Debug, thiserror::Error)]
#[error("The only supported seed types are: None,\nint, float, str, bytes, and bytearray.")]
pub(crate) struct UnsupportedSeed;

impl PyRandom {
    /// `random.Random(seed)` (`version=2`): an integer by its absolute
    /// value, a string by its UTF-8 bytes followed by their SHA-512, a
    /// float by Python's `hash`.
    pub(crate) fn new(seed: &Value) -> Result<PyRandom, UnsupportedSeed> {
        let magnitude: Vec<u8> = match seed.kind() {
            ValueKind::Bool => vec![u8::from(seed.is_true())],
            ValueKind::Number if seed.is_integer() => {
                let n = i128::try_from(seed.clone()).map_err(|_| UnsupportedSeed)?;
                n.unsigned_abs().to_be_bytes().to_vec()
            }
            ValueKind::Number => {
                let x = f64::try_from(seed.clone()).map_err(|_| UnsupportedSeed)?;
                hash_float(x).unsigned_abs().to_be_bytes().to_vec()
            }
            ValueKind::String => {
                let text = seed.as_str().unwrap_or_default().as_bytes();
                let mut bytes = text.to_vec();
                bytes.extend_from_slice(&Sha512::digest(text));
                bytes
            }
            _ => return Err(UnsupportedSeed),
        };
        Ok(PyRandom::from_key(&key_words(&magnitude)))
    }

    /// CPython's `init_by_array`.
    fn from_key(key: &[u32]) -> PyRandom {
        let mut mt = Box::new([0u32; N]);
        mt[0] = 19_650_218;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let previous = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ previous.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let previous = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ previous.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        PyRandom {
            state: mt,
            index: N,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn twist(&mut self) {
        let mt = &mut self.state;
        for k in 0..N {
            let y = (mt[k] & 0x8000_0000) | (mt[(k + 1) % N] & 0x7fff_ffff);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            mt[k] = mt[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// `getrandbits(k)` for `k` up to 64: 32-bit words, least significant
    /// first, the last one shifted down to what is left.
    fn getrandbits(&mut self, bits: u32) -> u64 {
        if bits <= 32 {
            return u64::from(self.next_u32() >> (32 - bits));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - bits));
        low | (high << 32)
    }

    /// `_randbelow(n)`: draws `n.bit_length()` bits until one is below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let bits = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(bits);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(x)`: from the last item down, each swapped with one at or
    /// before it.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// What `randrange(start, stop, step)` draws from: `count` values,
/// `start + step * i`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    start: i64,
    step: i64,
    /// How many values the range holds (at least one).
    pub(crate) count: u64,
}

impl Range {
    /// The range, or Python's error for an empty one or a zero step.
    pub(crate) fn new(start: i64, stop: i64, step: i64) -> Result<Range, String> {
        let width = i128::from(stop) - i128::from(start);
        let wide_step = i128::from(step);
        let count = match wide_step {
            0 => return Err("zero step for randrange()".to_owned()),
            1 => width,
            s if s > 0 => (width + s - 1).div_euclid(s),
            s => (width + s + 1).div_euclid(s),
        };
        if count <= 0 {
            return Err(format!("empty range in randrange({start}, {stop}, {step})"));
        }
        let count = u64::try_from(count).map_err(|_| "range too large".to_owned())?;
        Ok(Range { start, step, count })
    }

    /// The value at `index` (below `count`).
    pub(crate) fn at(&self, index: u64) -> i64 {
        // start + step * index lies between start and stop: it fits.
        (i128::from(self.start) + i128::from(self.step) * i128::from(index)) as i64
    }
}

/// An unsigned big-endian magnitude as the 32-bit words `init_by_array`
/// takes, least significant first; zero is one zero word.
fn key_words(big_endian: &[u8]) -> Vec<u32> {
    let start = big_endian
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(big_endian.len());
    let mut little: Vec<u8> = big_endian[start..].iter().rev().copied().collect();
    while !little.len().is_multiple_of(4) {
        little.push(0);
    }
    let words: Vec<u32> = little
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words.is_empty() { vec![0] } else { words }
}

/// Python's `hash(x)` for a float: its value modulo the Mersenne prime
/// 2**61 - 1 (`_Py_HashDouble`), so `hash(42.0) == 42`.
fn hash_float(x: f64) -> i64 {
    const BITS: i32 = 61;
    const MODULUS: u64 = (1 << BITS) - 1;
    if x.is_infinite() {
        return if x > 0.0 { 314_159 } else { -314_159 };
    }
    if x.is_nan() {
        return 0;
    }
    let (mut m, mut e) = frexp(x);
    let sign = if m < 0.0 {
        m = -m;
        -1
    } else {
        1
    };
    let mut hash: u64 = 0;
    while m != 0.0 {
        hash = ((hash << 28) & MODULUS) | (hash >> (BITS - 28));
        m *= 268_435_456.0;
        e -= 28;
        let y = m as u64;
        m -= y as f64;
        hash += y;
        if hash >= MODULUS {
            hash -= MODULUS;
        }
    }
    let e = if e >= 0 {
        e % BITS
    } else {
        BITS - 1 - ((-1 - e) % BITS)
    };
    hash = ((hash << e) & MODULUS) | (hash >> (BITS - e));
    let hash = sign * hash as i64;
    if hash == -1 { -2 } else { hash }
}

/// C's `frexp`: `x == m * 2**e` with `0.5 <= |m| < 1`.
fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    if exponent == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp(x * 2f64.powi(64));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (m, exponent - 1022)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values CPython 3.11 gives (`random.Random(seed)`), recorded there
    /// by running the calls in each comment.
    #[test]
    fn draws_as_cpython_does() {
        let mut r = PyRandom::new(&Value::from(42)).unwrap();
        // random.Random(42).getrandbits(32) == 2746317213
        assert_eq!(r.getrandbits(32), 2_746_317_213);
        assert_eq!(hash_float(1.5), 1_152_921_504_606_846_977);
        assert_eq!(hash_float(42.0), 42);
        assert_eq!(hash_float(-0.5), -1_152_921_504_606_846_976);
        let randrange = |r: &mut PyRandom, start, stop, step| {
            let range = Range::new(start, stop, step).unwrap();
            range.at(r.below(range.count))
        };
        let draw = |seed: Value, start, stop, step| {
            randrange(&mut PyRandom::new(&seed).unwrap(), start, stop, step)
        };
        // random.Random(seed).randrange(start, stop, step)
        assert_eq!(draw(Value::from("abc"), 0, 100, 1), 98);
        assert_eq!(draw(Value::from(42), 0, 1000, 1), 654);
        assert_eq!(draw(Value::from(0), 0, 1000, 1), 864);
        assert_eq!(
            draw(Value::from((1i128 << 70) + 5), 0, 1_000_000_000_000, 1),
            427_206_651_051
        );
        assert_eq!(draw(Value::from(1.5), 0, 1000, 1), 565);
        assert_eq!(draw(Value::from(true), 0, 100, 1), 17);
        assert_eq!(draw(Value::from(-7), 10, 0, -3), 4);
        assert_eq!(draw(Value::from("héllo"), 0, 1 << 40, 1), 579_877_294_823);
        let mut r = PyRandom::new(&Value::from("abc")).unwrap();
        randrange(&mut r, 0, 100, 1);
        assert_eq!(randrange(&mut r, 5, 100, 5), 90);
        let mut items = [1, 2, 3, 4, 5, 6];
        PyRandom::new(&Value::from("myhost"))
            .unwrap()
            .shuffle(&mut items);
        assert_eq!(items, [4, 2, 1, 3, 6, 5]);
        assert!(PyRandom::new(&Value::from(vec![1])).is_err());
    }
}
