//! Behind PgBouncer (Debian's 1.18, configured as commonly deployed: only
//! `extra_float_digits` ignored among start-up parameters): in transaction
//! and in session pooling the consumer applies each event once, a
//! redelivery is a duplicate, and its timeouts are in force without
//! start-up options and never reach other clients of the same server
//! connections; a permanent refusal by the pooler (a refused parameter, an
//! unknown database, a wrong password) stops the start with one line naming
//! it. What a batch costs in round trips through each (the direct path's,
//! tests/db_round_trips.rs) is measured here too.

mod common;

use std::time::Duration;

use common::private_pgbouncer::PrivatePgBouncer;
use common::proxy::CountingProxy;
use common::*;
use sqlx::postgres::PgPoolOptions;

/// Four partitions, four lanes and maintenance over two server
/// connections: the consumer's connections take turns on them.
async fn applies_each_event_once_behind(pool_mode: &str) {
    let topic = fresh_topic(4).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 10_000), ("SKU-2", 10_000)]).await;
    let bouncer = PrivatePgBouncer::start(pool_mode, &db);
    let spec = ConsumerSpec::at(&bouncer.url(&db.app_url), &topic)
        .env("INBOX_DB_POOLER", pool_mode)
        .env("DB_POOL_SIZE", "4")
        .env("DB_STATEMENT_TIMEOUT_MS", "1500")
        .env("DB_LOCK_TIMEOUT_MS", "0")
        .env("BATCH_MAX_RECORDS", "10");
    let consumer = spec.start();

    let events: Vec<_> = (0..200)
        .map(|i| order(&format!("PGB-{i}"), &[("SKU-1", 1), ("SKU-2", 2)]))
        .collect();
    let records: Vec<Outgoing> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Outgoing::event(e).on_partition(i as i32 % 4))
        .collect();
    produce(&producer(), &topic, &records).await;
    wait_for_ledger(&db, 200, Duration::from_secs(60)).await;
    assert_eq!(db.reserved("SKU-1").await, 200);
    assert_eq!(db.reserved("SKU-2").await, 400);

    // A redelivery is a duplicate.
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&events[7]).on_partition(0)],
    )
    .await;
    wait_until(Duration::from_secs(30), "the redelivery seen", || async {
        consumer.metric("inbox_duplicate_ignored_total").await >= 1.0
    })
    .await;
    assert_eq!(db.ledger_rows().await, 200);
    assert_eq!(db.reserved("SKU-1").await, 200);

    // The statement timeout is in force through the pooler: a batch
    // behind a held stock row (no lock timeout) is cancelled at 1.5 s and
    // retried, then applied once the row is free.
    let holder = db.hold_stock_row("SKU-2").await;
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&order("PGB-HELD", &[("SKU-2", 1)])).on_partition(1)],
    )
    .await;
    wait_until(Duration::from_secs(30), "a statement cancelled", || async {
        consumer
            .metric("inbox_db_retries_total{reason=\"query_canceled\"}")
            .await
            >= 1.0
    })
    .await;
    assert_eq!(db.ledger_rows().await, 200, "nothing applied while held");

    // The consumer's limits stay in its own transactions: another client of
    // the same role, through the same pooler, gets the server's defaults.
    let other = PgPoolOptions::new()
        .max_connections(SERVER_CONNECTIONS_TRIED)
        .connect_with(
            bouncer
                .url(&db.app_url)
                .parse::<sqlx::postgres::PgConnectOptions>()
                .expect("a URL")
                .extra_float_digits(None),
        )
        .await
        .expect("another client through the pooler");
    for _ in 0..10 {
        let timeouts: (String, String) = sqlx::query_as(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')",
        )
        .persistent(false)
        .fetch_one(&mut *other.begin().await.expect("begin"))
        .await
        .expect("the other client's timeouts");
        assert_eq!(timeouts, ("0".into(), "0".into()));
    }
    other.close().await;

    holder.rollback().await.expect("release the row");
    wait_for_ledger(&db, 201, Duration::from_secs(30)).await;
    assert_eq!(db.reserved("SKU-2").await, 401);
    consumer.stop().await;
}

/// Clients of the pooler at once in the check for leaked settings.
const SERVER_CONNECTIONS_TRIED: u32 = 2;

#[tokio::test]
async fn behind_a_transaction_pooler_each_event_is_applied_once_with_its_timeouts() {
    applies_each_event_once_behind("transaction").await;
}

#[tokio::test]
async fn behind_a_session_pooler_each_event_is_applied_once_with_its_timeouts() {
    applies_each_event_once_behind("session").await;
}

/// The consumer with `pooler` at `url`: it must stop within seconds,
/// failing, its log naming `naming` on one line and never retrying, and
/// the password of the URL nowhere.
async fn start_is_refused(url: &str, pooler: &str, naming: &str) {
    let spec = ConsumerSpec::at(url, &fresh_topic(1).await).env("INBOX_DB_POOLER", pooler);
    let mut consumer = spec.start();
    let status = consumer.wait(Duration::from_secs(30)).await;
    let log = consumer.log_text();
    assert!(!status.success(), "it stopped with an error: {log}");
    let naming_lines: Vec<&str> = log.lines().filter(|l| l.contains(naming)).collect();
    assert_eq!(naming_lines.len(), 1, "one line names {naming:?}: {log}");
    assert!(!log.contains("retrying"), "a refusal is not retried: {log}");
    assert!(
        !log.contains(&format!(":{APP_ROLE}@")) && !log.contains("wrong-secret"),
        "no password in the log: {log}"
    );
}

