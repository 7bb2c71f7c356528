//! Sending the mix to Kafka, paced or as fast as possible, and injecting the
//! lag spike at its moment.
//!
//! Pacing is by credit: every 10 ms tick sends what the target rate owes
//! since the start (`elapsed × rate` minus what was sent), so events are
//! spread evenly across each second and a late tick is made up at the next
//! one instead of being lost. Each record's event time is the instant it is
//! handed to the producer, the start of its end-to-end latency.
//!
//! The spike starts `--pause-at` seconds in: the consumer is stopped
//! (SIGSTOP) when `--pause-consumer` is set, then `--backlog` extra events are
//! produced at full speed on top of the paced stream. It ends at SIGCONT, or,
//! without a pause, when the burst has been handed to the producer; catch-up
//! is measured from that instant.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use rdkafka::statistics::Statistics;

use crate::workload::generate::{Generator, Manifest, Record};
use crate::workload::pause::PausedProcess;

/// Pacing granularity: 100 sends a second, about 14 events each at 1,400/s.
const TICK: Duration = Duration::from_millis(10);
/// Longest wait for the broker to acknowledge every queued record.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the producer may take to reach the broker.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait when librdkafka's local queue is full.
const QUEUE_FULL_BACKOFF: Duration = Duration::from_millis(1);

/// Tells when the idempotent producer has its producer id, from
/// librdkafka's statistics: until then it holds every record back, so a run
/// that started earlier would charge that wait (0.5-1 s, observed) to its
/// first events' latency.
#[derive(Clone, Default)]
struct IdempotenceWatch {
    assigned: Arc<AtomicBool>,
}

impl ClientContext for IdempotenceWatch {
    fn stats(&self, statistics: Statistics) {
        if statistics
            .eos
            .is_some_and(|eos| eos.idemp_state == "Assigned")
        {
            self.assigned.store(true, Ordering::Relaxed);
        }
    }
}

/// An idempotent producer (acks=all) that checks every delivery.
pub struct Producer {
    inner: FutureProducer<IdempotenceWatch>,
    topic: String,
    /// Deliveries go to the [`Acknowledgements`] task as they are sent.
    deliveries: tokio::sync::mpsc::UnboundedSender<(Instant, DeliveryFuture)>,
    acknowledgements: tokio::task::JoinHandle<Acknowledgements>,
}

/// What the broker said about the records: how long an acknowledgement
/// (acks=all) took from the send, and what failed. The producer's share of
/// the end-to-end latency, to tell it from the consumer's.
#[derive(Debug)]
pub struct Acknowledgements {
    /// Microseconds from the send to the acknowledgement.
    pub latency: Histogram<u64>,
    pub failures: u64,
    pub first_error: Option<String>,
}

impl Acknowledgements {
    /// Awaits deliveries in whatever order they complete, until the producer
    /// is done sending and every delivery is in.
    async fn collect(
        mut deliveries: tokio::sync::mpsc::UnboundedReceiver<(Instant, DeliveryFuture)>,
    ) -> Acknowledgements {
        let mut acknowledgements = Acknowledgements {
            latency: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            failures: 0,
            first_error: None,
        };
        let mut pending = FuturesUnordered::new();
        let mut sending = true;
        while sending || !pending.is_empty() {
            tokio::select! {
                delivery = deliveries.recv(), if sending => match delivery {
                    Some((sent, future)) => pending.push(async move { (future.await, sent.elapsed()) }),
                    None => sending = false,
                },
                Some((outcome, elapsed)) = pending.next(), if !pending.is_empty() => {
                    let error = match outcome {
                        Ok(Ok(_)) => None,
                        Ok(Err((error, _))) => Some(error.to_string()),
                        Err(_) => Some("delivery cancelled".to_owned()),
                    };
                    match error {
                        None => acknowledgements
                            .latency
                            .saturating_record((elapsed.as_micros() as u64).max(1)),
                        Some(error) => {
                            acknowledgements.failures += 1;
                            acknowledgements.first_error.get_or_insert(error);
                        }
                    }
                }
            }
        }
        acknowledgements
    }
}

