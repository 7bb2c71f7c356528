//! The run's findings as the JSON report of docs/design.md#load-generator (every required key
//! always present, in the units its name says) and as a short summary for a
//! person at the terminal.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::verdict::histogram::Buckets;
use crate::verdict::latency::{seconds_between, Quantiles, SpikeOutcome};
use crate::verdict::reconcile::Reconciliation;
use crate::workload::produce::Timeline;

/// The knobs of the run, echoed in the report.
#[derive(Debug, Clone)]
pub struct Settings {
    pub topic: String,
    pub consumer: String,
    pub rate: f64,
    pub duration_s: f64,
    pub duplicate_ratio: f64,
    pub poison_ratio: f64,
    pub skus: usize,
    pub hot_skus: usize,
    pub hot_share: f64,
    pub pause_consumer: Option<i32>,
    pub pause_at_s: Option<f64>,
    pub pause_for_s: Option<f64>,
    pub backlog: u64,
    pub prefill: Option<u64>,
    pub warmup_s: f64,
}

/// Everything measured, ready to be written.
pub struct Findings<'a> {
    pub scenario: &'a str,
    pub settings: &'a Settings,
    pub events_sent: u64,
    pub unique_events: u64,
    pub duplicates_sent: u64,
    pub poison_sent: &'a BTreeMap<&'static str, u64>,
    pub timeline: &'a Timeline,
    pub drained: bool,
    /// Unique events applied per second (see `throughput_definition`).
    pub throughput_eps: Option<f64>,
    pub throughput_definition: &'static str,
    /// Send -> broker acknowledgement (acks=all): the producer's share.
    pub produce_ack: Option<Quantiles>,
    pub last_applied_at: Option<DateTime<Utc>>,
    pub steady: Option<Quantiles>,
    pub spiked: Option<Quantiles>,
    /// `Some` when a warm-up was set: its events' latency, kept apart.
    pub warmup: Option<Option<Quantiles>>,
    pub spike: Option<SpikeOutcome>,
    pub batch_durations: Option<Buckets>,
    pub spike_batch_durations: Option<Buckets>,
    pub reconciliation: &'a Reconciliation,
    pub picture: Option<String>,
}

fn round(value: f64, decimals: i32) -> f64 {
    let factor = 10f64.powi(decimals);
    (value * factor).round() / factor
}

fn latency_json(quantiles: Option<Quantiles>) -> Value {
    match quantiles {
        Some(q) => json!({
            "p50": round(q.p50, 3), "p95": round(q.p95, 3), "p99": round(q.p99, 3),
            "max": round(q.max, 3), "events": q.count,
        }),
        None => json!({"p50": null, "p95": null, "p99": null, "max": null, "events": 0}),
    }
}

/// Batch-duration quantiles in milliseconds; nulls when the consumer's
/// `/metrics` could not be read or no batch ran.
fn batch_json(buckets: Option<&Buckets>) -> Value {
    let quantile = |q: f64| {
        buckets
            .and_then(|b| b.quantile(q))
            .map(|seconds| round(seconds * 1000.0, 3))
    };
    json!({
        "p50": quantile(0.5), "p95": quantile(0.95), "p99": quantile(0.99),
        "batches": buckets.map_or(0, |b| b.count() as u64),
    })
}

