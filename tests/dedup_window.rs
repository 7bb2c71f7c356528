//! The dedup window (docs/design.md#the-dedup-window): the days with a ledger partition, around the
//! database's today; maintenance that creates and drops whole partitions
//! under an advisory lock; events at both edges; and a dropped day whose
//! duplicates are then parked, never applied.

mod common;

use std::process::Command;
use std::time::Duration;

use chrono::{NaiveDate, TimeZone, Utc};
use common::*;

async fn today(db: &TestDb) -> NaiveDate {
    sqlx::query_scalar("SELECT current_date")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

async fn window(db: &TestDb) -> Vec<NaiveDate> {
    sqlx::query_scalar("SELECT d FROM inbox_window_days() AS d ORDER BY d")
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

fn days(first: NaiveDate, last: NaiveDate) -> Vec<NaiveDate> {
    first.iter_days().take_while(|d| *d <= last).collect()
}

/// Runs `inventory-inbox maintain` after the owner set the database's
/// retention (what `migrate` writes) to `retention_days`.
async fn maintain(db: &TestDb, retention_days: i32) -> String {
    db.set_retention_days(retention_days).await;
    let output = Command::new(binary())
        .arg("maintain")
        .env("DATABASE_URL", &db.url)
        .env("INBOX_RETENTION_DAYS", retention_days.to_string())
        .output()
        .expect("run maintain");
    assert!(output.status.success(), "maintain failed: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn partitions_after_migrate_and_maintain_are_exactly_the_window() {
    let db = TestDb::new().await;
    let today = today(&db).await;
    let expected = days(today - chrono::Days::new(14), today + chrono::Days::new(2));
    assert_eq!(window(&db).await, expected, "after migrate");
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'processed_inbox'::regclass ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        names[0],
        format!("processed_inbox_p{}", expected[0].format("%Y%m%d"))
    );

    let out = maintain(&db, 14).await;
    assert!(out.contains("created: 0, dropped: 0"), "{out}");
    assert_eq!(window(&db).await, expected, "maintain is idempotent");

    let out = maintain(&db, 10).await;
    assert!(out.contains("dropped: 4"), "{out}");
    assert_eq!(
        window(&db).await,
        days(today - chrono::Days::new(10), today + chrono::Days::new(2))
    );
}

#[tokio::test]
async fn maintenance_runs_in_one_instance_at_a_time() {
    let db = TestDb::new().await;
    let today = today(&db).await;
    sqlx::query(&format!(
        "DROP TABLE processed_inbox_p{}",
        (today + chrono::Days::new(2)).format("%Y%m%d")
    ))
    .execute(&db.pool)
    .await
    .unwrap();

    // While another instance holds the lock, maintain does nothing.
    let mut holder = db.pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(hashtext('inventory-inbox:maintain'))")
        .execute(&mut *holder)
        .await
        .unwrap();
    let out = maintain(&db, 14).await;
    assert!(
        out.contains("another instance holds the maintenance lock"),
        "{out}"
    );
    assert_eq!(window(&db).await.len(), 16);
    sqlx::query("SELECT pg_advisory_unlock(hashtext('inventory-inbox:maintain'))")
        .execute(&mut *holder)
        .await
        .unwrap();
    drop(holder);

    // Two at once: both succeed, the partition is created once.
    let spawn = || {
        Command::new(binary())
            .arg("maintain")
            .env("DATABASE_URL", &db.url)
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    assert_eq!(
        window(&db).await,
        days(today - chrono::Days::new(14), today + chrono::Days::new(2))
    );
}

#[tokio::test]
async fn events_just_inside_the_window_apply_and_just_outside_are_parked() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let today = today(&db).await;
    let at = |day: NaiveDate, h: u32, m: u32, s: u32| {
        Utc.from_utc_datetime(&day.and_hms_opt(h, m, s).unwrap())
    };
    let oldest = today - chrono::Days::new(14);
    let newest = today + chrono::Days::new(2);
    let records = [
        order_at("ORD-OLDEST", &[("SKU-1", 1)], at(oldest, 0, 0, 0)),
        order_at(
            "ORD-TOO-OLD",
            &[("SKU-1", 1)],
            at(oldest - chrono::Days::new(1), 23, 59, 59),
        ),
        order_at("ORD-NEWEST", &[("SKU-1", 1)], at(newest, 23, 59, 59)),
        order_at(
            "ORD-TOO-NEW",
            &[("SKU-1", 1)],
            at(newest + chrono::Days::new(1), 0, 0, 0),
        ),
    ];
    produce(
        &producer(),
        &topic,
        &records.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;

    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;
    assert_eq!(db.reserved("SKU-1").await, 2, "the two edge events inside");
    assert_eq!(
        db.parked().await,
        [
            ("outside_dedup_window".into(), 1),
            ("event_time_in_future".into(), 3)
        ]
    );
    consumer.stop().await;
}

#[tokio::test]
async fn after_a_day_is_dropped_its_duplicates_are_parked_not_applied() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let today = today(&db).await;
    let oldest = today - chrono::Days::new(14);
    let event = order_at(
        "ORD-OLD",
        &[("SKU-1", 5)],
        Utc.from_utc_datetime(&oldest.and_hms_opt(12, 0, 0).unwrap()),
    );
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    assert_eq!(db.reserved("SKU-1").await, 5);

    // The day leaves the window while the consumer runs (it still believes
    // the day is inside): the duplicate must be parked, not applied.
    let out = maintain(&db, 13).await;
    assert!(out.contains("dropped: 1"), "{out}");
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 2).await;
    assert_eq!(db.reserved("SKU-1").await, 5, "not applied twice");
    assert_eq!(db.parked().await, [("outside_dedup_window".into(), 1)]);
    consumer.stop().await;
}

#[tokio::test]
async fn maintenance_prunes_old_parked_rows_and_clears_older_payloads() {
    let db = TestDb::new().await;
    for (offset, age_days) in [(0_i64, 40), (1, 10), (2, 1)] {
        // Parked that many days ago: in that day's partition.
        sqlx::raw_sql(&format!(
            "CREATE TABLE IF NOT EXISTS inbox_parked_p{day} PARTITION OF inbox_parked
             FOR VALUES FROM ('{day}') TO ('{next}')",
            day = (chrono::Utc::now() - chrono::Duration::days(age_days)).format("%Y%m%d"),
            next = (chrono::Utc::now() - chrono::Duration::days(age_days - 1)).format("%Y%m%d"),
        ))
        .execute(&db.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                       reason, error, payload, parked_at)
             VALUES (inbox_today() - $2, 'c', 't', 0, $1, 'malformed_json', 'e', 'raw',
                     now() - make_interval(days => $2))",
        )
        .bind(offset)
        .bind(age_days as i32)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    // The owner keeps payloads 7 days (as `migrate` with
    // INBOX_PARKED_PAYLOAD_DAYS=7 writes it).
    sqlx::query("UPDATE inbox_settings SET parked_payload_days = 7")
        .execute(&db.pool)
        .await
        .unwrap();
    let output = Command::new(binary())
        .arg("maintain")
        .env("DATABASE_URL", &db.url)
        .env("INBOX_PARKED_PAYLOAD_DAYS", "7")
        .output()
        .expect("run maintain");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("parked rows deleted: 1, payloads cleared: 1"),
        "{stdout}"
    );
    let rows: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT kafka_offset, payload IS NOT NULL FROM inbox_parked ORDER BY kafka_offset",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [(1, false), (2, true)],
        "40 days: deleted; 10 days: payload cleared"
    );
}

