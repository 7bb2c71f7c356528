//! Tracing exported over OTLP, received by a real OpenTelemetry Collector of
//! each test's own (`common::private_otelcol`) and read back from what it
//! exported.

mod common;

use std::time::Duration;

use common::private_otelcol::{attribute, PrivateCollector};
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

/// The collector itself, before any test relies on it: one span posted as
/// OTLP/HTTP JSON comes back from `spans()` with its name, attribute and
/// resource.
#[tokio::test]
async fn the_collector_receives_otlp_spans() {
    let collector = PrivateCollector::start();
    let request = json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [
                    { "key": "service.name", "value": { "stringValue": "tracing-smoke-test" } }
                ]
            },
            "scopeSpans": [{
                "scope": { "name": "tests/tracing.rs" },
                "spans": [{
                    "traceId": "5b8efff798038103d269b633813fc60c",
                    "spanId": "eee19b7ec3c1b174",
                    "name": "smoke-span",
                    "kind": 1,
                    "startTimeUnixNano": "1764800000000000000",
                    "endTimeUnixNano": "1764800000500000000",
                    "attributes": [
                        { "key": "messaging.system", "value": { "stringValue": "kafka" } },
                        { "key": "batch.records", "value": { "intValue": "42" } }
                    ]
                }]
            }]
        }]
    });

    let (status, body) = post_json(&collector.http_endpoint(), "/v1/traces", &request).await;
    assert_eq!(status, 200, "POST /v1/traces answered {status}: {body}");

    let spans = collector
        .wait_for_spans(Duration::from_secs(10), |spans| !spans.is_empty())
        .await;
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0];
    assert_eq!(span["name"], "smoke-span");
    assert_eq!(span["traceId"], "5b8efff798038103d269b633813fc60c");
    assert_eq!(attribute(span, "messaging.system"), Some(&json!("kafka")));
    assert_eq!(attribute(span, "batch.records"), Some(&json!("42")));
    assert_eq!(
        attribute(&span["resource"], "service.name"),
        Some(&json!("tracing-smoke-test"))
    );
    assert_eq!(span["scope"]["name"], "tests/tracing.rs");
}

/// The OTLP span kind of a consumer span.
const SPAN_KIND_CONSUMER: i64 = 5;

/// A producer's W3C trace context: its trace id, and the `traceparent`
/// header naming a span of it.
fn producer_trace() -> (String, String) {
    let trace_id = Uuid::new_v4().simple().to_string();
    let span_id = &Uuid::new_v4().simple().to_string()[..16];
    let header = format!("00-{trace_id}-{span_id}-01");
    (trace_id, header)
}

