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
    wait_until(Duration::from_secs(30), "retention gauge", || async {
        consumer.metric("inbox_topic_retention_seconds").await == 86_400.0
    })
    .await;
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

    // The broker speaks PLAINTEXT: SASL fails and librdkafka logs errors.
    let mut spec = ConsumerSpec::new(&db, &topic)
        .env("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
        .env("KAFKA_PROPERTY_SASL_MECHANISM", "PLAIN")
        .env("KAFKA_PROPERTY_SASL_USERNAME", "inbox")
        .env("KAFKA_PROPERTY_SASL_PASSWORD", SASL_SECRET);
    spec.database_url = url.clone();
    let consumer = spec.start();
    wait_until(
        Duration::from_secs(30),
        "librdkafka errors logged",
        || async { consumer.log_text().contains("librdkafka") },
    )
    .await;
    let log = consumer.log_text();
    consumer.stop().await;
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