#[tokio::test]
async fn a_dropped_day_is_recognised_whatever_the_language_of_the_servers_messages() {
    // A server that speaks German (its errors too): the missing partition
    // is told by SQLSTATE and table, not by the English message text.
    let postgres = common::private_pg::PrivatePostgres::start_with("lc_messages = 'de_DE.UTF-8'");
    let db = postgres.test_db().await;
    let language: String = sqlx::query_scalar("SHOW lc_messages")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(language, "de_DE.UTF-8");
    let error = sqlx::query("SELECT 1/0")
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Division durch Null"), "{error}");

    let topic = fresh_topic(1).await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let today = today(&db).await;
    let old_day = today - chrono::Days::new(10);
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    // The consumer has read the window: then the day goes away.
    wait_until(
        Duration::from_secs(30),
        "the consumer consuming",
        || async { consumer.log_text().contains("consuming") },
    )
    .await;
    sqlx::query(&format!(
        "DROP TABLE processed_inbox_p{}",
        old_day.format("%Y%m%d")
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    let event = order_at(
        "ORD-OLD",
        &[("SKU-1", 5)],
        Utc.from_utc_datetime(&old_day.and_hms_opt(12, 0, 0).unwrap()),
    );
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    assert_eq!(db.parked().await, [("outside_dedup_window".into(), 0)]);
    assert_eq!(db.reserved("SKU-1").await, 0);
    consumer.stop().await;
}

#[tokio::test]
async fn the_consumer_maintains_the_window_while_it_runs() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let today = today(&db).await;
    let ahead = format!(
        "processed_inbox_p{}",
        (today + chrono::Days::new(2)).format("%Y%m%d")
    );
    let consumer = ConsumerSpec::new(&db, &topic)
        .env("INBOX_MAINTENANCE_INTERVAL_SECONDS", "1")
        .start();
    wait_until(
        Duration::from_secs(30),
        "the consumer consuming",
        || async { consumer.log_text().contains("consuming") },
    )
    .await;
    // A day ahead goes missing: the next maintenance inside `run` makes it.
    sqlx::query(&format!("DROP TABLE {ahead}"))
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(!window(&db).await.contains(&(today + chrono::Days::new(2))));
    wait_until(
        Duration::from_secs(30),
        "the partition made again",
        || async { window(&db).await.contains(&(today + chrono::Days::new(2))) },
    )
    .await;
    assert_eq!(
        window(&db).await,
        days(today - chrono::Days::new(14), today + chrono::Days::new(2))
    );
    consumer.stop().await;
}

#[tokio::test]
async fn maintenance_counts_days_in_utc_whatever_the_sessions_time_zone() {
    let db = TestDb::new().await;
    let utc_today: NaiveDate = sqlx::query_scalar("SELECT (now() AT TIME ZONE 'UTC')::date")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // A zone whose date differs from UTC's right now: UTC+14 from 10:00
    // UTC on, UTC-12 before noon UTC (one of the two always applies).
    let hour: i32 = sqlx::query_scalar("SELECT extract(hour FROM now() AT TIME ZONE 'UTC')::int")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let zone = if hour >= 10 {
        "Etc/GMT-14"
    } else {
        "Etc/GMT+12"
    };
    let mut session = db.pool.acquire().await.unwrap();
    sqlx::query(&format!("SET TimeZone = '{zone}'"))
        .execute(&mut *session)
        .await
        .unwrap();
    let local_today: NaiveDate = sqlx::query_scalar("SELECT current_date")
        .fetch_one(&mut *session)
        .await
        .unwrap();
    assert_ne!(local_today, utc_today, "{zone} is on another day");
    sqlx::query("SELECT * FROM inbox_create_window(), inbox_drop_expired()")
        .execute(&mut *session)
        .await
        .unwrap();
    drop(session);
    assert_eq!(
        window(&db).await,
        days(
            utc_today - chrono::Days::new(14),
            utc_today + chrono::Days::new(2)
        )
    );
}

#[tokio::test]
async fn maintain_as_the_owner_compacts_the_indexes_of_closed_days_once() {
    let db = TestDb::new().await;
    // A closed day's traffic, written in arrival order: random message ids,
    // order ids out of their sort order.
    sqlx::raw_sql(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT gen_random_uuid(), g, g, inbox_today() - 3, 0, 'p',
                inbox_consumer_code('c'), inbox_topic_code('t'), 'O-' || g
         FROM generate_series(1, 30000) AS g;
         INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
         SELECT gen_random_uuid(), inbox_today() - 3, 'reserved', 1, 'O-' || g, 'SKU-' || l
         FROM generate_series(1, 30000) AS g, generate_series(1, 3) AS l;",
    )
    .execute(&db.pool)
    .await
    .expect("a closed day");
    let maintain = |url: &str| {
        let output = Command::new(binary())
            .arg("maintain")
            .env("DATABASE_URL", url)
            .output()
            .expect("run maintain");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let as_app = maintain(&db.app_url);
    assert!(
        as_app.contains("not compacted (only the tables' owner may)"),
        "{as_app}"
    );
    let as_owner = maintain(&db.url);
    assert!(
        as_owner.contains("indexes of closed days compacted: 2 ("),
        "{as_owner}"
    );
    let sizes: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT index_name, bytes_before, bytes_after FROM inbox_compacted ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    let full: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN inbox_compacted k ON k.index_name = c.relname
         WHERE c.reloptions @> ARRAY['fillfactor=100']",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(full, 2, "rebuilt with full pages");
    for (index, before, after) in &sizes {
        assert!(
            after * 10 < before * 8,
            "{index}: {before} -> {after} bytes"
        );
    }
    let again = maintain(&db.url);
    assert!(
        again.contains("indexes of closed days compacted: 0 ("),
        "{again}"
    );
}
