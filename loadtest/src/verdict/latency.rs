//! End-to-end latency, pure: event time (the send instant) to the ledger
//! row's `processed_at`, per event, split into the events an injected spike
//! delayed and the rest.
//!
//! The spike window starts with the first event the spike delayed (sent
//! before SIGSTOP but not yet applied, or else SIGSTOP or the burst itself)
//! and ends when the
//! consumer has caught up. Catch-up is the moment every event sent before
//! the end of the pause (SIGCONT) is applied: `catch_up_seconds` is measured
//! to it. Events sent while the consumer was catching up still queue behind
//! the backlog, so the window is extended until it settles: from `T` (first
//! the catch-up moment), the next `T'` is when everything sent before `T` was
//! applied; once `T' − T` is within [`SETTLE`], the queue is back to its
//! normal length and the window ends at `T'`. Events sent before the spike or
//! after that are the steady-state sample (`e2e_latency_ms`), except those
//! sent during an optional warm-up at the start (a new topic's first
//! appends and a cold consumer can take a second), reported apart.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use hdrhistogram::Histogram;
use uuid::Uuid;

use crate::verdict::reconcile::AppliedRow;

/// When the queue counts as drained: a backlog the consumer clears within
/// this time is normal pipelining, not a spike.
pub const SETTLE: Duration = Duration::milliseconds(100);
/// Bound of the fixed-point search (each step is at least `SETTLE` long).
const MAX_SETTLE_STEPS: usize = 10_000;

/// Seconds from `from` to `to` (negative when `to` is earlier), to the
/// microsecond.
pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// One applied event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub sent_at: DateTime<Utc>,
    pub processed_at: DateTime<Utc>,
}

impl Sample {
    pub fn latency(&self) -> Duration {
        self.processed_at - self.sent_at
    }
}

/// The latency of every ledger row of an event that was sent, `sent_at`
/// holding each event's send instant by id; rows of other events are left
/// out.
pub fn samples(sent_at: &HashMap<Uuid, DateTime<Utc>>, applied: &[AppliedRow]) -> Vec<Sample> {
    applied
        .iter()
        .filter_map(|row| {
            sent_at.get(&row.message_id).map(|&sent_at| Sample {
                sent_at,
                processed_at: row.processed_at,
            })
        })
        .collect()
}

/// When the spike's effects were over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpikeOutcome {
    /// The first event the spike delayed was sent (SIGSTOP or earlier).
    pub began_at: DateTime<Utc>,
    /// Everything sent before the end of the pause is applied.
    pub caught_up_at: DateTime<Utc>,
    /// The queue is back to normal: later events are steady state.
    pub window_end: DateTime<Utc>,
}

/// Every applied event's latency, sorted by send time, with the latest
/// `processed_at` so far, to answer "when was everything sent before `t`
/// applied?". (The run's own moments, when it started and when the spike
/// was injected, are [`crate::workload::produce::Timeline`].)
pub struct Latencies {
    samples: Vec<Sample>,
    applied_by: Vec<DateTime<Utc>>,
}

impl Latencies {
    pub fn new(mut samples: Vec<Sample>) -> Latencies {
        samples.sort_by_key(|s| s.sent_at);
        let applied_by = samples
            .iter()
            .scan(None::<DateTime<Utc>>, |latest, s| {
                let next = latest.map_or(s.processed_at, |l| l.max(s.processed_at));
                *latest = Some(next);
                Some(next)
            })
            .collect();
        Latencies {
            samples,
            applied_by,
        }
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// When the last event was applied.
    pub fn last_applied_at(&self) -> Option<DateTime<Utc>> {
        self.applied_by.last().copied()
    }

    /// Events applied per second, from `from` (the first ledger row when
    /// `None`) to the last ledger row; `None` without a span to divide by.
    pub fn applied_per_second(&self, from: Option<DateTime<Utc>>) -> Option<f64> {
        let first = from.or_else(|| self.samples.iter().map(|s| s.processed_at).min())?;
        let span = seconds_between(first, self.last_applied_at()?);
        (span > 0.0).then(|| self.samples.len() as f64 / span)
    }

    /// When the last of the events sent before `t` was applied.
    fn all_applied_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let count = self.samples.partition_point(|s| s.sent_at < t);
        count.checked_sub(1).map(|last| self.applied_by[last])
    }

