//! CPython's `set`, as far as the order `list(a_set)` gives.
//!
//! Ansible's `union`, `intersect`, `difference` and `symmetric_difference`
//! build Python sets whenever every item is hashable, and hand back
//! `list()` of the result: the items come out in the order of the set's
//! hash table. For numbers (and booleans) the hash is fixed by the language,
//! so that order is Ansible's on every run and enka reproduces it here,
//! slot for slot (CPython's `Objects/setobject.c`: open addressing with
//! linear probes, resizing as `set.add`, `set_merge` and the set operators
//! do). Strings hash with a per-process seed, so their order is not
//! reproducible in Ansible itself; callers keep first-seen order for them.

use minijinja::Value;
use minijinja::value::ValueKind;

/// `_PyHASH_BITS` and `_PyHASH_MODULUS` for 64-bit builds.
const HASH_BITS: u32 = 61;
const MODULUS: u64 = (1 << HASH_BITS) - 1;
/// `hash(float('inf'))`.
const HASH_INF: i64 = 314_159;
/// Slots probed one after the other before jumping (`LINEAR_PROBES`).
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;
/// `PySet_MINSIZE`.
const MIN_SIZE: usize = 8;

/// Python's `hash()` of a number or boolean; `None` for anything whose hash
/// is not fixed across runs (strings, `None`, NaN) or that is no number.
pub(crate) fn number_hash(value: &Value) -> Option<i64> {
    match value.kind() {
        ValueKind::Bool => Some(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i128::try_from(value.clone()).ok().map(int_hash),
        ValueKind::Number => f64::try_from(value.clone()).ok().and_then(float_hash),
        _ => None,
    }
}

/// `hash(int)`: the value modulo 2**61 - 1, keeping the sign; -1 is -2.
fn int_hash(n: i128) -> i64 {
    let reduced = (n.unsigned_abs() % u128::from(MODULUS)) as i64;
    let hash = if n < 0 { -reduced } else { reduced };
    if hash == -1 { -2 } else { hash }
}

/// `_Py_HashDouble`: integral floats hash as their integer, the rest by
/// their binary digits, 28 bits at a time, modulo 2**61 - 1.
fn float_hash(v: f64) -> Option<i64> {
    if v.is_nan() {
        return None;
    }
    if v.is_infinite() {
        return Some(if v > 0.0 { HASH_INF } else { -HASH_INF });
    }
    let (mut mantissa, mut exponent) = frexp(v.abs());
    let mut x: u64 = 0;
    while mantissa != 0.0 {
        x = ((x << 28) & MODULUS) | (x >> (HASH_BITS - 28));
        mantissa *= 268_435_456.0;
        exponent -= 28;
        let integral = mantissa as u64;
        mantissa -= integral as f64;
        x += integral;
        if x >= MODULUS {
            x -= MODULUS;
        }
    }
    let bits = HASH_BITS as i32;
    let shift = if exponent >= 0 {
        exponent % bits
    } else {
        bits - 1 - ((-1 - exponent) % bits)
    } as u32;
    x = ((x << shift) & MODULUS) | (x >> (HASH_BITS - shift));
    let hash = if v < 0.0 {
        (x as i64).wrapping_neg()
    } else {
        x as i64
    };
    Some(if hash == -1 { -2 } else { hash })
}

/// C's `frexp` for a finite, non-negative number: `v = m * 2**e`, with
/// `m` in [0.5, 1) (or 0).
fn frexp(v: f64) -> (f64, i32) {
    if v == 0.0 {
        return (0.0, 0);
    }
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp(v * f64::from_bits(0x4350_0000_0000_0000)); // 2**54
        return (m, e - 54);
    }
    let mantissa = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (mantissa, biased - 1022)
}

/// Python's `==` between two numbers or booleans.
fn numbers_equal(a: &Value, b: &Value) -> bool {
    let as_int = |v: &Value| match v.kind() {
        ValueKind::Bool => Some(i128::from(v.is_true())),
        _ if v.is_integer() => i128::try_from(v.clone()).ok(),
        _ => None,
    };
    if let (Some(x), Some(y)) = (as_int(a), as_int(b)) {
        return x == y;
    }
    let as_float = |v: &Value| match v.kind() {
        ValueKind::Bool => Some(f64::from(u8::from(v.is_true()))),
        _ => f64::try_from(v.clone()).ok(),
    };
    matches!((as_float(a), as_float(b)), (Some(x), Some(y)) if x == y)
}

#[derive(Clone)]
enum Slot {
    Unused,
    Dummy,
    Active(i64, Value),
}