#[tokio::test]
async fn a_poolers_permanent_refusal_stops_the_start_with_one_line() {
    let db = TestDb::new().await;
    let bouncer = PrivatePgBouncer::start("transaction", &db);
    let url = bouncer.url(&db.app_url);
    // Start-up options (the direct path's timeouts) are refused.
    start_is_refused(&url, "none", "unsupported startup parameter: options").await;
    // A database the pooler does not know.
    let nowhere = url.replace(&format!("/{}", db.name), "/nowhere");
    start_is_refused(&nowhere, "transaction", "no such database: nowhere").await;
    // A wrong password (SCRAM: PgBouncer says how it failed).
    let wrong = url.replace(
        &format!("{APP_ROLE}:{APP_ROLE}@"),
        &format!("{APP_ROLE}:wrong-secret@"),
    );
    start_is_refused(&wrong, "transaction", "SASL authentication failed").await;
}

/// A pool mode that does not fit the pooler is refused naming
/// INBOX_DB_POOLER, by `migrate` as by `run`: the default, `none`, behind
/// a PgBouncer as installed (which ignores no start-up parameter, not even
/// sqlx's `extra_float_digits`), and `session` on a pooler that pools
/// transactions (sqlx's prepared statements meet other clients' there).
#[tokio::test]
async fn a_pool_mode_that_does_not_fit_the_pooler_is_named() {
    let db = TestDb::new().await;
    let bouncer = PrivatePgBouncer::start_ignoring("transaction", &db, "");
    let url = bouncer.url(&db.url);
    let migrate = |pooler: &str| {
        std::process::Command::new(binary())
            .arg("migrate")
            .env("DATABASE_URL", &url)
            .env("INBOX_DB_POOLER", pooler)
            .output()
            .expect("run migrate")
    };
    let refused = |output: std::process::Output, naming: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("error: INBOX_DB_POOLER: ") && stderr.contains(naming),
            "{stderr}"
        );
    };
    refused(migrate("none"), "extra_float_digits");
    start_is_refused(&bouncer.url(&db.app_url), "none", "INBOX_DB_POOLER").await;
    // A client in session mode leaves its prepared statements on the
    // server connections; the next one finds them.
    let _ = migrate("session");
    refused(migrate("session"), "set INBOX_DB_POOLER=transaction");
}

/// Round trips per steady-state batch through PgBouncer in `pool_mode`, as
/// tests/db_round_trips.rs counts them directly: a proxy between the
/// consumer and the pooler counts the exchanges.
async fn round_trips_per_batch_behind(pool_mode: &str) -> f64 {
    const PARTITIONS: i32 = 4;
    const WARM_UP: usize = 100;
    const STEADY: usize = 500;
    const SKUS: [&str; 3] = ["SKU-1", "SKU-2", "SKU-3"];
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&SKUS.map(|sku| (sku, 1_000_000_000))).await;
    let bouncer = PrivatePgBouncer::start(pool_mode, &db);
    let proxy = CountingProxy::start(
        format!("127.0.0.1:{}", bouncer.port())
            .parse()
            .expect("address"),
    )
    .await;
    let through_proxy = db
        .app_url
        .replace("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port));
    let spec = ConsumerSpec::at(&through_proxy, &topic).env("INBOX_DB_POOLER", pool_mode);
    let consumer = spec.start();
    let traffic = Traffic::orders("RT", &SKUS, WARM_UP + STEADY, 1_000_000, 0);
    let (warm_up, steady) = traffic.records.split_at(WARM_UP);
    let per_batch = proxy
        .per_steady_batch(&consumer, &spec, &topic, PARTITIONS, warm_up, steady)
        .await;
    traffic.assert_applied_once(&db).await;
    consumer.stop().await;
    eprintln!("{pool_mode} pooling: {per_batch:.2} round trips per batch");
    per_batch
}

/// In session pooling a batch costs what it costs directly (at most two
/// round trips with the offset commit's position reads, as in
/// tests/db_round_trips.rs): its statement is prepared, its limits are the
/// session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_session_pooler_a_batch_costs_what_it_costs_directly() {
    let per_batch = round_trips_per_batch_behind("session").await;
    assert!(per_batch <= 2.0, "{per_batch:.2} per batch");
}

/// In transaction pooling a batch is BEGIN with its limits, the unnamed
/// statement's Parse/Describe and Bind/Execute, and COMMIT: four round trips
/// where directly it is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_transaction_pooler_a_batch_costs_four_round_trips() {
    let per_batch = round_trips_per_batch_behind("transaction").await;
    assert!(per_batch <= 4.5, "{per_batch:.2} per batch");
}
