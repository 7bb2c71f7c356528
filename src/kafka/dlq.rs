//! Copies of parked records to the DLQ topic (docs/design.md#outcomes).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::error::KafkaResult;
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::KafkaSettings;
use crate::batch::InboundRecord;
use crate::metrics::Metrics;
use crate::observe::DlqCopyFailed;
use crate::parked::ParkedRow;

/// Headers added to a DLQ copy, besides the record's own.
pub mod dlq_headers {
    pub const REASON: &str = "inbox.reason";
    pub const ERROR: &str = "inbox.error";
    pub const SOURCE_TOPIC: &str = "inbox.source.topic";
    pub const SOURCE_PARTITION: &str = "inbox.source.partition";
    pub const SOURCE_OFFSET: &str = "inbox.source.offset";
    /// The trace id of the batch span that parked it (tracing on).
    pub const TRACE_ID: &str = "inbox.trace_id";
    /// `omitted` when the copy carries no payload (`DLQ_PAYLOAD=omit`).
    pub const PAYLOAD: &str = "inbox.payload";
}

/// Copies of parked records to the DLQ topic. The `inbox_parked` table is
/// the durable record, and says which copies are still owed: a copy that
/// fails, or was never sent (a lost answer, a crash), is sent again by the
/// partition's owner from the row, never retried into the hot path.
pub struct Dlq {
    producer: FutureProducer,
    topic: String,
    /// Counts the copies that fail (`inbox_dlq_publish_failures_total`).
    metrics: Metrics,
    /// Copies without the payload (`DLQ_PAYLOAD=omit`).
    omit_payload: bool,
    /// The parked rows whose copies are on their way, and those the topic
    /// confirmed and the database does not know yet.
    copies: std::sync::Arc<Mutex<Copies>>,
}

/// Copies by parked row id (see [`Dlq`]).
#[derive(Debug, Default)]
struct Copies {
    in_flight: BTreeSet<i64>,
    delivered: Vec<i64>,
}

impl Dlq {
    pub fn new(
        settings: &KafkaSettings,
        topic: String,
        metrics: Metrics,
        omit_payload: bool,
    ) -> KafkaResult<Self> {
        let producer = settings
            .client_config()
            .set("linger.ms", "5")
            .set("message.timeout.ms", "30000")
            .create()
            .map_err(|error| settings.scrub(error))?;
        Ok(Dlq {
            producer,
            topic,
            metrics,
            omit_payload,
            copies: Default::default(),
        })
    }

    /// The parked rows whose copies are on their way now.
    pub fn in_flight(&self) -> Vec<i64> {
        let copies = self.copies.lock().expect("copies lock");
        copies.in_flight.iter().copied().collect()
    }

    /// The parked rows whose copies the topic confirmed since the last call.
    pub fn take_delivered(&self) -> Vec<i64> {
        std::mem::take(&mut self.copies.lock().expect("copies lock").delivered)
    }

    /// Confirmed copies the database could not be told of: told next time.
    pub fn delivered_again(&self, ids: Vec<i64>) {
        self.copies
            .lock()
            .expect("copies lock")
            .delivered
            .extend(ids);
    }

    /// Sends a copy of each parked record, with the reason and source
    /// position as headers; does not wait for delivery. A row whose copy is
    /// on its way already is skipped; a copy confirmed is remembered for
    /// [`Dlq::take_delivered`].
    pub fn publish(&self, parked: &[(ParkedRow, &InboundRecord)]) {
        for (row, record) in parked {
            if let Some(id) = row.id {
                if !self
                    .copies
                    .lock()
                    .expect("copies lock")
                    .in_flight
                    .insert(id)
                {
                    continue;
                }
            }
            let headers = self.copy_headers(row, record);
            let mut copy = FutureRecord::<[u8], [u8]>::to(&self.topic).headers(headers);
            if let Some(payload) = record.payload.as_deref().filter(|_| !self.omit_payload) {
                copy = copy.payload(payload);
            }
            if let Some(key) = record.key.as_deref() {
                copy = copy.key(key);
            }
            let (id, copies) = (row.id, self.copies.clone());
            let settled = move |delivered: bool| {
                if let Some(id) = id {
                    let mut copies = copies.lock().expect("copies lock");
                    copies.in_flight.remove(&id);
                    if delivered {
                        copies.delivered.push(id);
                    }
                }
            };
            match self.producer.send_result(copy) {
                Ok(delivery) => {
                    let metrics = self.metrics.clone();
                    tokio::spawn(async move {
                        match delivery.await {
                            Ok(Ok(_)) => settled(true),
                            Ok(Err((error, _))) => {
                                settled(false);
                                DlqCopyFailed {
                                    error: &error,
                                    queued: true,
                                }
                                .emit(&metrics);
                            }
                            Err(_) => settled(false),
                        }
                    });
                }
                Err((error, _)) => {
                    settled(false);
                    DlqCopyFailed {
                        error: &error,
                        queued: false,
                    }
                    .emit(&self.metrics);
                }
            }
        }
    }

    /// A copy's headers: the record's own (secrets redacted, as in the
    /// parked row), then the reason, the source position and, when there
    /// are, the batch's trace id and the payload's omission.
    fn copy_headers(&self, row: &ParkedRow, record: &InboundRecord) -> OwnedHeaders {
        let mut headers = OwnedHeaders::new();
        // Secrets are redacted in the copy as in the parked row.
        for header in &crate::parked::redacted(&record.headers) {
            headers = headers.insert(KafkaHeader {
                key: &header.key,
                value: header.value.as_deref(),
            });
        }
        let partition = row.partition.to_string();
        let offset = row.offset.to_string();
        for (key, value) in [
            (dlq_headers::REASON, row.reason.as_str()),
            (dlq_headers::ERROR, row.error.as_str()),
            (dlq_headers::SOURCE_TOPIC, row.topic.as_str()),
            (dlq_headers::SOURCE_PARTITION, partition.as_str()),
            (dlq_headers::SOURCE_OFFSET, offset.as_str()),
        ]
        .into_iter()
        .chain(
            row.trace_id
                .as_deref()
                .map(|id| (dlq_headers::TRACE_ID, id)),
        )
        .chain(
            self.omit_payload
                .then_some((dlq_headers::PAYLOAD, "omitted")),
        ) {
            headers = headers.insert(KafkaHeader {
                key,
                value: Some(value),
            });
        }
        headers
    }

    /// Waits (bounded) for queued copies before the process exits.
    pub fn flush(&self, timeout: Duration) {
        let _ = rdkafka::producer::Producer::flush(&self.producer, timeout);
    }
}
