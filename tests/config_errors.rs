//! Bad flags and environment values end the process at once with one line
//! naming the variable, and never echo a secret.

mod common;

use std::process::Command;

fn run_with(env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let mut command = Command::new(common::binary());
    command.arg("run").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run the binary");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn assert_one_line_naming(stderr: &str, name: &str) {
    let lines: Vec<_> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    assert!(lines[0].contains(name), "{name} not named in: {stderr}");
}

#[test]
fn a_non_numeric_batch_size_names_the_variable() {
    let (code, stderr) = run_with(&[("BATCH_MAX_RECORDS", "many")], &[]);
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "BATCH_MAX_RECORDS");
}

#[test]
fn out_of_range_values_name_the_variable() {
    for (name, value) in [
        ("BATCH_MAX_RECORDS", "0"),
        ("BATCH_LINGER_MS", "-1"),
        ("DB_POOL_SIZE", "0"),
        ("INBOX_RETENTION_DAYS", "0"),
        ("METRICS_ADDR", "not-an-address"),
        ("DB_STATEMENT_TIMEOUT_MS", "1"),
        ("DB_LOCK_TIMEOUT_MS", "99"),
    ] {
        let (code, stderr) = run_with(&[(name, value)], &[]);
        assert_ne!(code, 0, "{name}={value} accepted");
        assert_one_line_naming(&stderr, name);
    }
}

#[test]
fn reservations_kept_for_less_than_the_window_are_refused_naming_both() {
    for (name, value) in [
        ("INBOX_RESERVATION_RETENTION_DAYS", "0"),
        ("INBOX_RESERVATION_EXPIRY", "archive"),
    ] {
        let (code, stderr) = run_with(&[(name, value)], &[]);
        assert_ne!(code, 0, "{name}={value} accepted");
        assert_one_line_naming(&stderr, name);
    }
    let (code, stderr) = run_with(
        &[
            ("INBOX_RETENTION_DAYS", "20"),
            ("INBOX_RESERVATION_RETENTION_DAYS", "14"),
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "INBOX_RESERVATION_RETENTION_DAYS=14");
    assert!(stderr.contains("INBOX_RETENTION_DAYS=20"), "{stderr}");
}

#[test]
fn an_unknown_flag_is_one_line() {
    let (code, stderr) = run_with(&[], &["--no-such-flag"]);
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "--no-such-flag");
}

#[test]
fn a_bad_kafka_property_names_it_without_the_value() {
    let (code, stderr) = run_with(
        &[("KAFKA_PROPERTY_ENABLE_AUTO_COMMIT", "true")],
        &["--metrics-addr", "127.0.0.1:0"],
    );
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "KAFKA_PROPERTY_ENABLE_AUTO_COMMIT");

    let (code, stderr) = run_with(
        &[],
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--kafka-property",
            "sasl.password-hunter2",
        ],
    );
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "--kafka-property");
    assert!(!stderr.contains("hunter2"));
}

#[test]
fn an_invalid_database_url_is_named_without_echoing_it() {
    let (code, stderr) = run_with(
        &[("DATABASE_URL", "mysql://user:hunter2@host/db")],
        &["--metrics-addr", "127.0.0.1:0"],
    );
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "DATABASE_URL");
    assert!(!stderr.contains("hunter2"));
}

#[test]
fn classic_protocol_properties_are_refused_with_the_consumer_protocol() {
    let output = Command::new(common::binary())
        .args(["run"])
        .env("GROUP_PROTOCOL", "consumer")
        .env("KAFKA_PROPERTY_SESSION_TIMEOUT_MS", "10000")
        .output()
        .expect("run inventory-inbox");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("KAFKA_PROPERTY_SESSION_TIMEOUT_MS")
            && stderr.contains("GROUP_PROTOCOL=consumer"),
        "{stderr}"
    );
}

