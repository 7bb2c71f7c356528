//! Every outcome of docs/design.md#outcomes with the exact stock, reservations, ledger rows
//! and parked rows it must leave, through the real broker and database.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::Message;
use sqlx::Row;

#[tokio::test]
async fn every_outcome_leaves_exactly_its_effect() {
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 10), ("SKU-B", 5), ("SKU-C", 1)])
        .await;

    let processed = order("ORD-1", &[("SKU-A", 3), ("SKU-B", 2)]);
    let business_duplicate = order("ORD-1", &[("SKU-A", 1)]);
    let rejected_line = order("ORD-2", &[("SKU-C", 2)]);
    let takes_the_rest = order("ORD-3", &[("SKU-A", 7), ("SKU-C", 1)]);
    let unknown = order("ORD-4", &[("SKU-Z", 1)]);
    let partly_unknown = order("ORD-5", &[("SKU-A", 1), ("SKU-Z", 1)]);
    let too_old = order_at(
        "ORD-6",
        &[("SKU-A", 1)],
        Utc::now() - chrono::Duration::days(30),
    );
    let future = order_at(
        "ORD-7",
        &[("SKU-A", 1)],
        Utc::now() + chrono::Duration::days(5),
    );

    let valid = String::from_utf8(order("ORD-X", &[("SKU-A", 1)]).to_json()).unwrap();
    let edit = |from: &str, to: &str| valid.replace(from, to).into_bytes();
    let event_id = serde_json::from_str::<serde_json::Value>(&valid).unwrap()["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut too_large = b"{\"pad\":\"".to_vec();
    too_large.extend(std::iter::repeat_n(b'x', 70 * 1024));
    too_large.extend(b"\"}");

    let records = vec![
        Outgoing::event(&processed),
        Outgoing::event(&processed),
        Outgoing::event(&business_duplicate),
        Outgoing::event(&rejected_line),
        Outgoing::event(&takes_the_rest),
        Outgoing::event(&unknown),
        Outgoing::event(&partly_unknown),
        Outgoing::raw("P", b"{\"event_id\": nope").header("Authorization", "Bearer hunter2"),
        Outgoing::raw("P", &edit(&format!("\"event_id\":\"{event_id}\","), "")),
        Outgoing::raw("P", &edit(&event_id, "not-a-uuid")),
        Outgoing::raw("P", valid.as_bytes())
            .header("ce_id", "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11"),
        Outgoing::raw("P", &edit("\"occurred_at\"", "\"occurred\"")),
        Outgoing::raw("P", &edit("OrderPlaced", "OrderShipped")),
        Outgoing::raw("P", &edit("\"schema_version\":1", "\"schema_version\":2")),
        Outgoing::raw("P", &edit("ORD-X", "ORD X")),
        Outgoing::raw("P", &too_large),
        Outgoing::event(&too_old),
        Outgoing::event(&future),
    ];
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.dlq_topic = dlq.clone();
    let consumer = spec.start();
    wait_committed(&spec, records.len() as i64).await;

    let stock = db.stock().await;
    assert_eq!(stock["SKU-A"], (10, 10), "3 for ORD-1 + 7 for ORD-3");
    assert_eq!(stock["SKU-B"], (5, 2));
    assert_eq!(
        stock["SKU-C"],
        (1, 1),
        "ORD-2's 2 rejected, ORD-3's 1 reserved"
    );

    let reservations = db.reservations().await;
    let expected: BTreeMap<(String, String), (i32, String)> = [
        (("ORD-1", "SKU-A"), (3, "reserved")),
        (("ORD-1", "SKU-B"), (2, "reserved")),
        (("ORD-2", "SKU-C"), (2, "rejected")),
        (("ORD-3", "SKU-A"), (7, "reserved")),
        (("ORD-3", "SKU-C"), (1, "reserved")),
    ]
    .into_iter()
    .map(|((o, s), (q, st))| ((o.to_owned(), s.to_owned()), (q, st.to_owned())))
    .collect();
    assert_eq!(reservations, expected);

    let ledger: Vec<(String, String)> =
        sqlx::query("SELECT aggregate_id, status FROM inbox_ledger ORDER BY kafka_offset")
            .fetch_all(&db.pool)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.get("aggregate_id"), r.get("status")))
            .collect();
    assert_eq!(
        ledger,
        [
            ("ORD-1".into(), "processed".into()),
            ("ORD-1".into(), "business_duplicate".into()),
            ("ORD-2".into(), "processed".into()),
            ("ORD-3".into(), "processed".into()),
        ]
    );

    let parked: Vec<String> = db
        .parked()
        .await
        .into_iter()
        .map(|(reason, _)| reason)
        .collect();
    assert_eq!(
        parked,
        [
            "unknown_sku",
            "unknown_sku",
            "malformed_json",
            "missing_event_id",
            "invalid_event_id",
            "event_id_mismatch",
            "missing_event_time",
            "unsupported_event_type",
            "unsupported_schema_version",
            "invalid_field",
            "payload_too_large",
            "outside_dedup_window",
            "event_time_in_future",
        ]
    );
    let stored_payload: Vec<u8> =
        sqlx::query_scalar("SELECT payload FROM inbox_parked WHERE reason = 'malformed_json'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(stored_payload, b"{\"event_id\": nope");

    assert_eq!(consumer.metric("inbox_processed_total").await, 4.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 1.0);
    assert_eq!(consumer.metric("inbox_business_duplicate_total").await, 1.0);
    assert_eq!(
        consumer
            .metric("inbox_parked_total{reason=\"unknown_sku\"}")
            .await,
        2.0
    );
    assert_eq!(
        consumer
            .metric("inventory_reservation_lines_total{status=\"rejected\"}")
            .await,
        1.0
    );

    // Each parked record was copied to the DLQ with its reason and position.
    let dlq_consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .set("group.id", unique("dlq_reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    dlq_consumer.subscribe(&[&dlq]).unwrap();
    let mut dlq_reasons = Vec::new();
    let mut secrets_copied = 0;
    while dlq_reasons.len() < parked.len() {
        let message = tokio::time::timeout(Duration::from_secs(30), dlq_consumer.recv())
            .await
            .expect("DLQ copies within 30 s")
            .unwrap();
        assert!(message.headers().is_some(), "DLQ headers");
        let header = |name: &str| header_text(&message, name);
        assert_eq!(
            header("inbox.source.topic").as_deref(),
            Some(topic.as_str())
        );
        assert!(header("inbox.source.offset").is_some());
        if let Some(secret) = header("Authorization") {
            assert_eq!(
                secret, "[redacted]",
                "secrets are redacted in the DLQ copy too"
            );
            secrets_copied += 1;
        }
        dlq_reasons.push(header("inbox.reason").expect("reason header"));
    }
    assert_eq!(dlq_reasons, parked);
    assert_eq!(
        secrets_copied, 1,
        "the malformed record's header was copied"
    );
    let stored: String = sqlx::query_scalar(
        "SELECT headers->>'Authorization' FROM inbox_parked WHERE reason = 'malformed_json'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(stored, "[redacted]");

    consumer.stop().await;
}

#[tokio::test]
async fn a_reused_id_with_another_payload_is_parked_as_a_conflict() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 100)]).await;
    let original = order("ORD-C1", &[("SKU-A", 1)]);
    let mut reused = order("ORD-C2", &[("SKU-A", 50)]);
    reused.message_id = original.message_id;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();

    // In one batch: the original, the same id with another payload, and an
    // exact redelivery.
    produce(
        &producer(),
        &topic,
        &[
            Outgoing::event(&original),
            Outgoing::event(&reused),
            Outgoing::event(&original),
        ],
    )
    .await;
    wait_committed(&spec, 3).await;
    // In a later batch: checked against the ledger's stored fingerprint.
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&reused), Outgoing::event(&original)],
    )
    .await;
    wait_committed(&spec, 5).await;

    assert_eq!(db.reserved("SKU-A").await, 1, "only the original applied");
    assert_eq!(db.ledger_rows().await, 1);
    assert_eq!(
        db.parked().await,
        [
            ("event_id_conflict".into(), 1),
            ("event_id_conflict".into(), 3)
        ]
    );
    assert_eq!(consumer.metric("inbox_id_conflict_total").await, 2.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 2.0);
    consumer.stop().await;
}

