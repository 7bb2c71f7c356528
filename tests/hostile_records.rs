//! A record can never stop a partition: bytes no producer should send (NUL
//! in header values, headers that are not UTF-8, JSON strings holding
//! `\u0000`, tombstones, binary garbage, a value near the topic's size
//! limit) are parked with their reason, what they carry is kept so that any
//! bytes fit, and the records after them are applied. The records are
//! written by a plain librdkafka producer with raw header bytes, not by the
//! service's own event types.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use sqlx::Row;

/// One raw record: key, payload (None: a tombstone), headers as bytes.
struct Raw {
    key: &'static str,
    payload: Option<Vec<u8>>,
    headers: Vec<(&'static str, Vec<u8>)>,
}

async fn produce_raw(topic: &str, records: &[Raw]) {
    let producer = producer();
    for record in records {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value.as_slice()),
            });
        }
        let mut message = FutureRecord::<str, [u8]>::to(topic)
            .key(record.key)
            .partition(0)
            .headers(headers);
        if let Some(payload) = &record.payload {
            message = message.payload(payload);
        }
        producer
            .send(message, Duration::from_secs(30))
            .await
            .expect("record acknowledged");
    }
}

#[tokio::test]
async fn records_with_any_bytes_are_parked_and_never_stop_the_partition() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let first = order("ORD-FIRST", &[("SKU-1", 1)]);
    let last = order("ORD-LAST", &[("SKU-1", 2)]);
    let nul_in_json = String::from_utf8(order("ORD-X", &[("SKU-1", 1)]).to_json())
        .unwrap()
        .replace("ORD-X", "ORD\\u0000X");
    let mut near_limit = b"{\"pad\":\"".to_vec();
    near_limit.extend(std::iter::repeat_n(b'x', 900 * 1024));
    near_limit.extend(b"\"}");
    produce_raw(
        &topic,
        &[
            Raw {
                key: "ORD-FIRST",
                payload: Some(first.to_json()),
                headers: vec![],
            },
            Raw {
                key: "KEY-1",
                payload: Some(b"not json".to_vec()),
                headers: vec![
                    ("nul", b"a\0b".to_vec()),
                    ("latin1", vec![0xe9, 0xff, 0x00]),
                    (
                        "traceparent",
                        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_vec(),
                    ),
                ],
            },
            Raw {
                key: "KEY-2",
                payload: Some(nul_in_json.into_bytes()),
                headers: vec![("ce_subject", b"\0\0".to_vec())],
            },
            Raw {
                key: "KEY-3",
                payload: None,
                headers: vec![],
            },
            Raw {
                key: "KEY-4",
                payload: Some(vec![0x00, 0xff, 0x00, 0x7b, 0x22, 0xc3, 0x28]),
                headers: vec![],
            },
            Raw {
                key: "KEY-5",
                payload: Some(near_limit),
                headers: vec![],
            },
            Raw {
                key: "ORD-LAST",
                payload: Some(last.to_json()),
                headers: vec![],
            },
        ],
    )
    .await;

    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 7).await;
    assert_eq!(
        db.ledger_rows().await,
        2,
        "the valid records around them applied"
    );
    assert_eq!(db.reserved("SKU-1").await, 3);
    assert_eq!(
        db.parked().await,
        [
            ("malformed_json".into(), 1),
            ("invalid_field".into(), 2),
            ("malformed_json".into(), 3),
            ("malformed_json".into(), 4),
            ("payload_too_large".into(), 5),
        ]
    );

    // What they carried is there, byte for byte where it is not text.
    let row = sqlx::query(
        "SELECT jsonb_typeof(headers->'nul') AS nul, headers->'latin1'->>'hex' AS latin1, headers->'nul'->>'hex' AS nul_hex
         FROM inbox_parked WHERE kafka_offset = 1",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(row.get::<String, _>("nul"), "object", "not stored as text");
    assert_eq!(row.get::<String, _>("nul_hex"), "610062");
    assert_eq!(row.get::<String, _>("latin1"), "e9ff00");
    let sizes: Vec<(i64, Option<i32>)> = sqlx::query_as(
        "SELECT kafka_offset, octet_length(payload) FROM inbox_parked ORDER BY kafka_offset",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(sizes[2], (3, None), "a tombstone has no payload");
    assert_eq!(sizes[3], (4, Some(7)));
    assert_eq!(sizes[4], (5, Some(64 * 1024)), "bounded");

    // The log of a parked record names its order (the key here) and trace.
    let log = consumer.log_text();
    let line = log
        .lines()
        .find(|line| line.contains("record parked") && line.contains("offset=1 "))
        .unwrap_or_else(|| panic!("no log line for offset 1:\n{log}"));
    assert!(line.contains(r#"order_id="KEY-1""#), "{line}");
    assert!(
        line.contains(r#"trace="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01""#),
        "{line}"
    );
    consumer.stop().await;
}

#[tokio::test]
async fn a_record_whose_parked_row_is_refused_is_parked_bare() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    // The database refuses this order, and then refuses to keep what the
    // record carries: rules the service does not know about.
    for rule in [
        "ALTER TABLE order_reservation ADD CONSTRAINT no_blocked CHECK (order_id <> 'ORD-BLOCKED')",
        "ALTER TABLE inbox_parked ADD CONSTRAINT keep_nothing CHECK (reason <> 'db_rejected' OR payload IS NULL)",
    ] {
        sqlx::query(rule).execute(&db.pool).await.unwrap();
    }
    let records = [
        order("ORD-1", &[("SKU-1", 1)]),
        order("ORD-BLOCKED", &[("SKU-1", 1)]),
        order("ORD-2", &[("SKU-1", 1)]),
    ];
    produce(
        &producer(),
        &topic,
        &records.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 3).await;
    assert_eq!(db.reserved("SKU-1").await, 2);
    assert_eq!(db.parked().await, [("db_rejected".into(), 1)]);
    let (payload, error): (Option<Vec<u8>>, String) =
        sqlx::query_as("SELECT payload, error FROM inbox_parked")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(payload, None);
    assert!(
        error.contains("no_blocked") && error.contains("could not be stored"),
        "{error}"
    );
    consumer.stop().await;
}

/// Adds a header whose key is any bytes: rust-rdkafka's header type holds a
/// key as `&str`, so the key goes to librdkafka directly, as kcat's `-H`
/// would send it.
fn with_raw_key(headers: OwnedHeaders, key: &[u8], value: &[u8]) -> OwnedHeaders {
    use rdkafka::bindings as rdsys;
    let native = headers.as_borrowed() as *const rdkafka::message::BorrowedHeaders
        as *mut rdsys::rd_kafka_headers_t;
    // SAFETY: `native` is the list `headers` owns (what `as_borrowed` views),
    // live for the call; librdkafka copies the key and the value.
    let added = unsafe {
        rdsys::rd_kafka_header_add(
            native,
            key.as_ptr().cast(),
            key.len() as isize,
            value.as_ptr().cast(),
            value.len() as isize,
        )
    };
    assert_eq!(
        added,
        rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
    );
    headers
}

#[tokio::test]
async fn a_header_key_that_is_not_utf8_is_kept_and_its_record_applied_or_parked() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let valid = order("ORD-ODD-KEY", &[("SKU-1", 2)]);
    let after = order("ORD-AFTER", &[("SKU-1", 1)]);
    let producer = producer();
    for (key, payload, odd) in [
        ("ORD-ODD-KEY", valid.to_json(), true),
        ("KEY-BAD", b"not json".to_vec(), true),
        ("ORD-AFTER", after.to_json(), false),
    ] {
        let mut headers = OwnedHeaders::new();
        if odd {
            headers = with_raw_key(headers, b"\xff\xfe-key", b"v1");
        }
        producer
            .send(
                FutureRecord::<str, [u8]>::to(&topic)
                    .key(key)
                    .partition(0)
                    .payload(&payload)
                    .headers(headers),
                Duration::from_secs(30),
            )
            .await
            .expect("record acknowledged");
    }

    let spec = ConsumerSpec::new(&db, &topic);
    let mut consumer = spec.start();
    wait_committed(&spec, 3).await;
    assert_eq!(db.ledger_rows().await, 2);
    assert_eq!(db.reserved("SKU-1").await, 3);
    assert_eq!(db.parked().await, [("malformed_json".into(), 1)]);
    let kept: Option<String> =
        sqlx::query_scalar("SELECT headers->>'hex:fffe2d6b6579' FROM inbox_parked")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(kept.as_deref(), Some("v1"), "the odd key kept in hex");
    assert!(
        consumer.child.try_wait().unwrap().is_none(),
        "the consumer still runs:\n{}",
        consumer.log_text()
    );
    consumer.stop().await;
}

#[tokio::test]
async fn records_in_every_codec_kafka_has_are_applied() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1000)]).await;
    let codecs = ["zstd", "gzip", "snappy", "lz4", "none"];
    for codec in codecs {
        let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", kafka())
            .set("compression.type", codec)
            .set("linger.ms", "50")
            .create()
            .expect("producer");
        let events: Vec<Outgoing> = (0..3)
            .map(|i| Outgoing::event(&order(&format!("ORD-{codec}-{i}"), &[("SKU-1", 1)])))
            .collect();
        produce(&producer, &topic, &events).await;
    }
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 3 * codecs.len() as i64).await;
    assert_eq!(db.ledger_rows().await, 15);
    assert_eq!(db.reserved("SKU-1").await, 15);
    assert!(db.parked().await.is_empty());
    assert!(
        !consumer.log_text().contains("poll error"),
        "{}",
        consumer.log_text()
    );
    consumer.stop().await;
}