    /// The spike that began at `began_at` and whose pause ended at `ended_at`.
    /// Events still in flight when it began were delayed by it too: the
    /// window starts at the first of them.
    pub fn spike(&self, began_at: DateTime<Utc>, ended_at: DateTime<Utc>) -> SpikeOutcome {
        let before = self.samples.partition_point(|s| s.sent_at < began_at);
        let began_at = self.samples[..before]
            .iter()
            .find(|s| s.processed_at > began_at)
            .map_or(began_at, |s| s.sent_at);
        let caught_up_at = self
            .all_applied_before(ended_at)
            .map_or(ended_at, |t| t.max(ended_at));
        let mut window_end = caught_up_at;
        for _ in 0..MAX_SETTLE_STEPS {
            let next = self
                .all_applied_before(window_end)
                .map_or(window_end, |t| t.max(window_end));
            let step = next - window_end;
            window_end = next;
            if step <= SETTLE {
                break;
            }
        }
        SpikeOutcome {
            began_at,
            caught_up_at,
            window_end,
        }
    }

    /// The samples by phase: sent before `warmup_until`, in the spike
    /// window, or steady state (everything else).
    pub fn split(&self, spike: Option<&SpikeOutcome>, warmup_until: DateTime<Utc>) -> Phases {
        let mut phases = Phases::default();
        for sample in &self.samples {
            let in_spike = spike.is_some_and(|spike| {
                spike.began_at <= sample.sent_at && sample.sent_at < spike.window_end
            });
            let phase = if in_spike {
                &mut phases.spiked
            } else if sample.sent_at < warmup_until {
                &mut phases.warmup
            } else {
                &mut phases.steady
            };
            phase.push(*sample);
        }
        phases
    }
}

/// Applied events by the phase of the run they were sent in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phases {
    /// Neither warm-up nor delayed by the spike: `e2e_latency_ms`.
    pub steady: Vec<Sample>,
    /// Sent in the spike window: `e2e_latency_spike_ms`.
    pub spiked: Vec<Sample>,
    /// Sent during `--warmup`, before caches and connections were warm.
    pub warmup: Vec<Sample>,
}

/// Quantiles in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub count: u64,
}

/// The latencies' quantiles from an hdrhistogram in microseconds (3
/// significant digits); `None` without samples.
pub fn quantiles(samples: &[Sample]) -> Option<Quantiles> {
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 24 * 3600 * 1_000_000, 3).expect("valid bounds");
    for sample in samples {
        let micros = sample.latency().num_microseconds().unwrap_or(i64::MAX);
        histogram.saturating_record(micros.max(1) as u64);
    }
    Quantiles::of(&histogram)
}