#[tokio::test]
async fn a_record_the_database_refuses_is_isolated_and_the_rest_applied() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 100)]).await;
    // A rule the service does not know about: the database refuses this
    // order (SQLSTATE 23514, not transient) at the reservation insert.
    sqlx::query(
        "ALTER TABLE order_reservation ADD CONSTRAINT no_blocked CHECK (order_id <> 'ORD-BLOCKED')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let events: Vec<_> = (0..9)
        .map(|i| {
            let id = if i == 4 {
                "ORD-BLOCKED".to_owned()
            } else {
                format!("ORD-{i}")
            };
            order(&id, &[("SKU-A", 1)])
        })
        .collect();
    produce(
        &producer(),
        &topic,
        &events.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 9).await;
    assert_eq!(db.reserved("SKU-A").await, 8);
    assert_eq!(db.ledger_rows().await, 8);
    assert_eq!(db.parked().await, [("db_rejected".into(), 4)]);
    let error: String = sqlx::query_scalar("SELECT error FROM inbox_parked")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(
        error.contains("23514") && error.contains("no_blocked"),
        "{error}"
    );
    consumer.stop().await;
}

/// A batch split around a refused record whose later part then fails
/// for a transient reason: the retry finds the earlier parts committed,
/// and counts them as applied now, not as duplicates (read from the code:
/// `inbox_processed_total` undercounted by the earlier parts).
#[tokio::test]
async fn a_split_batch_retried_after_a_part_committed_counts_each_event_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 100)]).await;
    // The database refuses ORD-BLOCKED for good, and ORD-FLAKY's line
    // once, as a serialization failure (40001, transient).
    sqlx::raw_sql(
        "ALTER TABLE order_reservation ADD CONSTRAINT no_blocked CHECK (order_id <> 'ORD-BLOCKED');
         CREATE SEQUENCE flaky_tries;
         CREATE FUNCTION flaky_once() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
         BEGIN
             IF NEW.order_id = 'ORD-FLAKY' AND nextval('flaky_tries') = 1 THEN
                 RAISE EXCEPTION 'flaky' USING ERRCODE = '40001';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER flaky_once BEFORE INSERT ON order_reservation
             FOR EACH ROW EXECUTE FUNCTION flaky_once();",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let events: Vec<_> = (0..8)
        .map(|i| {
            let id = match i {
                3 => "ORD-BLOCKED".to_owned(),
                6 => "ORD-FLAKY".to_owned(),
                _ => format!("ORD-{i}"),
            };
            order(&id, &[("SKU-A", 1)])
        })
        .collect();
    produce(
        &producer(),
        &topic,
        &events.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 8).await;
    assert_eq!(db.ledger_rows().await, 7);
    assert_eq!(db.parked().await, [("db_rejected".into(), 3)]);
    assert_eq!(
        consumer
            .metric(r#"inbox_db_retries_total{reason="serialization_failure"}"#)
            .await,
        1.0,
        "the later part failed once"
    );
    assert_eq!(consumer.metric("inbox_processed_total").await, 7.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 0.0);
    assert_eq!(
        consumer
            .metric(r#"inbox_parked_total{reason="db_rejected"}"#)
            .await,
        1.0
    );
    consumer.stop().await;
}

#[tokio::test]
async fn a_reused_id_is_parked_as_a_conflict_also_in_a_split_batch() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 1_000)]).await;
    sqlx::query(
        "ALTER TABLE order_reservation ADD CONSTRAINT no_blocked CHECK (order_id <> 'ORD-BLOCKED')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let original = order("ORD-ID", &[("SKU-A", 1)]);
    let mut reused = order("ORD-ID", &[("SKU-A", 7)]);
    reused.message_id = original.message_id;
    // One batch: 20 orders, the original, the record the database refuses,
    // the id reused with another quantity, 20 more. Split to isolate the
    // refused record, the reused id ends up in a part of its own, after the
    // part that applied the original.
    let mut records: Vec<Outgoing> = (0..20)
        .map(|i| Outgoing::event(&order(&format!("ORD-{i}"), &[("SKU-A", 1)])))
        .collect();
    records.push(Outgoing::event(&original));
    records.push(Outgoing::event(&order("ORD-BLOCKED", &[("SKU-A", 1)])));
    records.push(Outgoing::event(&reused));
    records.extend((20..40).map(|i| Outgoing::event(&order(&format!("ORD-{i}"), &[("SKU-A", 1)]))));
    produce(&producer(), &topic, &records).await;

    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, records.len() as i64).await;
    assert_eq!(
        consumer.metric("inbox_batch_size_count").await,
        1.0,
        "one batch"
    );
    assert_eq!(
        db.parked().await,
        [("db_rejected".into(), 21), ("event_id_conflict".into(), 22)]
    );
    assert_eq!(db.ledger_rows().await, 41);
    assert_eq!(
        db.reserved("SKU-A").await,
        41,
        "the original's 1, never the 7"
    );
    assert_eq!(consumer.metric("inbox_id_conflict_total").await, 1.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 0.0);
    consumer.stop().await;
}

