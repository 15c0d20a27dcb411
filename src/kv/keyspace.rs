//! The key space and value sizes of a memcache test, and values that
//! verify themselves.
//!
//! A value's length and bytes follow from its key index and a version (the
//! writer puts the version in memcached's client flags): a reader that gets
//! (key, flags, bytes) knows exactly what must have been written, so a
//! truncated, overwritten or foreign value is detected without any state
//! shared between clients or hosts.

use rand::Rng;
use rand_distr::{Distribution, Zipf};

use super::KvError;

/// memcached's longest key.
pub const MAX_KEY: usize = 250;
/// memcached's default largest item (`-I 1m`), less room for its header.
pub const MAX_VALUE: usize = 1_000_000;

/// N keys named "lr" and the zero-padded index, `key_size` bytes each.
#[derive(Clone, Debug)]
pub struct KeySpace {
    keys: u64,
    key_size: usize,
    zipf: Option<Zipf<f64>>,
    /// Zipf ranks to indices: r -> (r * mult + add) mod N, a bijection
    /// (mult is coprime with N), so hot keys are spread over the space.
    mult: u64,
    add: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl KeySpace {
    pub fn new(keys: u64, key_size: usize, zipf: Option<f64>) -> Result<KeySpace, KvError> {
        if keys == 0 {
            return Err(KvError::NoKeys);
        }
        let digits = (keys - 1).max(1).ilog10() as usize + 1;
        let key_size = key_size.max(digits + 2);
        if key_size > MAX_KEY {
            return Err(KvError::KeyTooLong {
                size: key_size,
                max: MAX_KEY,
            });
        }
        let zipf = match zipf {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => {
                Some(Zipf::new(keys as f64, s).map_err(|source| KvError::Zipf {
                    exponent: s,
                    source,
                })?)
            }
            Some(s) => return Err(KvError::ZipfExponent(s)),
        };
        // A multiplier near N / golden ratio, moved to be coprime with N.
        let mut mult = ((keys as f64 * 0.618_033_988_75) as u64).max(1);
        while gcd(mult, keys) != 1 {
            mult += 1;
        }
        Ok(KeySpace {
            keys,
            key_size,
            zipf,
            mult: mult % keys.max(1),
            add: keys / 3,
        })
    }

    pub fn len(&self) -> u64 {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Writes key `index` into `out` (cleared first).
    pub fn key(&self, index: u64, out: &mut Vec<u8>) {
        out.clear();
        self.append_key(index, out);
    }

    /// Appends key `index` to `out`.
    pub fn append_key(&self, index: u64, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "lr{:0width$}", index, width = self.key_size - 2);
    }

    /// The index of a key this space names, or None.
    pub fn index_of(&self, key: &[u8]) -> Option<u64> {
        if key.len() != self.key_size || !key.starts_with(b"lr") {
            return None;
        }
        let digits = &key[2..];
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let i: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        (i < self.keys).then_some(i)
    }

    /// The next key: uniform over the space, or zipf by popularity rank.
    pub fn pick(&self, rng: &mut impl Rng) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..self.keys),
            Some(z) => {
                let rank = (z.sample(rng) as u64).clamp(1, self.keys) - 1;
                self.scramble(rank)
            }
        }
    }

    fn scramble(&self, rank: u64) -> u64 {
        ((rank as u128 * self.mult as u128 + self.add as u128) % self.keys as u128) as u64
    }
}

/// Value sizes: one size, a range, or a weighted mix of them.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSizes {
    /// (lo, hi inclusive, cumulative weight share up to this class).
    classes: Vec<(usize, usize, f64)>,
    weights: Vec<f64>,
}

fn size(s: &str, all: &str) -> Result<usize, KvError> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("kib")
        .map(|x| format!("{x}k"))
        .or_else(|| t.strip_suffix("kb").map(|x| format!("{x}k")))
        .or_else(|| t.strip_suffix("mib").map(|x| format!("{x}m")))
        .or_else(|| t.strip_suffix("mb").map(|x| format!("{x}m")))
        .or_else(|| t.strip_suffix('b').map(String::from))
        .unwrap_or(t);
    let (num, mul) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1024.0),
        Some('m') => (&t[..t.len() - 1], 1_048_576.0),
        _ => (&t[..], 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| KvError::ValueSize {
        all: all.into(),
        size: s.into(),
    })?;
    let b = (v * mul).round();
    if !(b.is_finite() && b >= 1.0) {
        return Err(KvError::ZeroValue(all.into()));
    }
    if b > MAX_VALUE as f64 {
        return Err(KvError::ValueTooLarge {
            all: all.into(),
            size: s.into(),
        });
    }
    Ok(b as usize)
}

