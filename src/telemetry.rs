//! OpenTelemetry tracing of batches: one span per batch transaction,
//! exported over OTLP/HTTP, off unless an OTLP endpoint is configured.
//!
//! A batch consumes records of many producers' traces, so its span cannot
//! have one parent: it is a root span with a link to each record's W3C
//! `traceparent` (the messaging conventions' rule for batch receivers). Its
//! attributes follow the OpenTelemetry messaging semantic conventions
//! (`messaging.system=kafka`, the destination, the consumer group, the batch
//! size) plus what the batch did (`inbox.*`: offsets per partition, outcome
//! counts). Its trace id goes where a person looking at a parked record
//! starts: the log line, the `inbox_parked` row and the DLQ copy.
//!
//! Configuration is the OpenTelemetry environment, read by the SDK:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! turns it on; `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_TRACES_SAMPLER(_ARG)` as the specification says;
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off. The
//! protocol is `http/protobuf`; another is refused at start-up.

use std::collections::BTreeMap;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Link, Span, SpanContext, SpanKind, Status, TraceContextExt, Tracer, TracerProvider,
};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use crate::batch::{InboundRecord, PartitionKey};
use crate::event::Header;
use crate::store::BatchOutcome;

/// The environment variables that turn tracing on.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
const PROTOCOL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// The one OTLP protocol built in.
const PROTOCOL: &str = "http/protobuf";

/// A tracing configuration the service cannot use: one line naming the
/// variable.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("{variable}: only {PROTOCOL} is supported, not {value:?}")]
    Protocol {
        variable: &'static str,
        value: String,
    },
    #[error("{variable}: not an http:// or https:// URL")]
    Endpoint { variable: &'static str },
    /// The exporter's own words are not shown: they can quote the endpoint,
    /// credentials included.
    #[error("OTEL_EXPORTER_OTLP_*: the OTLP exporter refused this configuration")]
    Exporter,
}

/// The tracer of the running service; `Telemetry::off()` when no endpoint
/// is configured, which costs a batch nothing.
#[derive(Clone)]
pub struct Telemetry {
    tracer: Option<SdkTracer>,
}

/// Owns the exporter: [`TracingGuard::shutdown`] sends what is buffered.
pub struct TracingGuard {
    provider: Option<SdkTracerProvider>,
}

impl TracingGuard {
    /// Flushes the spans not exported yet and stops the export thread.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(error) = provider.shutdown() {
                tracing::warn!(%error, "OpenTelemetry: spans not exported at shutdown");
            }
        }
    }
}

impl Telemetry {
    pub fn off() -> Telemetry {
        Telemetry { tracer: None }
    }

    /// Off, with a guard that has nothing to flush.
    pub fn off_with_guard() -> (Telemetry, TracingGuard) {
        (Telemetry::off(), TracingGuard { provider: None })
    }

    /// Tracing as the environment configures it (`vars` reads it). Must be
    /// called outside an async runtime: the exporter's blocking HTTP client
    /// runs on its own thread.
    pub fn from_env(
        vars: impl Fn(&str) -> Option<String>,
    ) -> Result<(Telemetry, TracingGuard), TelemetryError> {
        let off = Telemetry::off_with_guard();
        let is = |name: &str, value: &str| {
            vars(name).is_some_and(|v| v.trim().eq_ignore_ascii_case(value))
        };
        if is("OTEL_SDK_DISABLED", "true") || is("OTEL_TRACES_EXPORTER", "none") {
            return Ok(off);
        }
        let mut endpoint = None;
        for variable in ENDPOINT_VARIABLES {
            if let Some(value) = vars(variable).filter(|v| !v.trim().is_empty()) {
                let value = value.trim().to_ascii_lowercase();
                if !(value.starts_with("http://") || value.starts_with("https://")) {
                    return Err(TelemetryError::Endpoint { variable });
                }
                endpoint.get_or_insert(variable);
            }
        }
        if endpoint.is_none() {
            return Ok(off);
        }
        for variable in PROTOCOL_VARIABLES {
            if let Some(value) = vars(variable).filter(|v| !v.trim().is_empty()) {
                if value.trim() != PROTOCOL {
                    return Err(TelemetryError::Protocol { variable, value });
                }
            }
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|_| TelemetryError::Exporter)?;
        let mut resource = Resource::builder();
        if vars("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(env!("CARGO_PKG_NAME"));
        }
        resource =
            resource.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer(env!("CARGO_PKG_NAME"));
        tracing::info!("OpenTelemetry tracing on: one span per batch, exported over OTLP/HTTP");
        Ok((
            Telemetry {
                tracer: Some(tracer),
            },
            TracingGuard {
                provider: Some(provider),
            },
        ))
    }

    /// Starts the span of one batch transaction (ended by
    /// [`BatchSpan::applied`] or [`BatchSpan::failed`]).
    pub fn batch_span<'a>(
        &self,
        records: impl Iterator<Item = &'a InboundRecord>,
        group: &str,
    ) -> BatchSpan {
        let Some(tracer) = &self.tracer else {
            return BatchSpan { span: None };
        };
        let records: Vec<&InboundRecord> = records.collect();
        let topic = records.first().map_or("", |r| r.topic.as_str());
        let partitions = offset_ranges(records.iter().copied());
        let mut attributes = vec![
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.name", "process"),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.destination.name", topic.to_owned()),
            KeyValue::new("messaging.consumer.group.name", group.to_owned()),
            KeyValue::new("messaging.batch.message_count", records.len() as i64),
            KeyValue::new("db.system.name", "postgresql"),
            KeyValue::new(
                "inbox.offsets",
                string_array(
                    partitions
                        .iter()
                        .map(|((_, p), (first, last))| format!("{p}:{first}-{last}")),
                ),
            ),
        ];
        if let [((_, partition), _)] = partitions.iter().collect::<Vec<_>>()[..] {
            attributes.push(KeyValue::new(
                "messaging.destination.partition.id",
                partition.to_string(),
            ));
        }
        let links = records
            .iter()
            .filter_map(|record| {
                let context = producer_context(&record.headers)?;
                let attributes = vec![
                    KeyValue::new(
                        "messaging.destination.partition.id",
                        record.partition.to_string(),
                    ),
                    KeyValue::new("messaging.kafka.offset", record.offset),
                ];
                Some(Link::new(context, attributes, 0))
            })
            .collect();
        let span = tracer
            .span_builder(format!("process {topic}"))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .with_links(links)
            .start(tracer);
        BatchSpan { span: Some(span) }
    }
}