/// A CPython set of numbers: its table, `fill` (active and dummy slots)
/// and `used` (active ones).
#[derive(Clone)]
pub(crate) struct NumberSet {
    table: Vec<Slot>,
    fill: usize,
    used: usize,
}

/// Where a lookup ended: the matching slot, or none.
enum Lookup {
    Found(usize),
    Missing,
}

impl NumberSet {
    fn new() -> Self {
        NumberSet {
            table: vec![Slot::Unused; MIN_SIZE],
            fill: 0,
            used: 0,
        }
    }

    /// `set(items)`, each item with its hash: added one by one.
    pub(crate) fn from_items(items: Vec<(i64, Value)>) -> Self {
        let mut set = NumberSet::new();
        for (hash, value) in items {
            set.add(hash, value);
        }
        set
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    pub(crate) fn len(&self) -> usize {
        self.used
    }

    /// The active entries in table order: what `list(set)` gives.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (i64, &Value)> {
        self.table.iter().filter_map(|slot| match slot {
            Slot::Active(hash, value) => Some((*hash, value)),
            _ => None,
        })
    }

    pub(crate) fn into_values(self) -> Vec<Value> {
        self.table
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Active(_, value) => Some(value),
                _ => None,
            })
            .collect()
    }

    /// The probe sequence of a hash: each start slot, then its linear run.
    fn probe(&self, hash: i64, mut visit: impl FnMut(usize) -> bool) {
        let mask = self.mask();
        let mut perturb = hash as u64;
        let mut i = (hash as u64 as usize) & mask;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for j in i..=i + probes {
                if visit(j) {
                    return;
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(perturb as usize))
                & mask;
        }
    }

    /// `set_lookkey`.
    fn lookup(&self, hash: i64, value: &Value) -> Lookup {
        let mut found = Lookup::Missing;
        self.probe(hash, |j| match &self.table[j] {
            Slot::Unused => true,
            Slot::Active(h, v) if *h == hash && numbers_equal(v, value) => {
                found = Lookup::Found(j);
                true
            }
            _ => false,
        });
        found
    }

    pub(crate) fn contains(&self, hash: i64, value: &Value) -> bool {
        matches!(self.lookup(hash, value), Lookup::Found(_))
    }

    /// `set_add_entry`: an equal key stays; a new one takes the last dummy
    /// met on its way, else the unused slot that ended the search, and the
    /// table grows when three fifths are filled.
    pub(crate) fn add(&mut self, hash: i64, value: Value) {
        let mut last_dummy = None;
        let mut end = None;
        self.probe(hash, |j| match &self.table[j] {
            Slot::Unused => {
                end = Some(j);
                true
            }
            Slot::Active(h, v) => *h == hash && numbers_equal(v, &value),
            Slot::Dummy => {
                last_dummy = Some(j);
                false
            }
        });
        let Some(unused) = end else {
            return; // already there
        };
        if let Some(dummy) = last_dummy {
            self.table[dummy] = Slot::Active(hash, value);
            self.used += 1;
            return;
        }
        self.table[unused] = Slot::Active(hash, value);
        self.fill += 1;
        self.used += 1;
        if self.fill * 5 >= self.mask() * 3 {
            let grow_to = if self.used > 50_000 {
                self.used * 2
            } else {
                self.used * 4
            };
            self.resize(grow_to);
        }
    }

    /// `set_discard_entry`: whether it was there.
    pub(crate) fn discard(&mut self, hash: i64, value: &Value) -> bool {
        match self.lookup(hash, value) {
            Lookup::Found(j) => {
                self.table[j] = Slot::Dummy;
                self.used -= 1;
                true
            }
            Lookup::Missing => false,
        }
    }

    /// `set_table_resize`: the smallest power of two above `min_used`,
    /// the active entries re-inserted in table order.
    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        if size == MIN_SIZE && self.table.len() == MIN_SIZE && self.fill == self.used {
            return; // the small table, without dummies: left as it is
        }
        let old = std::mem::replace(&mut self.table, vec![Slot::Unused; size]);
        self.fill = self.used;
        for slot in old {
            if let Slot::Active(hash, value) = slot {
                self.insert_clean(hash, value);
            }
        }
    }

    /// `set_insert_clean`: into a table known to hold neither the key nor
    /// any dummy.
    fn insert_clean(&mut self, hash: i64, value: Value) {
        let mut end = 0;
        self.probe(hash, |j| {
            end = j;
            matches!(self.table[j], Slot::Unused)
        });
        self.table[end] = Slot::Active(hash, value);
    }

    /// `set_merge(self, other)`: one resize up front, then a copy slot for
    /// slot when self is empty and as large, else insertions.
    fn merge(&mut self, other: &NumberSet) {
        if other.used == 0 {
            return;
        }
        if (self.fill + other.used) * 5 >= self.mask() * 3 {
            self.resize((self.used + other.used) * 2);
        }
        if self.fill == 0 && self.mask() == other.mask() && other.fill == other.used {
            self.table = other.table.clone();
            self.fill = other.fill;
            self.used = other.used;
            return;
        }
        if self.fill == 0 {
            self.fill = other.used;
            self.used = other.used;
            for (hash, value) in other.entries() {
                self.insert_clean(hash, value.clone());
            }
            return;
        }
        for (hash, value) in other.entries() {
            self.add(hash, value.clone());
        }
    }

    /// `set_copy`: a new set merged from this one.
    fn copy(&self) -> NumberSet {
        let mut copy = NumberSet::new();
        copy.merge(self);
        copy
    }

    /// `a | b`.
    pub(crate) fn union(&self, other: &NumberSet) -> NumberSet {
        let mut result = self.copy();
        result.merge(other);
        result
    }

    /// `a & b`: the smaller set's entries (the right one on a tie) that the
    /// larger holds, in the smaller one's order.
    pub(crate) fn intersection(&self, other: &NumberSet) -> NumberSet {
        let (large, small) = if other.len() > self.len() {
            (other, self)
        } else {
            (self, other)
        };
        let mut result = NumberSet::new();
        for (hash, value) in small.entries() {
            if large.contains(hash, value) {
                result.add(hash, value.clone());
            }
        }
        result
    }

    /// `a - b`: a copy with b's entries discarded when a is more than four
    /// times larger, else a new set of a's entries b lacks.
    pub(crate) fn difference(&self, other: &NumberSet) -> NumberSet {
        if (self.len() >> 2) > other.len() {
            let mut result = self.copy();
            let discarding = if (other.len() >> 3) > result.len() {
                result.intersection(other)
            } else {
                other.clone()
            };
            for (hash, value) in discarding.entries() {
                result.discard(hash, value);
            }
            if result.fill - result.used > result.mask() / 4 {
                let grow_to = if result.used > 50_000 {
                    result.used * 2
                } else {
                    result.used * 4
                };
                result.resize(grow_to);
            }
            return result;
        }
        let mut result = NumberSet::new();
        for (hash, value) in self.entries() {
            if !other.contains(hash, value) {
                result.add(hash, value.clone());
            }
        }
        result
    }

    /// `a ^ b`: a copy of b, then each of a's entries discarded when there
    /// and added when not.
    pub(crate) fn symmetric_difference(&self, other: &NumberSet) -> NumberSet {
        let mut result = other.copy();
        for (hash, value) in self.entries() {
            if !result.discard(hash, value) {
                result.add(hash, value.clone());
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_of(items: &[i64]) -> NumberSet {
        NumberSet::from_items(
            items
                .iter()
                .map(|&n| (int_hash(n.into()), Value::from(n)))
                .collect(),
        )
    }

    fn listed(set: NumberSet) -> Vec<i64> {
        set.into_values()
            .iter()
            .map(|v| i64::try_from(v.clone()).unwrap_or(i64::MIN))
            .collect()
    }

    #[test]
    fn hashes_are_pythons() {
        // Values printed by CPython's hash().
        assert_eq!(int_hash(-1), -2);
        assert_eq!(int_hash(1 << 61), 1);
        assert_eq!(float_hash(1.5), Some(1_152_921_504_606_846_977));
        assert_eq!(float_hash(-0.5), Some(-1_152_921_504_606_846_976));
        assert_eq!(float_hash(2.0), Some(2));
        assert_eq!(float_hash(f64::NAN), None);
    }

    #[test]
    fn small_ints_come_out_in_slot_order() {
        // What CPython 3.11 printed for list(set(...)) and list(set(...) | set(...)).
        assert_eq!(listed(set_of(&[10, 1, 9, 17, 33])), vec![1, 33, 9, 10, 17]);
        assert_eq!(
            listed(set_of(&[10, 1, 9, 17, 33]).union(&set_of(&[]))),
            vec![1, 33, 17, 9, 10]
        );
        assert_eq!(
            listed(set_of(&[64, 32, 16, 8, 4, 2, 1]).union(&set_of(&[128]))),
            vec![64, 32, 2, 1, 4, 16, 128, 8]
        );
    }
}
