//! What the operator commands say can be acted on (SPEC §17): a refusal is
//! one line naming what to fix and exits non-zero, never a line of failure
//! followed by one of success; a count is of what there is; a database or
//! a topic that cannot be reached, or refuses, is named once, by the
//! setting that points at it, never with a password or librdkafka's raw
//! words.

mod common;

use std::process::Command;

use common::*;

/// `inventory-inbox ARGS` with `env`: its exit code, stdout and stderr.
fn inbox(env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(binary());
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run inventory-inbox");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The lines of `text` that say something.
fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[tokio::test]
async fn replaying_a_record_that_does_not_exist_is_one_line_and_fails() {
    let db = TestDb::new().await;
    let (code, stdout, stderr) = inbox(&[("DATABASE_URL", &db.url)], &["parked", "replay", "999"]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(stdout.trim().is_empty(), "nothing said replayed: {stdout}");
    let said = lines(&stderr);
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("no parked record 999") && said[0].contains("INBOX_CONSUMER_NAME"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_cut_list_of_parked_records_says_of_how_many_with_each_message_and_order() {
    let db = TestDb::new().await;
    // 97 parked records: the first with its event's payload (its order
    // decoded from it), the others garbage under the key of their order.
    let event = order("ORD-DECODED", &[("SKU-1", 1)]);
    sqlx::query(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   message_id, reason, error, payload, record_key)
         SELECT current_date, 'inventory-allocation-service', 'orders', 0, g,
                CASE WHEN g = 1 THEN $1 END, 'unknown_sku', 'unknown SKU',
                CASE WHEN g = 1 THEN $2 ELSE 'junk'::bytea END,
                convert_to('ORD-KEY-' || g, 'UTF8')
         FROM generate_series(1, 97) AS g",
    )
    .bind(event.message_id)
    .bind(event.to_json())
    .execute(&db.pool)
    .await
    .expect("park 97 records");
    let env = [("DATABASE_URL", db.url.as_str())];

    let (code, stdout, stderr) = inbox(&env, &["parked", "list", "--limit", "10"]);
    assert_eq!(code, 0, "{stderr}");
    let shown = lines(&stdout);
    assert_eq!(shown.len(), 11, "{stdout}");
    assert_eq!(shown[10], "10 of 97 parked record(s)");
    assert!(
        shown[0].contains(&format!("message {}", event.message_id))
            && shown[0].contains("order ORD-DECODED"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].contains("message -") && shown[1].contains("order ORD-KEY-2"),
        "{}",
        shown[1]
    );

    let (_, stdout, _) = inbox(&env, &["parked", "list"]);
    assert!(stdout.ends_with("97 parked record(s)\n"), "{stdout}");
    let (_, stdout, _) = inbox(
        &env,
        &[
            "parked",
            "list",
            "--reason",
            "malformed_json",
            "--limit",
            "0",
        ],
    );
    assert_eq!(stdout, "0 parked record(s)\n");
    let (_, stdout, _) = inbox(&env, &["parked", "list", "--json", "--limit", "1"]);
    let entry: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(entry["order_id"], "ORD-DECODED");
}

#[tokio::test]
async fn a_first_migrate_says_nothing_of_a_retention_change() {
    require_services();
    let admin = sqlx::PgPool::connect(ADMIN_URL).await.unwrap();
    let name = unique("never_migrated");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await
        .unwrap();
    let url = format!("postgres://inventory:inventory@127.0.0.1:5432/{name}");
    let (code, _, stderr) = inbox(&[("DATABASE_URL", &url)], &["migrate"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("retention changed"), "{stderr}");
    // A change of it later is said, once.
    let (code, _, stderr) = inbox(
        &[("DATABASE_URL", &url), ("INBOX_PARKED_PAYLOAD_DAYS", "3")],
        &["migrate"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.matches("retention changed").count(), 1, "{stderr}");
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_wrong_password_is_said_once_naming_database_url() {
    let db = TestDb::new().await;
    let url = db
        .url
        .replace("inventory:inventory@", "inventory:Wr0ng-S3cret@");
    for command in [&["migrate"][..], &["parked", "list"], &["maintain"]] {
        let (code, stdout, stderr) = inbox(&[("DATABASE_URL", &url)], command);
        assert_ne!(code, 0, "{command:?}: {stdout}");
        let said = lines(&stderr);
        assert_eq!(said.len(), 1, "{command:?}: {stderr}");
        assert!(said[0].starts_with("error: DATABASE_URL: "), "{stderr}");
        assert_eq!(
            said[0].matches("password authentication failed").count(),
            1,
            "{stderr}"
        );
        assert!(!stderr.contains("Wr0ng-S3cret"), "{stderr}");
    }
}

#[test]
fn an_unreachable_database_is_named_by_host_and_port() {
    let port = free_port();
    let url = format!("postgres://inventory:S3cret-pw@127.0.0.1:{port}/inventory");
    for command in [&["migrate"][..], &["parked", "list"]] {
        let (code, _, stderr) = inbox(&[("DATABASE_URL", &url)], command);
        assert_ne!(code, 0, "{command:?}");
        let said = lines(&stderr);
        assert_eq!(said.len(), 1, "{command:?}: {stderr}");
        assert!(
            said[0].contains(&format!("DATABASE_URL's 127.0.0.1:{port}"))
                && said[0].contains("connection refused"),
            "{stderr}"
        );
        assert!(!stderr.contains("S3cret-pw"), "{stderr}");
    }
}

#[tokio::test]
async fn a_topic_or_partition_the_cluster_lacks_is_named_not_in_librdkafkas_words() {
    let db = TestDb::new().await;
    let topic = fresh_topic(2).await;
    let missing = unique("orders_test_missing");
    for (env_topic, command, said) in [
        (
            missing.as_str(),
            &["positions", "list"][..],
            format!("KAFKA_TOPIC {missing:?} does not exist on the cluster"),
        ),
        (
            missing.as_str(),
            &["inspect", "--offset", "0:0"],
            format!("KAFKA_TOPIC {missing:?} does not exist on the cluster"),
        ),
        (
            topic.as_str(),
            &["inspect", "--offset", "7:0"],
            format!("KAFKA_TOPIC {topic:?} has no partition 7 (its partitions: 0 to 1)"),
        ),
    ] {
        let env = [
            ("DATABASE_URL", db.url.as_str()),
            ("KAFKA_BOOTSTRAP_SERVERS", kafka()),
            ("KAFKA_TOPIC", env_topic),
        ];
        let (code, _, stderr) = inbox(&env, command);
        assert_ne!(code, 0, "{command:?}: {stderr}");
        let said_lines = lines(&stderr);
        assert_eq!(said_lines.len(), 1, "{command:?}: {stderr}");
        assert!(
            said_lines[0].starts_with(&format!("error: {said}")),
            "{stderr}"
        );
        assert!(!stderr.contains("Meta data fetch error"), "{stderr}");
    }
}
