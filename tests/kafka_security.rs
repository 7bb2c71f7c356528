//! Kafka as managed services run it: TLS and authentication on every
//! listener. The consumer, its DLQ producer and the commands that talk to
//! Kafka (`positions list`, `inspect --offset`, the start-up checks) work
//! through SASL_SSL with SCRAM-SHA-512, through SSL with a client
//! certificate (mutual TLS), and through SASL_SSL with OAUTHBEARER tokens
//! of an OIDC token endpoint, refreshed as they expire; each event applied
//! once. A configuration the cluster refuses stops the start within
//! seconds, with one line that names the setting to fix, and no secret in
//! any line, at trace level. One private broker (tests/common/
//! private_kafka_secure.rs) serves every test here; the shared broker on
//! 9092 is not touched.

mod common;

use std::time::{Duration, SystemTime};

use common::private_kafka_secure::{
    SecureKafka, CLIENT_ID, CLIENT_SECRET, EXPIRED_CLIENT_ID, OTHER_AUDIENCE_CLIENT_ID,
    SCRAM_PASSWORD, SCRAM_USER,
};
use common::*;

/// The properties of a client of the SCRAM listener.
fn scram(kafka: &SecureKafka) -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_SSL".into()),
        ("KAFKA_PROPERTY_SASL_MECHANISM", "SCRAM-SHA-512".into()),
        ("KAFKA_PROPERTY_SASL_USERNAME", SCRAM_USER.into()),
        ("KAFKA_PROPERTY_SASL_PASSWORD", SCRAM_PASSWORD.into()),
        ("KAFKA_PROPERTY_SSL_CA_LOCATION", kafka.file("ca.crt")),
    ]
}

/// The properties of a client of the mutual TLS listener.
fn mtls(kafka: &SecureKafka) -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SSL".into()),
        ("KAFKA_PROPERTY_SSL_CA_LOCATION", kafka.file("ca.crt")),
        (
            "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION",
            kafka.file("client.crt"),
        ),
        ("KAFKA_PROPERTY_SSL_KEY_LOCATION", kafka.file("client.key")),
    ]
}

/// The properties of a client of the OAUTHBEARER listener, with its token
/// endpoint.
fn oidc(kafka: &SecureKafka, client_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_SSL".into()),
        ("KAFKA_PROPERTY_SASL_MECHANISM", "OAUTHBEARER".into()),
        ("KAFKA_PROPERTY_SASL_OAUTHBEARER_METHOD", "oidc".into()),
        (
            "KAFKA_PROPERTY_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL",
            kafka.idp.url("/token"),
        ),
        (
            "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_ID",
            client_id.into(),
        ),
        (
            "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET",
            CLIENT_SECRET.into(),
        ),
        ("KAFKA_PROPERTY_SSL_CA_LOCATION", kafka.file("ca.crt")),
    ]
}