impl Quantiles {
    /// The quantiles of a histogram of microseconds; `None` when empty.
    pub fn of(histogram: &Histogram<u64>) -> Option<Quantiles> {
        if histogram.is_empty() {
            return None;
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Some(Quantiles {
            p50: ms(histogram.value_at_quantile(0.50)),
            p95: ms(histogram.value_at_quantile(0.95)),
            p99: ms(histogram.value_at_quantile(0.99)),
            max: ms(histogram.max()),
            count: histogram.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    fn sample(sent: i64, latency: i64) -> Sample {
        Sample {
            sent_at: at(sent),
            processed_at: at(sent + latency),
        }
    }

    /// One event every 10 ms for 20 s, 5 ms latency, except a pause from
    /// 5 s to 10 s: the backlog is applied from 10 s at 10 events/ms, and what
    /// is sent meanwhile queues behind it.
    fn paused_run() -> Vec<Sample> {
        let mut samples = Vec::new();
        let mut backlog_done = at(10_050);
        for sent in (0..20_000).step_by(10) {
            if (5_000..10_000).contains(&sent) {
                samples.push(Sample {
                    sent_at: at(sent),
                    processed_at: at(10_000 + (sent - 5_000) / 100),
                });
            } else if sent >= 10_000 && at(sent) < backlog_done {
                // Sent during catch-up: applied after the backlog.
                backlog_done += Duration::milliseconds(1);
                samples.push(Sample {
                    sent_at: at(sent),
                    processed_at: backlog_done,
                });
            } else {
                samples.push(sample(sent, 5));
            }
        }
        samples
    }

    #[test]
    fn catch_up_is_when_everything_sent_before_the_pause_end_is_applied() {
        let latencies = Latencies::new(paused_run());
        let spike = latencies.spike(at(5_000), at(10_000));
        // The last backlog event (sent 9,990) is applied at 10,049.
        assert_eq!(spike.caught_up_at, at(10_049));
        assert!(spike.window_end >= spike.caught_up_at);
        assert!(spike.window_end - spike.caught_up_at <= Duration::milliseconds(200));
    }

    #[test]
    fn steady_samples_exclude_the_spike() {
        let latencies = Latencies::new(paused_run());
        let spike = latencies.spike(at(5_000), at(10_000));
        let phases = latencies.split(Some(&spike), at(0));
        assert_eq!(phases.steady.len() + phases.spiked.len(), 2_000);
        assert!(phases.spiked.len() >= 500);
        let steady = quantiles(&phases.steady).unwrap();
        assert!(steady.max <= 6.0, "{steady:?}");
        let spiked = quantiles(&phases.spiked).unwrap();
        assert!(spiked.max >= 4_999.0, "{spiked:?}");
    }

    #[test]
    fn events_in_flight_when_the_pause_began_belong_to_the_spike() {
        let mut samples = paused_run();
        // Sent 2 ms before SIGSTOP, applied after SIGCONT.
        samples.push(Sample {
            sent_at: at(4_998),
            processed_at: at(10_001),
        });
        let latencies = Latencies::new(samples);
        let spike = latencies.spike(at(5_000), at(10_000));
        assert_eq!(spike.began_at, at(4_998));
        let phases = latencies.split(Some(&spike), at(0));
        assert!(quantiles(&phases.steady).unwrap().max <= 6.0);
    }

    #[test]
    fn without_a_spike_every_sample_is_steady() {
        let latencies = Latencies::new(vec![sample(0, 3), sample(10, 4)]);
        let phases = latencies.split(None, at(0));
        assert_eq!((phases.steady.len(), phases.spiked.len()), (2, 0));
    }

    #[test]
    fn warmup_events_are_apart_from_the_steady_state() {
        let latencies = Latencies::new(vec![sample(0, 900), sample(500, 400), sample(1_500, 4)]);
        let phases = latencies.split(None, at(1_000));
        assert_eq!(phases.warmup.len(), 2);
        assert_eq!(phases.steady, vec![sample(1_500, 4)]);
    }

    #[test]
    fn a_spike_with_nothing_queued_is_caught_up_at_once() {
        let latencies = Latencies::new(vec![sample(0, 3), sample(100, 3)]);
        let spike = latencies.spike(at(50), at(60));
        assert_eq!(spike.caught_up_at, at(60));
    }

    #[test]
    fn samples_pair_ledger_rows_with_their_send_instant() {
        let sent_at = HashMap::from([(Uuid::from_u128(1), at(0)), (Uuid::from_u128(2), at(10))]);
        let row = |id: u128, applied: i64| AppliedRow {
            message_id: Uuid::from_u128(id),
            processed_at: at(applied),
        };
        // Id 3 is not an event of this run; id 2 was not applied.
        let samples = samples(&sent_at, &[row(1, 7), row(3, 9)]);
        assert_eq!(samples, vec![sample(0, 7)]);
    }

    #[test]
    fn throughput_is_over_the_span_to_the_last_ledger_row() {
        let latencies = Latencies::new(vec![
            sample(0, 500),
            sample(1_000, 500),
            sample(1_500, 1_000),
        ]);
        assert_eq!(latencies.last_applied_at(), Some(at(2_500)));
        // From the first ledger row (500 ms): 3 events in 2 s.
        assert_eq!(latencies.applied_per_second(None), Some(1.5));
        // From the first send: 3 events in 2.5 s.
        assert_eq!(latencies.applied_per_second(Some(at(0))), Some(1.2));
        assert_eq!(
            Latencies::new(vec![sample(0, 5)]).applied_per_second(None),
            None
        );
        assert_eq!(
            Latencies::new(Vec::new()).applied_per_second(Some(at(0))),
            None
        );
    }

    #[test]
    fn seconds_between_is_signed_and_to_the_microsecond() {
        let later = at(1_500) + Duration::microseconds(1);
        assert_eq!(seconds_between(at(0), later), 1.500_001);
        assert_eq!(seconds_between(later, at(0)), -1.500_001);
    }

    #[test]
    fn quantiles_are_in_milliseconds() {
        let samples: Vec<Sample> = (1..=100).map(|i| sample(i * 10, i)).collect();
        let q = quantiles(&samples).unwrap();
        assert!((q.p50 - 50.0).abs() < 0.1, "{q:?}");
        assert!((q.p95 - 95.0).abs() < 0.1, "{q:?}");
        assert!((q.p99 - 99.0).abs() < 0.1, "{q:?}");
        assert!((q.max - 100.0).abs() < 0.1, "{q:?}");
        assert_eq!(q.count, 100);
        assert_eq!(quantiles(&[]), None);
    }
}
