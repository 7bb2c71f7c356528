//! A member stopped with SIGTERM leaves its group, and the member that
//! stays owns every partition again long before the leaver's session could
//! have ended: the handoff a rolling deploy relies on
//! (docs/deploy.md#deploys-under-load). The session is made 60 s, so a
//! member that went away without leaving (a static member, which never
//! leaves, or a close that skipped the leave) would keep its partitions
//! from the other for a minute; the handoff is given 20 s.

mod common;

use std::time::Duration;

use common::*;

const PARTITIONS: usize = 12;
const SESSION_MS: &str = "60000";
const HANDOFF: Duration = Duration::from_secs(20);

/// The partitions a member owns now: its `/metrics` has one
/// `inbox_consumer_lag_seconds` series per owned partition.
async fn owned(consumer: &ConsumerProcess) -> usize {
    consumer
        .metrics_text()
        .await
        .lines()
        .filter(|line| line.starts_with("inbox_consumer_lag_seconds{"))
        .count()
}

#[tokio::test]
async fn a_member_stopped_by_sigterm_hands_its_partitions_over_before_its_session_ends() {
    let topic = fresh_topic(PARTITIONS as i32).await;
    let db = TestDb::new().await;
    let spec = ConsumerSpec::new(&db, &topic).env("KAFKA_PROPERTY_SESSION_TIMEOUT_MS", SESSION_MS);
    let staying = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the first member owns every partition",
        || async { owned(&staying).await == PARTITIONS },
    )
    .await;
    let leaving = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the second member took its share",
        || async { owned(&leaving).await > 0 && owned(&staying).await < PARTITIONS },
    )
    .await;

    leaving.stop().await;
    wait_until(
        HANDOFF,
        "the member that stays owns every partition again, before the leaver's session could end",
        || async { owned(&staying).await == PARTITIONS },
    )
    .await;
    staying.stop().await;
}