impl Findings<'_> {
    /// Seconds since the start of the run.
    fn offset(&self, t: DateTime<Utc>) -> f64 {
        round(seconds_between(self.timeline.started_at, t), 3)
    }

    pub fn catch_up_seconds(&self) -> Option<f64> {
        let ended = self.timeline.spike?.ended_at;
        let caught_up = self.spike?.caught_up_at;
        Some(round(seconds_between(ended, caught_up), 3))
    }

    pub fn to_json(&self) -> Value {
        let s = self.settings;
        let r = self.reconciliation;
        let spike_times = self.timeline.spike.map(|times| {
            json!({
                "began_s": self.offset(times.began_at),
                "window_start_s": self.spike.map(|o| self.offset(o.began_at)),
                "ended_s": self.offset(times.ended_at),
                "caught_up_s": self.spike.map(|o| self.offset(o.caught_up_at)),
                "window_end_s": self.spike.map(|o| self.offset(o.window_end)),
            })
        });
        json!({
            "scenario": self.scenario,
            "events_sent": self.events_sent,
            "unique_events": self.unique_events,
            "duplicates_sent": self.duplicates_sent,
            "poison_sent": self.poison_sent.values().sum::<u64>(),
            "throughput_eps": self.throughput_eps.map(|t| round(t, 1)),
            "e2e_latency_ms": latency_json(self.steady),
            "batch_duration_ms": batch_json(self.batch_durations.as_ref()),
            "catch_up_seconds": self.catch_up_seconds(),
            "produce_ack_ms": latency_json(self.produce_ack),
            "e2e_latency_spike_ms": self.timeline.spike.map(|_| latency_json(self.spiked)),
            "e2e_latency_warmup_ms": self.warmup.map(latency_json),
            "batch_duration_spike_ms": self.timeline.spike
                .map(|_| batch_json(self.spike_batch_durations.as_ref())),
            "reconciliation": {
                "ok": r.ok,
                "mismatched_skus": r.mismatched_skus,
                "lost_events": r.lost_events,
                "doubled_events": r.doubled_events,
                "over_reserved_skus": r.over_reserved_skus,
                "ledger_rows_delta": r.ledger_rows_delta,
                "expected_ledger_rows": r.expected_ledger_rows,
                "parked_rows_delta": r.parked_rows_delta,
                "expected_parked_rows": r.expected_parked_rows,
                "parked_reason_differences": r.parked_reason_differences.iter()
                    .map(|(reason, (parked, sent))| (reason.clone(), json!({"parked": parked, "sent": sent})))
                    .collect::<serde_json::Map<_, _>>(),
                "drained": self.drained,
            },
            "poison_by_reason": self.poison_sent,
            "timings": {
                "started_at": self.timeline.started_at.to_rfc3339(),
                "production_s": self.offset(self.timeline.production_ended_at),
                "last_applied_s": self.last_applied_at.map(|t| self.offset(t)),
                "spike": spike_times,
            },
            "settings": {
                "topic": s.topic, "consumer": s.consumer, "rate": s.rate,
                "duration_s": s.duration_s, "duplicate_ratio": s.duplicate_ratio,
                "poison_ratio": s.poison_ratio, "skus": s.skus, "hot_skus": s.hot_skus,
                "hot_share": s.hot_share, "pause_consumer": s.pause_consumer,
                "pause_at_s": s.pause_at_s, "pause_for_s": s.pause_for_s,
                "backlog": s.backlog, "prefill": s.prefill, "warmup_s": s.warmup_s,
            },
            "definitions": {
                "throughput_eps": self.throughput_definition,
                "e2e_latency_ms": "processed_at of the ledger row - the send instant (occurred_at less any --event-day-offset), \
                                   events sent after the warm-up and before the spike or after its window",
                "catch_up_seconds": "from SIGCONT (or the end of the burst) until every event sent \
                                     before it has a ledger row",
                "batch_duration_ms": "the consumer's inbox_batch_duration_seconds over the run, \
                                      histogram_quantile of the scrape difference",
                "batch_duration_spike_ms": "the same over the spike window",
                "produce_ack_ms": "send -> broker acknowledgement (acks=all), the producer's share \
                                   of the end-to-end latency",
            },
            "picture": self.picture,
        })
    }

    /// A few lines for the terminal.
    pub fn summary(&self) -> String {
        let mut lines = Vec::new();
        lines.push(format!(
            "scenario {}: sent {} records ({} unique, {} duplicates, {} poison) to {} in {:.1} s",
            self.scenario,
            self.events_sent,
            self.unique_events,
            self.duplicates_sent,
            self.poison_sent.values().sum::<u64>(),
            self.settings.topic,
            self.offset(self.timeline.production_ended_at),
        ));
        let latency = |q: Option<Quantiles>| match q {
            Some(q) => format!(
                "p50 {:.1} / p95 {:.1} / p99 {:.1} / max {:.1} ms ({} events)",
                q.p50, q.p95, q.p99, q.max, q.count
            ),
            None => "no events".to_owned(),
        };
        let batch = |b: Option<&Buckets>| {
            let q = |q: f64| {
                b.and_then(|b| b.quantile(q))
                    .map_or("n/a".to_owned(), |s| format!("{:.1}", s * 1000.0))
            };
            format!("p50 {} / p95 {} / p99 {} ms", q(0.5), q(0.95), q(0.99))
        };
        lines.push(format!(
            "throughput {} events/s; end-to-end latency {}",
            self.throughput_eps
                .map_or("n/a".to_owned(), |t| format!("{t:.0}")),
            latency(self.steady)
        ));
        lines.push(format!(
            "batch duration {}; producer acknowledgements {}",
            batch(self.batch_durations.as_ref()),
            latency(self.produce_ack)
        ));
        if let Some(warmup) = self.warmup {
            lines.push(format!(
                "warm-up ({} s, not in the above): latency {}",
                self.settings.warmup_s,
                latency(warmup)
            ));
        }
        if self.timeline.spike.is_some() {
            lines.push(format!(
                "spike: catch-up {} s; spike latency {}; batch duration during catch-up {}",
                self.catch_up_seconds()
                    .map_or("n/a".to_owned(), |c| format!("{c:.2}")),
                latency(self.spiked),
                batch(self.spike_batch_durations.as_ref())
            ));
        }
        let r = self.reconciliation;
        lines.push(format!(
            "reconciliation {}: mismatched_skus {}, lost_events {}, doubled_events {}, \
             ledger +{} (expected {}), parked +{} (expected {}){}",
            if r.ok { "OK" } else { "FAILED" },
            r.mismatched_skus,
            r.lost_events,
            r.doubled_events,
            r.ledger_rows_delta,
            r.expected_ledger_rows,
            r.parked_rows_delta,
            r.expected_parked_rows,
            if self.drained {
                ""
            } else {
                " — drain timed out"
            }
        ));
        if !r.parked_reason_differences.is_empty() {
            lines.push(format!(
                "warning: parked reasons differ from those sent (parked, sent): {:?}",
                r.parked_reason_differences
            ));
        }
        lines.join("\n")
    }
}