/// The trace ids a span links to.
fn linked_traces(span: &Value) -> Vec<String> {
    span["links"]
        .as_array()
        .map(|links| {
            links
                .iter()
                .filter_map(|link| link["traceId"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn int_attribute(span: &Value, key: &str) -> i64 {
    attribute(span, key)
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} is not an int attribute of {span:#}"))
}

/// The consumer's spans, one per batch transaction, as the collector got
/// them: a consumer span with the messaging conventions' attributes and the
/// batch's outcome, linked to the trace of every record that carried a
/// `traceparent` (and only those); the trace id of the batch that parked a
/// record is on its `inbox_parked` row, its log line and its DLQ copy.
#[tokio::test]
async fn each_batch_is_a_span_linked_to_the_traces_of_its_records() {
    let collector = PrivateCollector::start();
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-T", 100)]).await;
    let traced: Vec<(String, String)> = (0..3).map(|_| producer_trace()).collect();
    let records = vec![
        Outgoing::event(&order("TRACE-1", &[("SKU-T", 1)])).header("traceparent", &traced[0].1),
        Outgoing::event(&order("TRACE-2", &[("SKU-T", 2)])).header("traceparent", &traced[1].1),
        Outgoing::raw("TRACE-3", b"not an event").header("traceparent", &traced[2].1),
        Outgoing::event(&order("TRACE-4", &[("SKU-T", 3)])),
        Outgoing::event(&order("TRACE-5", &[("SKU-T", 4)])).header("traceparent", "garbage"),
    ];
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.http_endpoint())
        // The batch span processor's delay: the test waits for less.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    spec.dlq_topic = dlq.clone();
    let consumer = spec.start();
    wait_committed(&spec, records.len() as i64).await;

    let name = format!("process {topic}");
    let wanted: Vec<String> = traced.iter().map(|(id, _)| id.clone()).collect();
    let spans = collector
        .wait_for_spans(Duration::from_secs(30), |spans| {
            let linked: Vec<String> = spans
                .iter()
                .filter(|s| s["name"] == name.as_str())
                .flat_map(linked_traces)
                .collect();
            wanted.iter().all(|id| linked.contains(id))
        })
        .await;
    let batches: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == name.as_str())
        .collect();
    for span in &batches {
        assert_eq!(span["kind"], SPAN_KIND_CONSUMER, "{span:#}");
        assert_eq!(
            span["parentSpanId"].as_str().unwrap_or(""),
            "",
            "a root span"
        );
        for (key, value) in [
            ("messaging.system", "kafka"),
            ("messaging.operation.name", "process"),
            ("messaging.operation.type", "process"),
            ("messaging.destination.name", topic.as_str()),
            ("messaging.consumer.group.name", spec.group.as_str()),
            ("messaging.destination.partition.id", "0"),
        ] {
            assert_eq!(attribute(span, key), Some(&json!(value)), "{key}: {span:#}");
        }
        assert_eq!(
            attribute(&span["resource"], "service.name"),
            Some(&json!("inventory-inbox"))
        );
        for link in span["links"].as_array().into_iter().flatten() {
            assert!(
                attribute(link, "messaging.kafka.offset").is_some(),
                "a link names its record: {link:#}"
            );
        }
    }
    // Every record was in exactly one applied batch, and only the three
    // valid traceparents became links.
    let sum = |key: &str| batches.iter().map(|s| int_attribute(s, key)).sum::<i64>();
    assert_eq!(sum("messaging.batch.message_count"), 5);
    assert_eq!(sum("inbox.processed"), 4);
    assert_eq!(sum("inbox.parked"), 1);
    let mut linked: Vec<String> = batches.iter().flat_map(|s| linked_traces(s)).collect();
    linked.sort();
    let mut expected = wanted.clone();
    expected.sort();
    assert_eq!(linked, expected);

    // The parked record points at the batch that parked it.
    let parking = batches
        .iter()
        .find(|s| linked_traces(s).contains(&traced[2].0))
        .expect("the span linked to the parked record's trace");
    let trace_id = parking["traceId"].as_str().expect("trace id").to_owned();
    assert_ne!(
        trace_id, traced[2].0,
        "the batch's own trace, not the producer's"
    );
    let stored: Option<String> = sqlx::query_scalar("SELECT trace_id FROM inbox_parked")
        .fetch_one(&db.pool)
        .await
        .expect("one parked row");
    assert_eq!(stored.as_deref(), Some(trace_id.as_str()));
    let log = consumer.log_text();
    let line = log
        .lines()
        .find(|line| line.contains("record parked"))
        .unwrap_or_else(|| panic!("no parked log line:\n{log}"));
    assert!(line.contains(&trace_id), "{line}");
    assert_eq!(dlq_trace_id(&dlq).await.as_deref(), Some(trace_id.as_str()));
    consumer.stop().await;
}

/// The `inbox.trace_id` header of the first copy on the DLQ topic.
async fn dlq_trace_id(dlq: &str) -> Option<String> {
    let reader: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .set("group.id", unique("dlq_reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("a DLQ reader");
    reader.subscribe(&[dlq]).expect("subscribe to the DLQ");
    let copy = tokio::time::timeout(Duration::from_secs(30), reader.recv())
        .await
        .expect("a DLQ copy within 30 s")
        .expect("a DLQ copy");
    let headers = copy.headers()?;
    headers
        .iter()
        .find(|h| h.key == "inbox.trace_id")
        .and_then(|h| h.value)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// A POST of `body` as JSON over HTTP/1.0 to `endpoint` (`http://HOST:PORT`):
/// the status and the response body. HTTP/1.0, so the response is a plain
/// body until the server closes (no chunked encoding to undo).
async fn post_json(endpoint: &str, path: &str, body: &Value) -> (u16, String) {
    let address = endpoint
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// endpoint: {endpoint}"));
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|error| panic!("connect to {address}: {error}"));
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .expect("read the response");
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in: {head}"));
    (status, body.to_owned())
}