#[tokio::test]
async fn a_database_error_that_is_not_the_records_fault_stalls_instead_of_parking() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 100)]).await;
    // The application role loses a privilege: every batch would fail alike.
    sqlx::query("REVOKE UPDATE ON inventory_stock FROM inventory_app")
        .execute(&db.pool)
        .await
        .unwrap();
    let events: Vec<_> = (0..5)
        .map(|i| order(&format!("ORD-{i}"), &[("SKU-A", 1)]))
        .collect();
    produce(
        &producer(),
        &topic,
        &events.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_until(
        Duration::from_secs(60),
        "retries of the failing batch",
        || async {
            consumer
                .metric("inbox_db_retries_total{reason=\"database_error\"}")
                .await
                >= 2.0
        },
    )
    .await;
    assert!(db.parked().await.is_empty(), "no record blamed");
    assert_eq!(db.ledger_rows().await, 0);
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        -1001,
        "nothing committed"
    );

    sqlx::query("GRANT UPDATE ON inventory_stock TO inventory_app")
        .execute(&db.pool)
        .await
        .unwrap();
    wait_committed(&spec, 5).await;
    assert_eq!(db.reserved("SKU-A").await, 5);
    assert!(db.parked().await.is_empty());
    consumer.stop().await;
}

/// The decision log: with `inventory_inbox::decision=debug`, one line per
/// record saying what its batch decided, with its event id, order,
/// position, the consumer's name, the event's type and schema version, and
/// a parked record's reason; at the default level, none.
#[tokio::test]
async fn each_records_decision_is_logged_only_when_asked() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 100)]).await;
    let first = order("ORD-D1", &[("SKU-A", 1)]);
    let again = order("ORD-D1", &[("SKU-A", 1)]);
    let mut reused = order("ORD-D2", &[("SKU-A", 5)]);
    reused.message_id = first.message_id;
    let records = [
        Outgoing::event(&first),
        Outgoing::event(&first),
        Outgoing::event(&again),
        Outgoing::raw("ORD-D3", b"junk"),
        Outgoing::event(&reused),
    ];
    produce(&producer(), &topic, &records).await;
    let spec =
        ConsumerSpec::new(&db, &topic).env("RUST_LOG", "info,inventory_inbox::decision=debug");
    let consumer = spec.start();
    wait_committed(&spec, 5).await;
    let path = consumer.log.clone();
    consumer.stop().await;
    let log = std::fs::read_to_string(path).expect("the consumer's log");
    let decided: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("record decided"))
        .collect();
    let expected = [
        ("processed", first.message_id.to_string(), "ORD-D1", ""),
        ("duplicate", first.message_id.to_string(), "ORD-D1", ""),
        (
            "business_duplicate",
            again.message_id.to_string(),
            "ORD-D1",
            "",
        ),
        ("parked", String::new(), "ORD-D3", "malformed_json"),
        (
            "id_conflict",
            first.message_id.to_string(),
            "ORD-D2",
            "event_id_conflict",
        ),
    ];
    assert_eq!(decided.len(), expected.len(), "one line a record:\n{log}");
    for (offset, (line, (outcome, id, order_id, error_class))) in
        decided.iter().zip(expected).enumerate()
    {
        for field in [
            format!("outcome=\"{outcome}\""),
            format!("message_id=\"{id}\""),
            format!("order_id=\"{order_id}\""),
            format!("offset={offset} "),
            "consumer=\"inventory-allocation-service\"".to_owned(),
            "event_type=\"OrderPlaced\"".to_owned(),
            "schema_version=1".to_owned(),
            format!("error_class=\"{error_class}\""),
        ] {
            assert!(line.contains(&field), "{field} in {line}");
        }
        assert!(!line.contains("junk"), "no payload: {line}");
    }

    // At the default level: no decision line, the parked record's own line
    // still there.
    let topic = fresh_topic(1).await;
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic).env("RUST_LOG", "info");
    let consumer = spec.start();
    wait_committed(&spec, 5).await;
    let path = consumer.log.clone();
    consumer.stop().await;
    let log = std::fs::read_to_string(path).expect("the consumer's log");
    assert!(!log.contains("record decided"), "{log}");
    assert!(log.contains("record parked"), "{log}");
}

