//! `inventory-inbox inspect`: one event, order or record looked up in the
//! database, with the verdict in one line, for the person on call
//! (docs/runbook.md).

mod common;

use common::*;
use uuid::Uuid;

fn inspected(spec: &ConsumerSpec, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (ok, out, err) = spec.cli("inspect", &all);
    assert!(ok, "inspect {args:?} failed: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("inspect {args:?}: {e}: {out}"))
}

fn verdict(found: &serde_json::Value) -> &str {
    found["verdict"].as_str().expect("a verdict")
}

#[tokio::test]
async fn an_event_an_order_and_a_record_are_answered_from_the_database() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100), ("SKU-2", 1)]).await;
    let first = order("ORD-INSPECT-1", &[("SKU-1", 2), ("SKU-2", 5)]);
    // Another event of the same order: a business duplicate.
    let again = order("ORD-INSPECT-1", &[("SKU-1", 2)]);
    let records = [
        Outgoing::event(&first),
        Outgoing::event(&first),
        Outgoing::event(&again),
        Outgoing::raw("X", b"junk"),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;
    consumer.stop().await;

    let event = first.message_id.to_string();
    let found = inspected(&spec, &["--event", &event]);
    assert!(
        verdict(&found).contains("applied once") && verdict(&found).contains("from 0:0"),
        "{found}"
    );
    assert!(
        verdict(&found).contains("1 line(s) reserved, 1 rejected"),
        "{found}"
    );
    assert_eq!(found["ledger"].as_array().unwrap().len(), 1);
    assert_eq!(found["lines"].as_array().unwrap().len(), 2);

    let found = inspected(&spec, &["--event", &again.message_id.to_string()]);
    assert!(verdict(&found).contains("business duplicate"), "{found}");

    let found = inspected(&spec, &["--order", "ORD-INSPECT-1"]);
    assert!(
        verdict(&found).contains("each line once") && verdict(&found).contains(&event),
        "{found}"
    );
    // Every event of the order, the business duplicate that wrote no line
    // among them. One statement wrote both rows, in message id order: the
    // ledger lists them as written, so they are compared as a set.
    let statuses: std::collections::BTreeSet<(String, String)> = found["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["message_id"].as_str().unwrap().to_owned(),
                row["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (event.clone(), "processed".to_owned()),
            (
                again.message_id.to_string(),
                "business_duplicate".to_owned()
            )
        ]
        .into(),
        "{found}"
    );

    let found = inspected(&spec, &["--offset", "0:1"]);
    assert!(
        verdict(&found).contains(&format!("a redelivery of event {event}")),
        "{found}"
    );
    assert_eq!(found["position"], 4);

    let found = inspected(&spec, &["--offset", "0:3"]);
    assert!(
        verdict(&found).contains("parked as malformed_json"),
        "{found}"
    );

    let found = inspected(&spec, &["--event", &Uuid::new_v4().to_string()]);
    assert!(verdict(&found).contains("not in the ledger"), "{found}");

    // The human form leads with the same verdict.
    let (ok, out, _) = spec.cli("inspect", &["--event", &event]);
    assert!(
        ok && out.starts_with(&format!("event {event}: applied once")),
        "{out}"
    );

    // A malformed position is a one-line error naming the flag.
    let (ok, _, err) = spec.cli("inspect", &["--offset", "four"]);
    assert!(!ok && err.contains("--offset"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Runs `inventory-inbox maintain` as the owner after setting the
/// database's ledger retention to `retention_days` (as `migrate` writes it).
async fn maintain(db: &TestDb, retention_days: i32) -> String {
    db.set_retention_days(retention_days).await;
    let output = std::process::Command::new(binary())
        .arg("maintain")
        .env("DATABASE_URL", &db.url)
        .env("INBOX_RETENTION_DAYS", retention_days.to_string())
        .output()
        .expect("run maintain");
    assert!(output.status.success(), "maintain failed: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn an_event_applied_before_its_day_left_the_window_is_said_applied() {
    use chrono::{NaiveDate, TimeZone, Utc};
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let today: NaiveDate = sqlx::query_scalar("SELECT current_date")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let oldest = today - chrono::Days::new(14);
    let event = order_at(
        "ORD-WINDOW",
        &[("SKU-1", 5)],
        Utc.from_utc_datetime(&oldest.and_hms_opt(12, 0, 0).unwrap()),
    );
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    // Its day leaves the window; the redelivery is parked, not applied.
    let out = maintain(&db, 13).await;
    assert!(out.contains("dropped: 1"), "{out}");
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 2).await;
    consumer.stop().await;
    assert_eq!(db.parked().await, [("outside_dedup_window".into(), 1)]);
    assert_eq!(
        db.ledger_rows().await,
        0,
        "its ledger row left with its day"
    );
    let id = event.message_id.to_string();
    let by_it = db
        .count(&format!(
            "SELECT count(*) FROM order_reservation WHERE message_id = '{id}' AND status = 'reserved'"
        ))
        .await;
    assert_eq!(by_it, 1, "its line is reserved");

    let found = inspected(&spec, &["--event", &id]);
    let said = verdict(&found);
    assert!(!said.contains("not applied"), "{said}");
    assert!(
        said.contains("applied before its day left the dedup window")
            && said.contains("1 line(s) reserved")
            && said.contains("0:1")
            && said.contains("outside_dedup_window"),
        "{said}"
    );
    assert_eq!(found["lines"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["lines"][0]["message_id"], id.as_str());

    // The same from either record of it.
    let found = inspected(&spec, &["--offset", "0:0"]);
    assert!(
        verdict(&found).contains("applied before its day left the dedup window"),
        "{found}"
    );
    let found = inspected(&spec, &["--offset", "0:1"]);
    assert!(
        verdict(&found).contains("parked as outside_dedup_window")
            && verdict(&found).contains("applied before its day left the dedup window"),
        "{found}"
    );
}

#[tokio::test]
async fn a_record_retention_deleted_is_found_by_its_position_in_the_ledger() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let first = order("ORD-GONE-1", &[("SKU-1", 1)]);
    let second = order("ORD-GONE-2", &[("SKU-1", 1)]);
    let records = [
        Outgoing::event(&first),
        Outgoing::event(&first),
        Outgoing::event(&second),
        Outgoing::event(&second),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;
    consumer.stop().await;
    delete_records_before(&topic, &[(0, 3)]);
    let at_zero: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT message_id FROM processed_inbox WHERE kafka_offset = 0")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(at_zero, [first.message_id], "the ledger row of 0:0");
    let at_one = db
        .count("SELECT count(*) FROM processed_inbox WHERE kafka_offset = 1")
        .await;
    assert_eq!(at_one, 0, "0:1 was a redelivery: no row of its own");

    let found = inspected(&spec, &["--offset", "0:0"]);
    let said = verdict(&found);
    assert!(
        said.contains(&format!("event {}", first.message_id))
            && said.contains("applied once")
            && said.contains("deleted from the topic"),
        "{said}"
    );
    assert_eq!(found["record"]["state"], "deleted", "{found}");
    assert_eq!(found["record"]["log_start"], 3, "{found}");
    assert_eq!(found["ledger"][0]["kafka_offset"], 0, "{found}");

    let found = inspected(&spec, &["--offset", "0:1"]);
    let said = verdict(&found);
    assert!(!said.contains("no row of it found"), "{said}");
    assert!(
        said.contains("deleted from the topic") && said.contains("no ledger row"),
        "{said}"
    );
    assert_eq!(found["record"]["state"], "deleted", "{found}");
}

#[tokio::test]
async fn an_offset_past_the_end_is_said_not_in_the_topic() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let records = [
        Outgoing::event(&order("ORD-END-1", &[("SKU-1", 1)])),
        Outgoing::event(&order("ORD-END-2", &[("SKU-1", 1)])),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 2).await;
    consumer.stop().await;

    let found = inspected(&spec, &["--offset", "0:7"]);
    let said = verdict(&found);
    assert!(!said.contains("not read yet"), "{said}");
    assert!(said.contains("not in the topic"), "{said}");
    assert_eq!(found["record"]["state"], "past_end", "{found}");
    assert_eq!(found["record"]["log_end"], 2, "{found}");

    let found = inspected(&spec, &["--offset", "0:1"]);
    assert_eq!(found["record"]["state"], "held", "{found}");
}

#[tokio::test]
async fn an_order_whose_only_event_is_parked_shows_the_parked_record() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let event = order("ORD-PARKED", &[("SKU-404", 1)]);
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 1).await;
    consumer.stop().await;
    assert_eq!(db.parked().await, [("unknown_sku".into(), 0)]);

    let found = inspected(&spec, &["--order", "ORD-PARKED"]);
    let said = verdict(&found);
    assert!(
        said.contains("parked as unknown_sku") && said.contains(&event.message_id.to_string()),
        "{said}"
    );
    let parked = found["parked"].as_array().unwrap();
    assert_eq!(parked.len(), 1, "{found}");
    assert_eq!(parked[0]["message_id"], event.message_id.to_string());
    assert_eq!(parked[0]["kafka_offset"], 0);
}

#[tokio::test]
async fn a_business_duplicate_of_a_rejected_line_says_rejected_before() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-2", 1)]).await;
    let first = order("ORD-REJECTED", &[("SKU-2", 5)]);
    let again = order("ORD-REJECTED", &[("SKU-2", 5)]);
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&first), Outgoing::event(&again)],
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 2).await;
    consumer.stop().await;
    assert_eq!(
        db.reservations().await[&("ORD-REJECTED".into(), "SKU-2".into())],
        (5, "rejected".into())
    );
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status::text FROM processed_inbox ORDER BY kafka_offset")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(statuses, ["p", "d"]);

    let found = inspected(&spec, &["--event", &again.message_id.to_string()]);
    let said = verdict(&found);
    assert!(!said.contains("reserved before"), "{said}");
    assert!(
        said.contains("business duplicate")
            && said.contains(&format!(
                "SKU-2 ignored: rejected before (not enough stock) by event {}",
                first.message_id
            ))
            && said.contains("reserved nothing"),
        "{said}"
    );
    assert_eq!(found["ignored"][0]["status"], "rejected", "{found}");
}

