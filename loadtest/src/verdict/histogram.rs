//! A Prometheus histogram, pure: parsed from a text exposition, the
//! difference between two scrapes of it, and its quantiles interpolated
//! within buckets exactly as Prometheus' `histogram_quantile`. The consumer's
//! batch durations are judged with it ([`crate::probes::scrape`] reads them).

use chrono::{DateTime, Utc};

/// A cumulative histogram: `(upper bound, observations ≤ bound)`, sorted by
/// bound, the last bound `+Inf`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buckets(pub Vec<(f64, f64)>);

impl Buckets {
    /// The `name` histogram from a text exposition, summed over label sets.
    pub fn parse(text: &str, name: &str) -> Buckets {
        let prefix = format!("{name}_bucket{{");
        let mut buckets: Vec<(f64, f64)> = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let Some((labels, value)) = rest.split_once('}') else {
                continue;
            };
            let bound = labels.split(',').find_map(|label| {
                let value = label.trim().strip_prefix("le=\"")?.strip_suffix('"')?;
                match value {
                    "+Inf" => Some(f64::INFINITY),
                    other => other.parse::<f64>().ok(),
                }
            });
            let count = value.split_whitespace().next().and_then(|v| v.parse().ok());
            if let (Some(bound), Some(count)) = (bound, count) {
                match buckets.iter_mut().find(|(b, _)| *b == bound) {
                    Some((_, total)) => *total += count,
                    None => buckets.push((bound, count)),
                }
            }
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Buckets(buckets)
    }

    /// Observations between `earlier` and `self` (same bucket layout).
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        Buckets(
            self.0
                .iter()
                .map(|&(bound, count)| {
                    let before = earlier
                        .0
                        .iter()
                        .find(|(b, _)| *b == bound)
                        .map_or(0.0, |(_, c)| *c);
                    (bound, (count - before).max(0.0))
                })
                .collect(),
        )
    }

    pub fn count(&self) -> f64 {
        self.0.last().map_or(0.0, |(_, c)| *c)
    }

    /// The `q` quantile, as Prometheus' `histogram_quantile`: linear within
    /// the bucket holding the rank, the highest finite bound when the rank
    /// falls into `+Inf`. `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let buckets = &self.0;
        if buckets.len() < 2 || buckets.last()?.0 != f64::INFINITY {
            return None;
        }
        let observations = self.count();
        if observations <= 0.0 {
            return None;
        }
        let rank = q * observations;
        let index = buckets.iter().position(|(_, count)| *count >= rank)?;
        if index == buckets.len() - 1 {
            return Some(buckets[buckets.len() - 2].0);
        }
        let (upper, count) = buckets[index];
        if index == 0 {
            if upper <= 0.0 {
                return Some(upper);
            }
            return Some(upper * rank / count);
        }
        let (lower, below) = buckets[index - 1];
        Some(lower + (upper - lower) * (rank - below) / (count - below))
    }
}

/// A scrape and when it was taken.
pub type Scraped = (DateTime<Utc>, Buckets);

/// The histogram of what happened between `from` and `to`: the last sample
/// at or before `from` to the first at or after `to` (the last one if none).
pub fn between(samples: &[Scraped], from: DateTime<Utc>, to: DateTime<Utc>) -> Option<Buckets> {
    let start = samples.iter().rev().find(|(at, _)| *at <= from)?;
    let end = samples
        .iter()
        .find(|(at, _)| *at >= to)
        .or_else(|| samples.last())?;
    Some(end.1.since(&start.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = "\
# HELP inbox_batch_duration_seconds From the first record of a batch polled to its database commit.
# TYPE inbox_batch_duration_seconds histogram
inbox_batch_duration_seconds_bucket{le=\"0.005\"} 10
inbox_batch_duration_seconds_bucket{le=\"0.01\"} 60
inbox_batch_duration_seconds_bucket{le=\"0.05\"} 90
inbox_batch_duration_seconds_bucket{le=\"0.1\"} 100
inbox_batch_duration_seconds_bucket{le=\"+Inf\"} 100
inbox_batch_duration_seconds_sum 1.5
inbox_batch_duration_seconds_count 100
inbox_batch_size_bucket{le=\"1\"} 3
";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn parses_the_named_histogram_only() {
        let buckets = Buckets::parse(EXPOSITION, "inbox_batch_duration_seconds");
        assert_eq!(buckets.0.len(), 5);
        assert_eq!(buckets.0[0], (0.005, 10.0));
        assert_eq!(buckets.0[4], (f64::INFINITY, 100.0));
        assert_eq!(buckets.count(), 100.0);
    }

    #[test]
    fn label_sets_are_summed_per_bound() {
        let text = "h_bucket{pod=\"a\",le=\"1\"} 2\nh_bucket{le=\"+Inf\",pod=\"a\"} 3\n\
                    h_bucket{pod=\"b\",le=\"1\"} 1\nh_bucket{pod=\"b\",le=\"+Inf\"} 1\n";
        assert_eq!(
            Buckets::parse(text, "h").0,
            vec![(1.0, 3.0), (f64::INFINITY, 4.0)]
        );
    }

    #[test]
    fn quantiles_interpolate_within_buckets_like_prometheus() {
        let buckets = Buckets::parse(EXPOSITION, "inbox_batch_duration_seconds");
        // rank 50 is 40/50 of the way through (0.005, 0.01].
        assert!(close(buckets.quantile(0.5).unwrap(), 0.009));
        // rank 95 is half way through (0.05, 0.1].
        assert!(close(buckets.quantile(0.95).unwrap(), 0.075));
        // rank 5 is in the first bucket, interpolated from 0.
        assert!(close(buckets.quantile(0.05).unwrap(), 0.0025));
    }

    #[test]
    fn a_rank_in_the_infinite_bucket_is_the_highest_finite_bound() {
        let buckets = Buckets(vec![(0.01, 5.0), (0.1, 8.0), (f64::INFINITY, 10.0)]);
        assert!(close(buckets.quantile(0.99).unwrap(), 0.1));
    }

    #[test]
    fn no_observations_no_quantile() {
        let buckets = Buckets(vec![(0.01, 0.0), (f64::INFINITY, 0.0)]);
        assert_eq!(buckets.quantile(0.5), None);
        assert_eq!(Buckets::default().quantile(0.5), None);
    }

    #[test]
    fn a_difference_holds_only_the_interval() {
        let before = Buckets(vec![(0.01, 5.0), (0.1, 8.0), (f64::INFINITY, 10.0)]);
        let after = Buckets(vec![(0.01, 5.0), (0.1, 18.0), (f64::INFINITY, 20.0)]);
        let delta = after.since(&before);
        assert_eq!(
            delta.0,
            vec![(0.01, 0.0), (0.1, 10.0), (f64::INFINITY, 10.0)]
        );
        assert!(close(delta.quantile(0.5).unwrap(), 0.01 + 0.09 * 0.5));
    }

    #[test]
    fn between_uses_the_samples_around_the_interval() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
        let h = |n: f64| Buckets(vec![(0.01, n), (f64::INFINITY, n)]);
        let samples = vec![
            (t(0), h(0.0)),
            (t(10), h(5.0)),
            (t(20), h(9.0)),
            (t(30), h(12.0)),
        ];
        assert_eq!(between(&samples, t(12), t(18)).unwrap().count(), 4.0);
        assert_eq!(between(&samples, t(10), t(40)).unwrap().count(), 7.0);
        assert!(between(&samples, t(-5), t(18)).is_none());
    }
}
