//! A parked record's copy on the DLQ topic follows from its row in the
//! database, not from one batch's answer: a member killed between the
//! database commit and the copies leaves rows that owe them, and the
//! partition's next owner sends them, once.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

/// Records on the topic's partition 0 (its high watermark).
fn records_on(topic: &str) -> i64 {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .create()
        .expect("client");
    client
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

#[tokio::test]
async fn copies_a_crash_kept_from_the_dlq_are_sent_by_the_next_owner() {
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let mut records: Vec<Outgoing> = (0..3)
        .map(|i| Outgoing::raw(&format!("BAD-{i}"), b"not json"))
        .collect();
    records.push(Outgoing::event(&order("ORD-1", &[("SKU-1", 1)])));
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.dlq_topic = dlq.clone();
    let mut crashing = spec
        .clone()
        .env("INBOX_FAILPOINT", "after_db_commit")
        .start();
    let status = crashing.wait(Duration::from_secs(60)).await;
    assert!(!status.success(), "the fail point aborts the process");
    let owed = "SELECT count(*) FROM inbox_parked WHERE dlq_sent_at IS NULL";
    assert_eq!(db.count(owed).await, 3, "parked, copies owed");
    assert_eq!(records_on(&dlq), 0, "no copy went out");

    let consumer = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the owed copies sent and marked",
        || async { db.count(owed).await == 0 },
    )
    .await;
    assert_eq!(records_on(&dlq), 3, "each copy once");
    consumer.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM inbox_parked").await, 3);
    assert_eq!(db.ledger_rows().await, 1);
}

/// PostgreSQL committed a batch, and its answer was lost on the way: the
/// retry finds everything there. What that batch did is still counted and
/// copied, from what the database holds: the parked rows' copies go out,
/// `inbox_parked_total` counts them and the fresh events count as
/// processed, not as duplicates.
#[tokio::test]
async fn a_committed_batch_whose_answer_was_lost_is_counted_and_copied() {
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;
    let proxy =
        common::proxy::CountingProxy::start("127.0.0.1:5432".parse().expect("address")).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.dlq_topic = dlq.clone();
    spec.database_url = db.app_url_via(proxy.port);
    let spec = spec.env("DB_STATEMENT_TIMEOUT_MS", "1000");
    let consumer = spec.start();
    // A first batch: its connection has the batch statement prepared, so
    // the next one is sent whole, without waiting for a prepare's answer.
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&order("FIRST", &[("SKU-1", 1)]))],
    )
    .await;
    wait_for_ledger(&db, 1, Duration::from_secs(30)).await;

    proxy.lose_answers(true);
    let mut records: Vec<Outgoing> = (0..5)
        .map(|i| Outgoing::raw(&format!("BAD-{i}"), b"not json"))
        .collect();
    records.extend((0..45).map(|i| Outgoing::event(&order(&format!("ORD-{i}"), &[("SKU-1", 1)]))));
    produce(&producer(), &topic, &records).await;
    wait_for_ledger(&db, 46, Duration::from_secs(30)).await;
    proxy.lose_answers(false);

    wait_committed(&spec, 51).await;
    wait_until(
        Duration::from_secs(60),
        "the copies sent and marked",
        || async {
            db.count("SELECT count(*) FROM inbox_parked WHERE dlq_sent_at IS NULL")
                .await
                == 0
        },
    )
    .await;
    assert_eq!(records_on(&dlq), 5, "each copy once");
    assert_eq!(consumer.metric_sum("inbox_parked_total").await, 5.0);
    assert_eq!(consumer.metric("inbox_processed_total").await, 46.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 0.0);
    assert!(
        consumer
            .metric(r#"inbox_db_retries_total{reason="database_timeout"}"#)
            .await
            >= 1.0,
        "the lost answer was waited for"
    );
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 46);
}

/// With `DLQ_PAYLOAD=omit` a copy says where the record was and why it was
/// parked, but carries no order data; the parked row keeps the payload.
#[tokio::test]
async fn a_copy_without_the_payload_when_told_to_omit_it() {
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    produce(
        &producer(),
        &topic,
        &[Outgoing::raw("BAD-1", b"{\"customer\": \"Ada\", not json")],
    )
    .await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.dlq_topic = dlq.clone();
    let consumer = spec.env("DLQ_PAYLOAD", "omit").start();
    let owed = "SELECT count(*) FROM inbox_parked WHERE dlq_sent_at IS NULL";
    wait_until(Duration::from_secs(60), "the copy sent", || async {
        db.count("SELECT count(*) FROM inbox_parked").await == 1 && db.count(owed).await == 0
    })
    .await;
    consumer.stop().await;

    use rdkafka::message::Message;
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .set("group.id", unique("dlq-reader"))
        .create()
        .expect("client");
    let mut partition = rdkafka::TopicPartitionList::new();
    partition
        .add_partition_offset(&dlq, 0, rdkafka::Offset::Beginning)
        .expect("partition");
    reader.assign(&partition).expect("assign");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let copy = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no copy on the DLQ topic"
        );
        match reader.poll(Duration::from_secs(1)) {
            Some(Ok(message)) => break message.detach(),
            Some(Err(error)) => panic!("reading the DLQ: {error}"),
            None => {}
        }
    };
    assert_eq!(copy.payload(), None, "no order data in the copy");
    let header = |name: &str| header_text(&copy, name);
    assert_eq!(header("inbox.payload").as_deref(), Some("omitted"));
    assert_eq!(header("inbox.reason").as_deref(), Some("malformed_json"));
    assert_eq!(header("inbox.source.offset").as_deref(), Some("0"));
    assert_eq!(
        db.count("SELECT count(*) FROM inbox_parked WHERE payload IS NOT NULL")
            .await,
        1,
        "the database keeps it"
    );
}
