//! What the service checks and guards at start-up and while connecting: the
//! topic's retention against the dedup window, and secrets kept out of logs.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_topic_retention_longer_than_the_dedup_window_is_reported() {
    let thirty_days = (30 * 86_400 * 1000_i64).to_string();
    let topic = fresh_topic_with(1, &[("retention.ms", &thirty_days)]).await;
    let db = TestDb::new().await;
    let consumer = ConsumerSpec::new(&db, &topic).start();
    wait_until(Duration::from_secs(30), "retention gauge", || async {
        consumer.metric("inbox_topic_retention_seconds").await == (30 * 86_400) as f64
    })
    .await;
    assert!(
        consumer.log_text().contains("longer than the dedup window"),
        "{}",
        consumer.log_text()
    );
    consumer.stop().await;

    let short = fresh_topic_with(1, &[("retention.ms", "86400000")]).await;
    let consumer = ConsumerSpec::new(&db, &short).start();
    // "consuming" is logged after the retention check and its warning.
    wait_until(
        Duration::from_secs(30),
        "the consumer consuming",
        || async { consumer.log_text().contains("consuming") },
    )
    .await;
    assert_eq!(
        consumer.metric("inbox_topic_retention_seconds").await,
        86_400.0
    );
    assert!(!consumer.log_text().contains("longer than the dedup window"));
    consumer.stop().await;
}

#[tokio::test]
async fn passwords_never_reach_logs_or_errors() {
    const DB_SECRET: &str = "Db-S3cret-pw-7f3a";
    const SASL_SECRET: &str = "Sasl-S3cret-pw-91bc";
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let role = unique("secret_role");
    for statement in [
        format!("CREATE ROLE {role} LOGIN PASSWORD '{DB_SECRET}'"),
        format!("GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"),
        format!("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"),
        format!("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}"),
    ] {
        sqlx::query(&statement).execute(&db.pool).await.unwrap();
    }
    let url = db
        .url
        .replace("inventory:inventory", &format!("{role}:{DB_SECRET}"));

    // The broker speaks PLAINTEXT: the SASL handshake is refused, and the
    // start stops naming the setting (tests/kafka_security.rs has the
    // listeners that take SASL), at trace level without a secret.
    let mut spec = ConsumerSpec::new(&db, &topic)
        .env("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
        .env("KAFKA_PROPERTY_SASL_MECHANISM", "PLAIN")
        .env("KAFKA_PROPERTY_SASL_USERNAME", "inbox")
        .env("KAFKA_PROPERTY_SASL_PASSWORD", SASL_SECRET)
        .env("RUST_LOG", "trace");
    spec.database_url = url.clone();
    let mut consumer = spec.start();
    let status = consumer.wait(Duration::from_secs(30)).await;
    let log = consumer.log_text();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("error: KAFKA_PROPERTY_SECURITY_PROTOCOL: the listener does not take SASL"),
        "{log}"
    );
    assert!(
        !log.contains(DB_SECRET) && !log.contains(SASL_SECRET),
        "{log}"
    );

    // A wrong database password: the process fails, naming no secret.
    let output = std::process::Command::new(binary())
        .arg("run")
        .env("DATABASE_URL", url.replace(DB_SECRET, "Wrong-S3cret-pw"))
        .env("KAFKA_TOPIC", &topic)
        .env("METRICS_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("KAFKA_PROPERTY_SASL_PASSWORD", SASL_SECRET)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(
        !text.contains("Wrong-S3cret-pw") && !text.contains(SASL_SECRET),
        "{text}"
    );
}

/// Runs `inventory-inbox run` against a database until it exits; returns
/// its status and what it printed.
async fn run_until_exit(database_url: &str, topic: &str) -> (std::process::ExitStatus, String) {
    let mut consumer = ConsumerSpec::at(database_url, topic).start();
    let status = consumer.wait(Duration::from_secs(30)).await;
    (status, consumer.log_text())
}

#[tokio::test]
async fn a_database_without_the_inbox_schema_is_named_with_what_to_do() {
    require_services();
    let topic = fresh_topic(1).await;
    let admin = sqlx::PgPool::connect(ADMIN_URL).await.unwrap();
    let name = unique("never_migrated");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await
        .unwrap();
    let url = format!("postgres://inventory:inventory@127.0.0.1:5432/{name}");
    let (status, log) = run_until_exit(&url, &topic).await;
    assert!(!status.success());
    assert!(
        log.contains("the database has no inbox schema")
            && log.contains("run `inventory-inbox migrate` as the owner role"),
        "{log}"
    );
    assert!(!log.contains("does not exist"), "{log}");
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_is_named() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (29991231000000, 'from the future', true, '\\x00', 0)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let (status, log) = run_until_exit(&db.app_url, &topic).await;
    assert!(!status.success());
    assert!(
        log.contains("the inbox schema is newer than this binary (version 29991231000000"),
        "{log}"
    );
}