/// The console's chart counts what the database holds: once a member has
/// stopped (its last flush), the events of each outcome in the ring of
/// outcomes per minute are the ledger's rows of that status, the parked
/// rows, and the records that left none (duplicates).
#[tokio::test]
async fn the_outcomes_per_minute_add_up_to_the_database() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-A", 1000)]).await;
    let mut records = Vec::new();
    for i in 0..40 {
        let event = order(&format!("ORD-{i}"), &[("SKU-A", 1)]);
        records.push(Outgoing::event(&event));
        if i % 4 == 0 {
            records.push(Outgoing::event(&event));
        }
    }
    for i in 0..5 {
        records.push(Outgoing::event(&order(
            &format!("ORD-{i}"),
            &[("SKU-A", 1)],
        )));
    }
    for _ in 0..3 {
        records.push(Outgoing::raw("P", b"{nope"));
    }
    records.push(Outgoing::event(&order("ORD-Z", &[("SKU-Z", 1)])));
    produce(&producer(), &topic, &records).await;

    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, records.len() as i64).await;
    consumer.stop().await;

    let ring = |outcome: &str| {
        format!(
            "SELECT coalesce(sum(events), 0)::bigint FROM inbox_outcome_minute \
             WHERE outcome = '{outcome}'"
        )
    };
    let ledger =
        |status: &str| format!("SELECT count(*) FROM processed_inbox WHERE status = '{status}'");
    let processed = db.count(&ledger("p")).await;
    let business_duplicates = db.count(&ledger("d")).await;
    let parked = db.count("SELECT count(*) FROM inbox_parked").await;
    assert_eq!((processed, business_duplicates, parked), (40, 5, 4));
    assert_eq!(db.count(&ring("processed")).await, processed);
    assert_eq!(
        db.count(&ring("business_duplicate")).await,
        business_duplicates
    );
    assert_eq!(db.count(&ring("parked")).await, parked);
    let duplicates = records.len() as i64 - processed - business_duplicates - parked;
    assert_eq!(db.count(&ring("duplicate")).await, duplicates);
    // One row per minute and outcome, in the minute's slot of the ring.
    let misplaced = db
        .count(
            "SELECT count(*) FROM inbox_outcome_minute \
             WHERE slot <> (floor(extract(epoch FROM minute) / 60)::bigint % 120) \
                OR minute <> date_trunc('minute', minute)",
        )
        .await;
    assert_eq!(misplaced, 0);
}

