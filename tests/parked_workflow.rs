//! The parked-event workflow: list parked records, and replay them through
//! the normal path once the cause is fixed, exactly once even when a replay
//! runs twice or concurrently.

mod common;

use std::process::Command;

use common::*;

fn parked(db: &TestDb, args: &[&str]) -> String {
    let output = Command::new(binary())
        .arg("parked")
        .args(args)
        .env("DATABASE_URL", &db.url)
        .output()
        .expect("run parked");
    assert!(
        output.status.success(),
        "parked {args:?} failed: {output:?}"
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn replay_after_creating_the_sku_applies_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let first = order("ORD-NEW-SKU-1", &[("SKU-1", 2), ("SKU-NEW", 3)]);
    let second = order("ORD-NEW-SKU-2", &[("SKU-NEW", 4)]);
    let records = [
        Outgoing::event(&first),
        Outgoing::event(&second),
        Outgoing::raw("X", b"junk"),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 3).await;
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 0, "the whole event was parked");

    let listed = parked(&db, &["list", "--reason", "unknown_sku", "--json"]);
    let entries: Vec<serde_json::Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2);
    assert!(parked(&db, &["list"]).contains("malformed_json"));
    let first_id = entries[0]["id"].as_i64().unwrap().to_string();
    let second_id = entries[1]["id"].as_i64().unwrap().to_string();

    let out = parked(&db, &["replay", &first_id]);
    assert!(out.contains("still parked: unknown_sku"), "{out}");

    db.seed_stock(&[("SKU-NEW", 10)]).await;
    let out = parked(&db, &["replay", &first_id]);
    assert!(out.contains(&format!("{first_id}: applied")), "{out}");
    assert_eq!(db.reserved("SKU-1").await, 2);
    assert_eq!(db.reserved("SKU-NEW").await, 3);

    let out = parked(&db, &["replay", &first_id]);
    assert!(out.contains("already replayed"), "{out}");
    assert_eq!(
        db.reserved("SKU-NEW").await,
        3,
        "a second replay is a no-op"
    );

    // Two replays of the other record at once: exactly one applies it.
    let replay = || {
        Command::new(binary())
            .args(["parked", "replay", "--reason", "unknown_sku"])
            .env("DATABASE_URL", &db.url)
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(replay);
        let b = s.spawn(replay);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a.status.success() && b.status.success());
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout)
    );
    assert_eq!(
        both.matches(&format!("{second_id}: applied")).count(),
        1,
        "{both}"
    );
    assert_eq!(db.reserved("SKU-NEW").await, 7);
    assert_eq!(db.ledger_rows().await, 2);

    let replayed = db
        .count("SELECT count(*) FROM inbox_parked WHERE replayed_at IS NOT NULL")
        .await;
    assert_eq!(replayed, 2, "replayed rows are marked, not deleted");
    assert_eq!(db.count("SELECT count(*) FROM inbox_parked").await, 3);
}
