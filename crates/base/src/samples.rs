//! Summaries of repeated measurements: the median with the min and max, as every report
//! in flowpath gives them.
//!
//! The median is the upper middle sample of the sorted list, so it is always a value that
//! was measured (a report can show the run it came from); for an odd count that is the
//! usual median.

/// The median, min and max of a list of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// None for an empty list. NaNs sort last (`f64::total_cmp`).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Summary {
            median: *s.get(s.len() / 2)?,
            min: s[0],
            max: s[s.len() - 1],
        })
    }
}

/// The upper middle sample (see the module doc), or None for an empty list.
pub fn median(samples: &[f64]) -> Option<f64> {
    Summary::of(samples).map(|s| s.median)
}

/// The item whose key is the median of the keys (the upper middle one): the run a
/// report takes its other figures from.
pub fn median_by_key<T>(items: &[T], key: impl Fn(&T) -> f64) -> Option<&T> {
    let mut order: Vec<&T> = items.iter().collect();
    order.sort_by(|a, b| key(a).total_cmp(&key(b)));
    order.get(order.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(Summary::of(&[]), None);
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        // Even counts take the upper middle sample: a value that was measured.
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(3.0));
        let runs = [(7, 30.0), (8, 10.0), (9, 20.0)];
        assert_eq!(median_by_key(&runs, |r| r.1), Some(&(9, 20.0)));
    }

    #[test]
    fn the_median_lies_between_min_and_max_and_is_a_sample() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in 1..40 {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 1000) as f64
                })
                .collect();
            let s = Summary::of(&v).unwrap();
            assert!(s.min <= s.median && s.median <= s.max);
            assert!(v.contains(&s.median));
            let below = v.iter().filter(|&&y| y < s.median).count();
            assert!(below <= n / 2 && v.iter().filter(|&&y| y > s.median).count() < n - n / 2 + 1);
        }
    }
}