/// `properties` with `key` set to `value` (`None`: left out).
fn with(
    mut properties: Vec<(&'static str, String)>,
    key: &'static str,
    value: Option<&str>,
) -> Vec<(&'static str, String)> {
    properties.retain(|(k, _)| *k != key);
    if let Some(value) = value {
        properties.push((key, value.into()));
    }
    properties
}

/// A consumer of `topic` on `db` through `bootstrap` with `properties`.
fn spec_through(
    db: &TestDb,
    topic: &str,
    bootstrap: &str,
    properties: &[(&'static str, String)],
) -> ConsumerSpec {
    let mut spec = ConsumerSpec::new(db, topic);
    spec.bootstrap = bootstrap.to_owned();
    for (key, value) in properties {
        spec = spec.env(key, value);
    }
    spec
}

/// Orders of one unit of SKU-1 each, `ORDER-{from}`.. .
fn orders(prefix: &str, range: std::ops::Range<usize>) -> Vec<Outgoing> {
    range
        .map(|i| Outgoing::event(&order(&format!("{prefix}-{i}"), &[("SKU-1", 1)])))
        .collect()
}

/// The high watermark of partition 0 of `topic` on the plaintext listener.
fn records_on(kafka: &SecureKafka, topic: &str) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &kafka.plaintext)
        .create()
        .expect("client");
    client
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

/// Through the listener of `bootstrap` with `properties`: the consumer
/// applies 8 events once and parks a malformed record, whose copy its DLQ
/// producer sends; then `positions list` and `inspect --offset` answer
/// through it. No secret of `secrets` in any output, the consumer's at
/// trace level.
async fn consumes_through(
    kafka: &SecureKafka,
    bootstrap: &str,
    properties: Vec<(&'static str, String)>,
    secrets: &[&str],
) {
    let topic = create_topic_at(&kafka.plaintext, "orders_secure", 1, &[]).await;
    let dlq = create_topic_at(&kafka.plaintext, "orders_secure_dlq", 1, &[]).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let mut records = orders("SECURE", 0..4);
    records.push(Outgoing::raw("MALFORMED", b"not json"));
    records.extend(orders("SECURE", 4..8));
    produce(&producer_at(&kafka.plaintext), &topic, &records).await;

    let mut spec = spec_through(&db, &topic, bootstrap, &properties);
    spec.dlq_topic = dlq.clone();
    let consumer = spec.clone().env("RUST_LOG", "trace").start();
    wait_for_ledger(&db, 8, Duration::from_secs(60)).await;
    wait_until(
        Duration::from_secs(60),
        "the malformed record's copy on the DLQ topic",
        || async {
            db.count("SELECT count(*) FROM inbox_parked WHERE dlq_sent_at IS NOT NULL")
                .await
                == 1
        },
    )
    .await;
    assert_eq!(records_on(kafka, &dlq), 1, "one copy");
    assert_eq!(db.ledger_rows().await, 8);
    assert_eq!(db.reserved("SKU-1").await, 8, "each event applied once");
    wait_until(Duration::from_secs(60), "offset 9 committed", || async {
        committed_offsets_at(&kafka.plaintext, &spec.group, &topic, 1)[&0] == 9
    })
    .await;
    let log = consumer.log_text();
    consumer.stop().await;

    let (ok, out, err) = spec.cli("positions", &["list", "--json"]);
    assert!(ok, "positions list: {out}{err}");
    let listed: serde_json::Value =
        serde_json::from_str(out.lines().next().unwrap_or_default()).expect("a JSON line");
    assert_eq!(
        (&listed["position"], &listed["end"], &listed["committed"]),
        (&9.into(), &9.into(), &9.into()),
        "{out}"
    );
    let (ok, inspected, err) = spec.cli("inspect", &["--offset", "0:4", "--json"]);
    assert!(ok, "inspect --offset: {inspected}{err}");
    let found: serde_json::Value = serde_json::from_str(&inspected).expect("JSON");
    assert!(
        found["verdict"]
            .as_str()
            .is_some_and(|verdict| verdict.contains("parked as malformed_json")),
        "{found}"
    );
    for secret in secrets {
        for text in [&log, &out, &err, &inspected] {
            assert!(!text.contains(secret), "a secret in: {text}");
        }
    }
}

/// Runs the consumer through `bootstrap` with `properties`, at trace level,
/// until it stops; then `positions list`, at the default level. Each must
/// fail within seconds with one line (the same) that starts with the
/// setting `names`, and no secret of `secrets`, nor any token the identity
/// provider gave, anywhere. Returns the line.
async fn refused(
    kafka: &SecureKafka,
    db: &TestDb,
    topic: &str,
    bootstrap: &str,
    properties: Vec<(&'static str, String)>,
    names: &str,
    secrets: &[&str],
) -> String {
    let spec = spec_through(db, topic, bootstrap, &properties);
    // Bounded: the start-up check gives up on a cluster that does not
    // answer after 10 s and goes on, and a consumer that goes on does not
    // exit; a refusal stops it within about a second of the check.
    let mut consumer = spec.clone().env("RUST_LOG", "trace").start();
    let status = consumer.wait(Duration::from_secs(60)).await;
    let log = consumer.log_text();
    assert!(!status.success(), "{names}: started; log:\n{log}");
    let errors: Vec<&str> = log
        .lines()
        .filter(|line| line.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{names}: one error line; log:\n{log}");
    let line = errors[0].trim_start_matches("error: ");
    assert!(
        line.starts_with(&format!("{names}: ")),
        "{names} not named first: {line}"
    );
    let asked = std::time::Instant::now();
    let (ok, out, err) = spec
        .clone()
        .env("RUST_LOG", "info")
        .cli("positions", &["list"]);
    let took = asked.elapsed();
    assert!(!ok, "{names}: positions list answered: {out}");
    // The same line, but for the seconds since a token expired, which the
    // second command reads a moment later.
    assert_eq!(
        without_seconds_ago(err.trim()),
        without_seconds_ago(errors[0]),
        "{names}: positions list says the same, alone"
    );
    let tokens = kafka.idp.tokens();
    for secret in secrets
        .iter()
        .copied()
        .chain(tokens.iter().map(String::as_str))
    {
        for text in [&log, &out, &err] {
            assert!(!text.contains(secret), "{names}: a secret in: {text}");
        }
    }
    if std::env::var_os("INBOX_TEST_PRINT_REFUSALS").is_some() {
        eprintln!("positions list stopped after {took:?}: {line}");
    }
    line.to_owned()
}

#[tokio::test]
async fn scram_sha_512_over_tls_applies_each_event_once_and_the_commands_answer() {
    let kafka = SecureKafka::shared();
    consumes_through(kafka, &kafka.scram, scram(kafka), &[SCRAM_PASSWORD]).await;
}

#[tokio::test]
async fn mutual_tls_applies_each_event_once_and_the_commands_answer() {
    let kafka = SecureKafka::shared();
    consumes_through(kafka, &kafka.mtls, mtls(kafka), &[]).await;
}

/// Tokens live 10 s: every token fetched while the consumer started has
/// expired before the second half of the events is produced, and the
/// broker ends a session whose token expired, so those are applied only
/// if the consumer fetched and used a new one.
#[tokio::test]
async fn oauthbearer_tokens_of_the_oidc_endpoint_are_fetched_and_refreshed() {
    let kafka = SecureKafka::shared();
    let topic = create_topic_at(&kafka.plaintext, "orders_oidc", 1, &[]).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let producer = producer_at(&kafka.plaintext);
    produce(&producer, &topic, &orders("OIDC", 0..5)).await;
    let spec = spec_through(&db, &topic, &kafka.oauth, &oidc(kafka, CLIENT_ID));
    let consumer = spec.clone().env("RUST_LOG", "trace").start();
    wait_for_ledger(&db, 5, Duration::from_secs(60)).await;

    let at_start = kafka.idp.issued(CLIENT_ID);
    assert!(!at_start.is_empty(), "the consumer asked for a token");
    let last_expiry = at_start
        .iter()
        .map(|issued| issued.expires)
        .max()
        .expect("a token");
    wait_until(
        Duration::from_secs(60),
        "every first token expired, and a new one fetched",
        || async {
            SystemTime::now() > last_expiry + Duration::from_secs(1)
                && kafka.idp.issued(CLIENT_ID).len() > at_start.len()
        },
    )
    .await;
    produce(&producer, &topic, &orders("OIDC", 5..10)).await;
    wait_for_ledger(&db, 10, Duration::from_secs(60)).await;
    assert_eq!(db.reserved("SKU-1").await, 10, "each event applied once");
    let issued = kafka.idp.issued(CLIENT_ID);
    assert!(issued.len() >= 2, "refreshed: {} tokens", issued.len());
    let log = consumer.log_text();
    consumer.stop().await;

    let (ok, out, err) = spec.cli("positions", &["list", "--json"]);
    assert!(ok, "positions list: {out}{err}");
    assert!(out.contains("\"position\":10"), "{out}");
    for text in [&log, &out, &err] {
        assert!(!text.contains(CLIENT_SECRET), "the secret in: {text}");
        for token in kafka.idp.issued(CLIENT_ID) {
            assert!(!text.contains(&token.token), "a token in: {text}");
        }
    }
}

#[tokio::test]
async fn a_refused_scram_login_an_untrusted_broker_and_a_plaintext_client_are_one_line_each() {
    let kafka = SecureKafka::shared();
    let topic = create_topic_at(&kafka.plaintext, "orders_refused", 1, &[]).await;
    let db = TestDb::new().await;
    const WRONG: &str = "Wrong-S3cret-pw-55a0";
    for (case, properties, names, says) in [
        (
            "a wrong password",
            with(scram(kafka), "KAFKA_PROPERTY_SASL_PASSWORD", Some(WRONG)),
            "KAFKA_PROPERTY_SASL_PASSWORD",
            "invalid credentials",
        ),
        (
            "an unknown user",
            with(scram(kafka), "KAFKA_PROPERTY_SASL_USERNAME", Some("nobody")),
            "KAFKA_PROPERTY_SASL_PASSWORD",
            "an unknown user",
        ),
        (
            "a CA that did not sign the broker's certificate",
            with(
                scram(kafka),
                "KAFKA_PROPERTY_SSL_CA_LOCATION",
                Some(&kafka.file("other-ca.crt")),
            ),
            "KAFKA_PROPERTY_SSL_CA_LOCATION",
            "certificate is not trusted",
        ),
        (
            "a plaintext client on the TLS port",
            vec![],
            "KAFKA_PROPERTY_SECURITY_PROTOCOL",
            "a client without TLS",
        ),
    ] {
        let line = refused(
            kafka,
            &db,
            &topic,
            &kafka.scram,
            properties,
            names,
            &[SCRAM_PASSWORD, WRONG],
        )
        .await;
        assert!(line.contains(says), "{case}: {line}");
    }
}

#[tokio::test]
async fn mutual_tls_without_a_trusted_client_certificate_is_one_line() {
    let kafka = SecureKafka::shared();
    let topic = create_topic_at(&kafka.plaintext, "orders_refused", 1, &[]).await;
    let db = TestDb::new().await;
    let no_certificate = with(
        with(mtls(kafka), "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION", None),
        "KAFKA_PROPERTY_SSL_KEY_LOCATION",
        None,
    );
    let stranger = with(
        with(
            mtls(kafka),
            "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION",
            Some(&kafka.file("stranger.crt")),
        ),
        "KAFKA_PROPERTY_SSL_KEY_LOCATION",
        Some(&kafka.file("stranger.key")),
    );
    for (case, properties, names, says) in [
        (
            "no client certificate",
            no_certificate,
            "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION",
            "requires a client certificate (mutual TLS",
        ),
        (
            "a client certificate of another CA",
            stranger,
            "KAFKA_PROPERTY_SSL_CERTIFICATE_LOCATION",
            "no CA it trusts signed this one",
        ),
        (
            "a CA that did not sign the broker's certificate",
            with(
                mtls(kafka),
                "KAFKA_PROPERTY_SSL_CA_LOCATION",
                Some(&kafka.file("other-ca.crt")),
            ),
            "KAFKA_PROPERTY_SSL_CA_LOCATION",
            "certificate is not trusted",
        ),
    ] {
        let line = refused(kafka, &db, &topic, &kafka.mtls, properties, names, &[]).await;
        assert!(line.contains(says), "{case}: {line}");
    }
}

#[tokio::test]
async fn a_token_endpoint_that_refuses_and_an_expired_token_are_one_line_each() {
    let kafka = SecureKafka::shared();
    let topic = create_topic_at(&kafka.plaintext, "orders_refused", 1, &[]).await;
    let db = TestDb::new().await;
    const WRONG: &str = "Wrong-Oidc-S3cret-19f2";
    let refused_before = kafka.idp.refused();
    let line = refused(
        kafka,
        &db,
        &topic,
        &kafka.oauth,
        with(
            oidc(kafka, CLIENT_ID),
            "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET",
            Some(WRONG),
        ),
        "KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET",
        &[CLIENT_SECRET, WRONG],
    )
    .await;
    assert!(
        line.contains("refused to give this client a token (") && line.contains("invalid_client"),
        "{line}"
    );
    assert!(
        kafka.idp.refused() > refused_before,
        "the endpoint was asked"
    );

    let line = refused(
        kafka,
        &db,
        &topic,
        &kafka.oauth,
        oidc(kafka, EXPIRED_CLIENT_ID),
        "KAFKA_PROPERTY_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL",
        &[CLIENT_SECRET],
    )
    .await;
    assert!(
        line.contains("token that expired 6") && line.contains(" s ago, by this host's clock"),
        "{line}"
    );
    for token in kafka.idp.issued(EXPIRED_CLIENT_ID) {
        assert!(!line.contains(&token.token));
    }
}

/// A token for another audience: the token endpoint gives it, the brokers
/// refuse it.
#[tokio::test]
async fn a_token_the_brokers_refuse_is_one_line() {
    let kafka = SecureKafka::shared();
    let topic = create_topic_at(&kafka.plaintext, "orders_refused", 1, &[]).await;
    let db = TestDb::new().await;
    let line = refused(
        kafka,
        &db,
        &topic,
        &kafka.oauth,
        oidc(kafka, OTHER_AUDIENCE_CLIENT_ID),
        "KAFKA_PROPERTY_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL",
        &[CLIENT_SECRET],
    )
    .await;
    assert!(
        line.contains("the cluster refused the OAUTHBEARER token")
            && line.contains("invalid_token"),
        "{line}"
    );
    let issued = kafka.idp.issued(OTHER_AUDIENCE_CLIENT_ID);
    assert!(!issued.is_empty(), "a token was given");
    for token in issued {
        assert!(!line.contains(&token.token));
    }
}

/// `line` with the count of "expired N s ago" left out.
fn without_seconds_ago(line: &str) -> String {
    match line.split_once("expired ") {
        Some((before, after)) => {
            let rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{before}expired N{rest}")
        }
        None => line.to_owned(),
    }
}