impl Producer {
    /// Connects, checks the topic exists and waits for the producer id, so
    /// that the client's start-up is not in the first events' latency.
    pub async fn connect(bootstrap_servers: &str, topic: &str) -> Result<Self> {
        let watch = IdempotenceWatch::default();
        let inner: FutureProducer<IdempotenceWatch> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap_servers)
            .set("client.id", "inbox-loadgen")
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "2")
            // Record batches of the Java client's default size (librdkafka's
            // is 1 MB): a prefilled topic then looks like one written by
            // ordinary producers, not one partition's megabyte at a time.
            .set("batch.size", "16384")
            // A prefill of a million events is queued locally at once.
            .set("queue.buffering.max.messages", "2000000")
            .set("message.timeout.ms", "120000")
            .set("statistics.interval.ms", "50")
            .create_with_context(watch.clone())
            .context("creating the Kafka producer")?;
        let client = inner.clone();
        let name = topic.to_owned();
        let metadata = tokio::task::spawn_blocking(move || {
            client
                .client()
                .fetch_metadata(Some(&name), METADATA_TIMEOUT)
        })
        .await
        .context("the metadata request panicked")?
        .with_context(|| format!("no metadata from {bootstrap_servers}"))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        if partitions == 0 {
            bail!("topic {topic} does not exist (scripts/services.sh topic {topic} 12)");
        }
        let waiting = Instant::now();
        while !watch.assigned.load(Ordering::Relaxed) {
            if waiting.elapsed() > METADATA_TIMEOUT {
                bail!("the idempotent producer got no producer id from {bootstrap_servers}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (deliveries, receiver) = tokio::sync::mpsc::unbounded_channel();
        Ok(Producer {
            inner,
            topic: topic.to_owned(),
            deliveries,
            acknowledgements: tokio::spawn(Acknowledgements::collect(receiver)),
        })
    }

    /// Hands one record to librdkafka, waiting while its queue is full.
    pub async fn send(&self, record: &Record) -> Result<()> {
        loop {
            let headers =
                record
                    .headers
                    .iter()
                    .fold(OwnedHeaders::new(), |headers, (key, value)| {
                        headers.insert(Header {
                            key,
                            value: Some(value.as_str()),
                        })
                    });
            let kafka_record = FutureRecord::to(&self.topic)
                .key(&record.key)
                .payload(&record.payload)
                .headers(headers);
            match self.inner.send_result(kafka_record) {
                Ok(delivery) => {
                    // The collector lives until `finish`: the send cannot fail.
                    let _ = self.deliveries.send((Instant::now(), delivery));
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(QUEUE_FULL_BACKOFF).await;
                }
                Err((error, _)) => return Err(error).context("producing a record"),
            }
        }
    }

    /// Waits until librdkafka has no record left to deliver.
    pub async fn wait_until_delivered(&self) -> Result<()> {
        let client = self.inner.clone();
        tokio::task::spawn_blocking(move || client.flush(DELIVERY_TIMEOUT))
            .await
            .context("the flush panicked")?
            .context("records still undelivered")
    }

    /// Waits for every delivery; any failure means the manifest is not what
    /// the broker holds, so the run cannot be reconciled.
    pub async fn finish(self) -> Result<Acknowledgements> {
        drop(self.deliveries);
        let acknowledgements = self
            .acknowledgements
            .await
            .context("the delivery collector failed")?;
        if let Some(error) = &acknowledgements.first_error {
            bail!(
                "{} records were not delivered (first error: {error})",
                acknowledgements.failures
            );
        }
        Ok(acknowledgements)
    }
}

/// The injected lag spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikePlan {
    /// Seconds into the run.
    pub at: Duration,
    /// The consumer process to stop, and for how long.
    pub pause: Option<(i32, Duration)>,
    /// Extra events produced at full speed when the spike starts.
    pub backlog: u64,
}

/// The run's timeline: when production started and ended and when the spike
/// was injected, in wall-clock time (comparable with the database's
/// `processed_at` on the same machine).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeline {
    pub started_at: DateTime<Utc>,
    pub production_ended_at: DateTime<Utc>,
    pub spike: Option<SpikeTimes>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeTimes {
    /// SIGSTOP, or the start of the burst.
    pub began_at: DateTime<Utc>,
    /// SIGCONT, or the end of the burst: catch-up is measured from here.
    pub ended_at: DateTime<Utc>,
}

/// Sends one generated record and books it in the manifest.
async fn send_next(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
) -> Result<()> {
    let planned = generator.next(Utc::now());
    producer.send(planned.record()).await?;
    manifest.record(&planned);
    Ok(())
}

/// `rate` events a second for `duration`, with the spike at its moment.
pub async fn paced(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
    rate: f64,
    duration: Duration,
    spike: Option<SpikePlan>,
) -> Result<Timeline> {
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let start = Instant::now();
    let started_at = Utc::now();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0u64;
    let mut spike_began: Option<DateTime<Utc>> = None;
    let mut spike_times = None;
    let mut paused: Option<(PausedProcess, Duration)> = None;
    loop {
        ticker.tick().await;
        let elapsed = start.elapsed();
        if let Some(plan) = spike.filter(|p| spike_began.is_none() && elapsed >= p.at) {
            let began_at = Utc::now();
            spike_began = Some(began_at);
            if let Some((pid, length)) = plan.pause {
                paused = Some((PausedProcess::stop(pid)?, plan.at + length));
            }
            for _ in 0..plan.backlog {
                send_next(producer, generator, manifest).await?;
            }
            if paused.is_none() {
                spike_times = Some(SpikeTimes {
                    began_at,
                    ended_at: Utc::now(),
                });
            }
        }
        if paused.as_ref().is_some_and(|(_, until)| elapsed >= *until) {
            let (process, _) = paused.take().expect("checked above");
            process.resume()?;
            spike_times = Some(SpikeTimes {
                began_at: spike_began.expect("a pause starts the spike"),
                ended_at: Utc::now(),
            });
        }
        let due = ((elapsed.as_secs_f64() * rate) as u64).min(total);
        while sent < due {
            send_next(producer, generator, manifest).await?;
            sent += 1;
        }
        // A pause reaching past the end of the stream is still ended here.
        if sent >= total && paused.is_none() && (spike.is_none() || spike_times.is_some()) {
            break;
        }
    }
    Ok(Timeline {
        started_at,
        production_ended_at: Utc::now(),
        spike: spike_times,
    })
}

/// `count` events as fast as the producer takes them (max-throughput runs).
/// With `pause`, that consumer is stopped meanwhile and continued once the
/// broker has acknowledged every record, so it then drains a full topic at
/// its own top speed.
pub async fn prefill(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
    count: u64,
    pause: Option<i32>,
) -> Result<Timeline> {
    let started_at = Utc::now();
    let paused = pause.map(PausedProcess::stop).transpose()?;
    for _ in 0..count {
        send_next(producer, generator, manifest).await?;
    }
    let spike = match paused {
        Some(process) => {
            producer.wait_until_delivered().await?;
            process.resume()?;
            Some(SpikeTimes {
                began_at: started_at,
                ended_at: Utc::now(),
            })
        }
        None => None,
    };
    Ok(Timeline {
        started_at,
        production_ended_at: Utc::now(),
        spike,
    })
}