impl ValueSizes {
    pub fn parse(s: &str) -> Result<ValueSizes, KvError> {
        if s.trim().is_empty() {
            return Err(KvError::NoValueSize);
        }
        let mut raw = Vec::new();
        for part in s.split(',') {
            let (range, weight) = match part.split_once(':') {
                Some((r, w)) => {
                    let w: f64 = w.trim().parse().map_err(|_| KvError::Weight {
                        all: s.into(),
                        weight: w.into(),
                    })?;
                    if !(w.is_finite() && w > 0.0) {
                        return Err(KvError::WeightNotPositive {
                            all: s.into(),
                            weight: w,
                        });
                    }
                    (r, w)
                }
                None => (part, 1.0),
            };
            let (lo, hi) = match range.trim().split_once('-') {
                Some((a, b)) => (size(a, s)?, size(b, s)?),
                None => {
                    let v = size(range, s)?;
                    (v, v)
                }
            };
            if hi < lo {
                return Err(KvError::Reversed {
                    all: s.into(),
                    range: range.trim().into(),
                });
            }
            raw.push((lo, hi, weight));
        }
        let total: f64 = raw.iter().map(|c| c.2).sum();
        let mut acc = 0.0;
        let classes = raw
            .iter()
            .map(|&(lo, hi, w)| {
                acc += w / total;
                (lo, hi, acc)
            })
            .collect();
        Ok(ValueSizes {
            classes,
            weights: raw.iter().map(|c| c.2).collect(),
        })
    }

    /// (lo, hi, weight) of each class.
    pub fn classes(&self) -> Vec<(usize, usize, f64)> {
        self.classes
            .iter()
            .zip(&self.weights)
            .map(|(&(lo, hi, _), &w)| (lo, hi, w))
            .collect()
    }

    /// Mean value size over the mix.
    pub fn mean(&self) -> f64 {
        let total: f64 = self.weights.iter().sum();
        self.classes()
            .iter()
            .map(|&(lo, hi, w)| (lo + hi) as f64 / 2.0 * w / total)
            .sum()
    }

    /// The size of key `index`'s value at `version`: the class by weight,
    /// then uniform inside it, from a hash of both.
    pub fn size_for(&self, index: u64, version: u32) -> usize {
        let h = mix(index ^ ((version as u64) << 40) ^ 0x5bd1_e995);
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let &(lo, hi, _) = self
            .classes
            .iter()
            .find(|c| u < c.2)
            .unwrap_or_else(|| self.classes.last().expect("at least one class"));
        let span = (hi - lo + 1) as u64;
        lo + (mix(h) % span) as usize
    }
}

/// splitmix64's finalizer: a strong 64-bit mix.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 8-byte word a value of (index, version) is filled with.
pub fn word(index: u64, version: u32) -> u64 {
    mix(index.wrapping_mul(0x1000_0000_01b3) ^ version as u64).max(1)
}

