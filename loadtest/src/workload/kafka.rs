//! The Kafka producer of the load: idempotent, acks=all, every delivery
//! checked. The acknowledgements are collected as they come in: their
//! latency is the producer's share of the end-to-end latency, and any
//! failure means the manifest is not what the broker holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use rdkafka::statistics::Statistics;

use crate::workload::generate::Record;

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
