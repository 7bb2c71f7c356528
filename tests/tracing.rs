//! Tracing exported over OTLP, received by a real OpenTelemetry Collector of
//! each test's own (`common::private_otelcol`) and read back from what it
//! exported.

mod common;

use std::time::Duration;

use common::private_otelcol::{attribute, PrivateCollector};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