/// Fills `buf` with `word`'s bytes, repeated.
pub fn fill(buf: &mut [u8], word: u64) {
    let w = word.to_le_bytes();
    for chunk in buf.chunks_mut(8) {
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// True when `data` is exactly what (index, version) writes with `sizes`.
pub fn verify(sizes: &ValueSizes, data: &[u8], index: u64, version: u32) -> bool {
    if data.len() != sizes.size_for(index, version) {
        return false;
    }
    let w = word(index, version).to_le_bytes();
    data.chunks(8).all(|c| c == &w[..c.len()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn keys_round_trip() {
        let k = KeySpace::new(10_000, 16, None).unwrap();
        let mut b = Vec::new();
        k.key(42, &mut b);
        assert_eq!(b, b"lr00000000000042");
        assert_eq!(k.index_of(&b), Some(42));
        assert_eq!(k.index_of(b"lr00000000010000"), None);
        assert_eq!(k.index_of(b"xx00000000000042"), None);
        assert_eq!(k.index_of(b"lr0000000000004x"), None);
        assert_eq!(k.index_of(b"lr42"), None);
        // Too short for the digits: raised.
        let s = KeySpace::new(1_000_000, 3, None).unwrap();
        assert_eq!(s.key_size(), 8);
        assert!(KeySpace::new(10, 300, None).is_err());
        assert!(KeySpace::new(0, 16, None).is_err());
        assert!(KeySpace::new(10, 16, Some(0.0)).is_err());
        assert_eq!(
            KeySpace::new(10, 300, None).unwrap_err().to_string(),
            "keys of 300 bytes: memcached takes at most 250"
        );
    }

    #[test]
    fn uniform_covers_the_space() {
        let k = KeySpace::new(100, 16, None).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut n = [0u32; 100];
        for _ in 0..100_000 {
            n[k.pick(&mut rng) as usize] += 1;
        }
        assert!(n.iter().all(|&c| (800..1200).contains(&c)), "{n:?}");
    }

    #[test]
    fn zipf_is_skewed_and_scrambled() {
        let k = KeySpace::new(10_000, 16, Some(0.99)).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let mut n = vec![0u32; 10_000];
        for _ in 0..100_000 {
            n[k.pick(&mut rng) as usize] += 1;
        }
        let top = *n.iter().max().unwrap();
        assert!(top > 5_000, "the most popular key got {top} of 100k");
        // Not at index 0: the scramble moved it.
        assert_ne!(n.iter().position(|&c| c == top), Some(0));
        let small = KeySpace::new(97, 16, Some(1.0)).unwrap();
        let mut seen: Vec<u64> = (0..97).map(|r| small.scramble(r)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..97).collect::<Vec<_>>());
        let even = KeySpace::new(100, 16, Some(1.0)).unwrap();
        let mut seen: Vec<u64> = (0..100).map(|r| even.scramble(r)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn value_sizes_parse_and_refuse() {
        let v = ValueSizes::parse("4-100,1K-2K,5K-20K").unwrap();
        assert_eq!(v.classes().len(), 3);
        assert_eq!(v.classes()[1], (1024, 2048, 1.0));
        assert_eq!(
            ValueSizes::parse("1K").unwrap().classes(),
            vec![(1024, 1024, 1.0)]
        );
        assert_eq!(ValueSizes::parse("2KB").unwrap().classes()[0].0, 2048);
        assert_eq!(ValueSizes::parse("1KiB").unwrap().classes()[0].0, 1024);
        let w = ValueSizes::parse("4-100:8,1K-2K:1,5K-20K:1").unwrap();
        assert_eq!(w.classes()[0].2, 8.0);
        for (bad, why) in [
            ("", "empty"),
            ("2K-1K", "reversed"),
            ("0", "0 bytes"),
            ("2M", "1,000,000"),
            ("1K:0", "above 0"),
            ("1K:x", "not a number"),
            ("lots", "not a size"),
        ] {
            let e = ValueSizes::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes_follow_classes_and_weights() {
        let v = ValueSizes::parse("4-100:8,1K-2K:1,5K-20K:1").unwrap();
        let mut n = [0u32; 3];
        for i in 0..100_000u64 {
            let s = v.size_for(i, (i % 7) as u32);
            let c = if s <= 100 {
                assert!(s >= 4);
                0
            } else if s <= 2048 {
                assert!(s >= 1024);
                1
            } else {
                assert!((5120..=20480).contains(&s));
                2
            };
            n[c] += 1;
        }
        assert!((78_000..82_000).contains(&n[0]), "{n:?}");
        assert!((9_000..11_000).contains(&n[1]), "{n:?}");
        let m = v.mean();
        assert!(m > 1000.0 && m < 2000.0, "{m}");
    }

    #[test]
    fn values_verify_themselves() {
        let v = ValueSizes::parse("10-300").unwrap();
        let len = v.size_for(5, 9);
        let mut b = vec![0u8; len];
        fill(&mut b, word(5, 9));
        assert!(verify(&v, &b, 5, 9));
        let mut flipped = b.clone();
        flipped[len / 2] ^= 1;
        assert!(!verify(&v, &flipped, 5, 9));
        assert!(!verify(&v, &b[..len - 1], 5, 9));
        assert!(!verify(&v, &b, 6, 9));
        assert!(!verify(&v, &b, 5, 10));
    }
}