#[tokio::test]
async fn a_partial_business_duplicate_names_the_line_it_ignored() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100), ("SKU-3", 100)]).await;
    let first = order("ORD-PARTIAL", &[("SKU-1", 2)]);
    let second = order("ORD-PARTIAL", &[("SKU-1", 2), ("SKU-3", 1)]);
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&first), Outgoing::event(&second)],
    )
    .await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 2).await;
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 2, "SKU-1 reserved once");
    assert_eq!(db.reserved("SKU-3").await, 1);
    let by_second = db
        .count(&format!(
            "SELECT count(*) FROM order_reservation WHERE message_id = '{}'",
            second.message_id
        ))
        .await;
    assert_eq!(by_second, 1, "the second event wrote SKU-3 only");

    let found = inspected(&spec, &["--event", &second.message_id.to_string()]);
    let said = verdict(&found);
    assert!(
        said.contains("1 line(s) reserved, 0 rejected")
            && said.contains(&format!(
                "SKU-1 ignored: reserved before by event {}",
                first.message_id
            )),
        "{said}"
    );
    let ignored = found["ignored"].as_array().expect("ignored lines");
    assert_eq!(ignored.len(), 1, "{found}");
    assert_eq!(ignored[0]["sku"], "SKU-1");
    assert_eq!(ignored[0]["by"], first.message_id.to_string());
    assert_eq!(ignored[0]["status"], "reserved");
}

#[tokio::test]
async fn inspect_stops_quietly_when_its_output_is_closed() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let spec = ConsumerSpec::new(&db, &topic);
    let mut child = std::process::Command::new(binary())
        .args(["inspect", "--event", &Uuid::new_v4().to_string()])
        .env("DATABASE_URL", &spec.database_url)
        .env("KAFKA_BOOTSTRAP_SERVERS", &spec.bootstrap)
        .env("KAFKA_TOPIC", &spec.topic)
        .env("KAFKA_GROUP_ID", &spec.group)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run inspect");
    // The reader goes away before inspect writes (as `| head -1` does
    // after its line).
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("inspect ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("panicked"),
        "{:?}: {stderr}",
        output.status
    );
}