/// The ring is written over in place: a minute adds up in its slot, the
/// minute two hours later takes the slot over, and a flush of a minute
/// older than the slot's is dropped. So the table holds at most 120 rows
/// per consumer and outcome, whatever the traffic.
#[tokio::test]
async fn the_ring_of_outcomes_keeps_two_hours_in_place() {
    let db = TestDb::new().await;
    let flush = |minute: &str, events: i64| {
        let pool = db.pool.clone();
        let minute = minute.to_owned();
        async move {
            sqlx::query(include_str!("../sql/outcomes_flush.sql"))
                .bind("ring")
                .bind(vec![minute.parse::<chrono::DateTime<Utc>>().unwrap()])
                .bind(vec!["processed"])
                .bind(vec![events])
                .execute(&pool)
                .await
                .unwrap();
        }
    };
    let slot = "SELECT events FROM inbox_outcome_minute WHERE consumer = 'ring'";
    flush("2026-12-07T10:00:00Z", 5).await;
    flush("2026-12-07T10:00:00Z", 2).await;
    assert_eq!(db.count(slot).await, 7, "the same minute adds up");
    flush("2026-12-07T12:00:00Z", 3).await;
    assert_eq!(
        db.count(slot).await,
        3,
        "two hours later: the slot taken over"
    );
    flush("2026-12-07T10:00:00Z", 100).await;
    assert_eq!(db.count(slot).await, 3, "an older minute is dropped");
    flush("2026-12-07T12:01:00Z", 1).await;
    assert_eq!(
        db.count("SELECT count(*) FROM inbox_outcome_minute WHERE consumer = 'ring'")
            .await,
        2
    );
}