/// The span of one batch transaction.
pub struct BatchSpan {
    span: Option<opentelemetry_sdk::trace::Span>,
}

impl BatchSpan {
    /// The trace id (32 hex digits) of a recorded span: where this batch's
    /// parked records point.
    pub fn trace_id(&self) -> Option<String> {
        let context = self.span.as_ref()?.span_context();
        (context.is_valid() && context.is_sampled()).then(|| context.trace_id().to_string())
    }

    /// Ends the span with what the batch did.
    pub fn applied(self, outcome: &BatchOutcome) {
        let Some(mut span) = self.span else { return };
        span.set_attributes([
            KeyValue::new("inbox.processed", outcome.processed as i64),
            KeyValue::new("inbox.duplicates", outcome.duplicates as i64),
            KeyValue::new(
                "inbox.business_duplicates",
                outcome.business_duplicates as i64,
            ),
            KeyValue::new("inbox.parked", outcome.newly_parked.len() as i64),
            KeyValue::new("inbox.lines_reserved", outcome.lines_reserved as i64),
            KeyValue::new("inbox.lines_rejected", outcome.lines_rejected as i64),
        ]);
        span.set_status(Status::Ok);
        span.end();
    }

    /// Ends the span of a transaction that was rolled back (and is retried).
    pub fn failed(self, reason: &'static str, error: &dyn std::fmt::Display) {
        let Some(mut span) = self.span else { return };
        span.set_attribute(KeyValue::new("error.type", reason));
        span.set_status(Status::error(error.to_string()));
        span.end();
    }
}

/// Per partition, the first and last offsets of the records.
fn offset_ranges<'a>(
    records: impl IntoIterator<Item = &'a InboundRecord>,
) -> BTreeMap<PartitionKey, (i64, i64)> {
    let mut ranges: BTreeMap<PartitionKey, (i64, i64)> = BTreeMap::new();
    for record in records {
        let range = ranges
            .entry((record.topic.clone(), record.partition))
            .or_insert((record.offset, record.offset));
        range.0 = range.0.min(record.offset);
        range.1 = range.1.max(record.offset);
    }
    ranges
}

fn string_array(values: impl Iterator<Item = String>) -> Value {
    Value::Array(Array::String(values.map(StringValue::from).collect()))
}

/// The producer's span context from a record's W3C `traceparent` (and
/// `tracestate`) headers, when valid.
fn producer_context(headers: &[Header]) -> Option<SpanContext> {
    let headers = RecordHeaders(headers);
    headers.get("traceparent")?;
    let context = TraceContextPropagator::new().extract(&headers);
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then_some(span_context)
}

/// Kafka headers as the propagator reads them: UTF-8 values only, the last
/// of a repeated key.
struct RecordHeaders<'a>(&'a [Header]);

impl Extractor for RecordHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|h| h.key.eq_ignore_ascii_case(key))
            .and_then(|h| std::str::from_utf8(h.value.as_deref()?).ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|h| h.key.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn header(key: &str, value: &[u8]) -> Header {
        Header {
            key: key.into(),
            value: Some(value.to_vec()),
        }
    }

    #[test]
    fn tracing_is_off_without_an_endpoint() {
        let (telemetry, _guard) = Telemetry::from_env(vars(&[])).unwrap();
        assert!(telemetry.tracer.is_none());
        let (telemetry, _guard) = Telemetry::from_env(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]))
        .unwrap();
        assert!(telemetry.tracer.is_none());
    }

    #[test]
    fn another_protocol_or_a_bad_endpoint_is_refused_naming_the_variable() {
        let error = Telemetry::from_env(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]))
        .err()
        .expect("grpc refused");
        assert!(error
            .to_string()
            .starts_with("OTEL_EXPORTER_OTLP_PROTOCOL:"));
        let error = Telemetry::from_env(vars(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "collector:4318",
        )]))
        .err()
        .expect("no scheme refused");
        assert!(error
            .to_string()
            .starts_with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:"));
    }

    #[test]
    fn a_valid_traceparent_becomes_a_link_and_anything_else_does_not() {
        let context = producer_context(&[header(
            "traceparent",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )])
        .expect("valid");
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for bad in [
            &b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"[..],
            b"garbage",
            b"\xff\x00",
        ] {
            assert!(producer_context(&[header("traceparent", bad)]).is_none());
        }
        assert!(producer_context(&[]).is_none());
    }

    #[test]
    fn offsets_are_given_per_partition_as_ranges() {
        let record = |partition, offset| InboundRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp: None,
            key: None,
            payload: None,
            headers: vec![],
        };
        let ranges = offset_ranges(&[record(1, 7), record(0, 3), record(1, 9)]);
        assert_eq!(
            ranges.into_iter().collect::<Vec<_>>(),
            vec![(("t".into(), 0), (3, 3)), (("t".into(), 1), (7, 9))]
        );
    }
}