#[test]
fn an_otlp_setting_the_service_cannot_use_names_the_variable() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
    for (env, name) in [
        (
            vec![endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318")],
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
    ] {
        let (code, stderr) = run_with(&env, &[]);
        assert_eq!(code, 2, "{env:?} accepted: {stderr}");
        assert_one_line_naming(&stderr, name);
    }
}

#[test]
fn an_invalid_kafka_property_value_is_named_never_shown() {
    let (code, stderr) = run_with(
        &[("KAFKA_PROPERTY_SOCKET_TIMEOUT_MS", "hunter2hunter2")],
        &["--metrics-addr", "127.0.0.1:0"],
    );
    assert_ne!(code, 0);
    assert_one_line_naming(&stderr, "KAFKA_PROPERTY_SOCKET_TIMEOUT_MS");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// What librdkafka refuses only when the client is made (a combination of
/// properties) ends the process too, and no property's value reaches the
/// log or the error, whatever librdkafka's words.
#[tokio::test]
async fn a_kafka_client_librdkafka_cannot_make_is_reported_without_secrets() {
    let db = common::TestDb::new().await;
    let secret = "hunter2-client-secret";
    let (code, stderr) = run_with(
        &[
            ("DATABASE_URL", db.app_url.as_str()),
            ("KAFKA_PROPERTY_SECURITY_PROTOCOL", "SASL_PLAINTEXT"),
            ("KAFKA_PROPERTY_SASL_MECHANISM", "OAUTHBEARER"),
            ("KAFKA_PROPERTY_SASL_OAUTHBEARER_METHOD", "oidc"),
            ("KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET", secret),
        ],
        &["--metrics-addr", "127.0.0.1:0"],
    );
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("sasl.oauthbearer.token.endpoint.url"),
        "{stderr}"
    );
    assert!(!stderr.contains(secret), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert_eq!(last.matches("is mandatory").count(), 1, "said once: {last}");
}

#[test]
fn a_dlq_topic_that_cannot_work_is_refused_naming_it() {
    for (env, said) in [
        (
            vec![("DLQ_TOPIC", "orders.placed.v1")],
            "DLQ_TOPIC is KAFKA_TOPIC",
        ),
        (
            vec![("DLQ_TOPIC", "orders dlq!")],
            "DLQ_TOPIC \"orders dlq!\"",
        ),
        (vec![("KAFKA_TOPIC", "..")], "KAFKA_TOPIC"),
    ] {
        let (code, stderr) = run_with(&env, &["--metrics-addr", "127.0.0.1:0"]);
        assert_ne!(code, 0, "{env:?} accepted");
        assert_one_line_naming(&stderr, said);
    }
}

/// A topic the cluster does not have stops the start with one line naming
/// it: the broker does not create topics on demand, so the consumer would
/// otherwise wait for its topic, or fail every DLQ copy, without end.
#[tokio::test]
async fn a_topic_the_cluster_does_not_have_stops_the_start() {
    let db = common::TestDb::new().await;
    let topic = common::fresh_topic(1).await;
    for (env, said) in [
        (
            vec![("KAFKA_TOPIC", "no.such.topic.here")],
            "KAFKA_TOPIC \"no.such.topic.here\"",
        ),
        (
            vec![
                ("KAFKA_TOPIC", topic.as_str()),
                ("DLQ_TOPIC", "no.such.dlq.here"),
            ],
            "DLQ_TOPIC \"no.such.dlq.here\"",
        ),
    ] {
        let mut env = env;
        env.push(("DATABASE_URL", db.app_url.as_str()));
        let (code, stderr) = run_with(&env, &["--metrics-addr", "127.0.0.1:0"]);
        assert_ne!(code, 0, "{env:?} accepted: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains(said) && last.contains("does not exist"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("keeps records longer than the dedup window"),
            "{stderr}"
        );
    }
}

/// Runs `inventory-inbox ARGS` with `env` and nothing of the caller's
/// settings (no database reached: each case fails before).
fn command_with(env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(common::binary());
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run the binary");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_missing_required_argument_is_named() {
    for (args, named) in [
        (vec!["inspect"], "--event"),
        (vec!["inspect"], "--offset"),
        (vec!["positions", "set"], "--offset"),
        (vec!["positions", "set"], "--to-kafka"),
        (vec!["parked", "replay"], "<ID|--reason <REASON>>"),
    ] {
        let (code, _, stderr) = command_with(&[], &args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_one_line_naming(&stderr, named);
    }
}

#[test]
fn a_bad_choice_lists_the_valid_values() {
    let (code, _, stderr) = command_with(&[("INBOX_DB_POOLER", "bogus")], &["migrate"]);
    assert_eq!(code, 2, "{stderr}");
    assert_one_line_naming(&stderr, "INBOX_DB_POOLER");
    assert!(
        stderr.contains("none") && stderr.contains("session") && stderr.contains("transaction"),
        "{stderr}"
    );
}

/// A variable of the service's own prefixes that no setting has is a typo
/// an operator would otherwise never see: one warning line naming it and
/// the setting it likely meant. librdkafka's properties and the variables
/// of the scripts and harnesses around it are not warned about.
#[test]
fn a_misspelled_variable_is_warned_about_with_the_nearest_setting() {
    for (typo, meant) in [
        (
            "INBOX_POISON_BREAKER_CONSECTIVE",
            "INBOX_POISON_BREAKER_CONSECUTIVE",
        ),
        ("INBOX_RETENTION_DAY", "INBOX_RETENTION_DAYS"),
        ("INBOX_BATCH_MAX_RECORDS", "BATCH_MAX_RECORDS"),
        ("KAFKA_PROPERTIES_SASL_PASSWORD", "KAFKA_PROPERTY_"),
    ] {
        // An invalid DATABASE_URL ends each command before it connects.
        let env = [(typo, "7"), ("DATABASE_URL", "mysql://nowhere/db")];
        for args in [vec!["run"], vec!["migrate"], vec!["parked", "list"]] {
            let (code, _, stderr) = command_with(&env, &args);
            assert_ne!(code, 0, "{args:?}: {stderr}");
            let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(typo)).collect();
            assert_eq!(
                warnings.len(),
                1,
                "{args:?}: one line names {typo}: {stderr}"
            );
            assert!(
                warnings[0].contains(meant) && warnings[0].contains("WARN"),
                "{args:?}: {stderr}"
            );
        }
    }
    let env = [
        ("KAFKA_PROPERTY_SASL_USERNAME", "inbox"),
        ("INBOX_TEST_KAFKA", "127.0.0.1:9092"),
        ("INBOX_BIN_DIR", "target/debug"),
        ("KAFKA_HEAP_OPTS", "-Xmx1G"),
        ("DB_SECRET", "x"),
        ("DATABASE_URL", "mysql://nowhere/db"),
    ];
    let (_, _, stderr) = command_with(&env, &["run"]);
    assert_one_line_naming(&stderr, "DATABASE_URL");
}
