//! PostgreSQL over TLS: a database across a network is reached with
//! `sslmode=require` (or `verify-full` with `sslrootcert`). The private server
//! here accepts TLS only, with a certificate of its own.

mod common;

use std::time::Duration;

use common::private_pg::{PrivatePostgres, CERT_ROLE};
use common::*;

#[tokio::test]
async fn the_consumer_applies_events_over_tls_only() {
    let server = PrivatePostgres::start_tls();
    let db = server.test_db().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let topic = fresh_topic(1).await;
    let records: Vec<Outgoing> = (0..10)
        .map(|i| Outgoing::event(&order(&format!("TLS-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = format!("{}?sslmode=require", server.url());
    let consumer = spec.start();
    wait_for_ledger(&db, 10, Duration::from_secs(30)).await;
    assert_eq!(db.reserved("SKU-1").await, 10);
    let encrypted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE application_name = 'inventory-inbox' AND ssl",
    )
    .fetch_one(&db.pool)
    .await
    .expect("read pg_stat_ssl");
    assert!(encrypted >= 1, "the consumer's sessions use TLS");
    consumer.stop().await;
}

/// `DATABASE_URL` of `server` for `host`, as `user`, with `params`.
fn url_of(server: &PrivatePostgres, user: &str, host: &str, params: &str) -> String {
    format!(
        "postgres://{user}@{host}:{}/inventory?{params}",
        server.port()
    )
}

/// `inventory-inbox positions list` against `url`: whether it succeeded,
/// and its stderr.
fn positions_list(url: &str) -> (bool, String) {
    let output = std::process::Command::new(binary())
        .args(["positions", "list"])
        .env("DATABASE_URL", url)
        .env("KAFKA_BOOTSTRAP_SERVERS", kafka())
        .env("KAFKA_TOPIC", "orders.placed.v1")
        .output()
        .expect("run inventory-inbox");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `sslmode=verify-full` with the server's CA: the consumer connects, as a
/// runtime role proving itself with a client certificate, and applies
/// events; a server whose certificate names another host, or a CA that
/// did not sign the server's, is refused with one line that says so and
/// names the setting.
#[tokio::test]
async fn verify_full_checks_who_answers_and_a_client_certificate_logs_in() {
    let server = PrivatePostgres::start_tls();
    let db = server.test_db().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let tls = server.tls_dir();
    let file = |name: &str| tls.join(name).display().to_string();
    let verified = format!(
        "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        file("ca.crt"),
        file("client.crt"),
        file("client.key")
    );

    let topic = fresh_topic(1).await;
    let records: Vec<Outgoing> = (0..10)
        .map(|i| Outgoing::event(&order(&format!("VERIFIED-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = url_of(&server, CERT_ROLE, "localhost", &verified);
    let consumer = spec.start();
    wait_for_ledger(&db, 10, Duration::from_secs(30)).await;
    assert_eq!(db.reserved("SKU-1").await, 10);
    // As the superuser: another role's sessions are hidden from the owner.
    let sessions = server.sql(&format!(
        "SELECT usename, client_dn FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE ssl AND usename = '{CERT_ROLE}'"
    ));
    assert!(
        sessions.contains(&format!("{CERT_ROLE}|/CN={CERT_ROLE}")),
        "the consumer logged in by its certificate: {sessions:?}"
    );
    consumer.stop().await;

    for (host, root, refused) in [
        // The server's certificate is for `localhost`, not 127.0.0.1.
        ("127.0.0.1", "ca.crt", "(IP address mismatch)"),
        // A CA that signed nothing of the server's (OpenSSL's words: the
        // server's CA, not among the trusted, is taken as self-signed).
        (
            "localhost",
            "other-ca.crt",
            "(self-signed certificate in certificate chain)",
        ),
    ] {
        let url = url_of(
            &server,
            "inventory",
            host,
            &format!("sslmode=verify-full&sslrootcert={}", file(root)),
        );
        let (ok, stderr) = positions_list(&url.replacen("inventory@", "inventory:inventory@", 1));
        assert!(!ok, "{host} with {root}: accepted");
        let lines: Vec<&str> = stderr.trim().lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(
            lines[0].contains(refused)
                && lines[0].contains("DATABASE_URL: the database's TLS certificate is not trusted"),
            "{host} with {root}: {stderr}"
        );
        assert!(!stderr.contains(":inventory@"), "no password: {stderr}");
    }
}
