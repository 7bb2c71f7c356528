//! In-process tests of the loop: a real PostgreSQL database of the test's
//! own (`#[sqlx::test]`) and librdkafka's mock cluster in place of a broker
//! (the black-box tests in `tests/` run the binary against a real one).
//! They check how rounds form (the linger), and that a batch the database
//! cannot take is retried, nothing committed, until it can.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use rdkafka::config::{ClientConfig, FromClientConfigAndContext};
use rdkafka::consumer::Consumer;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

use super::*;
use crate::event::{OrderLine, OrderPlaced};
use crate::kafka::GroupProtocol;
use crate::kafka::KafkaSettings;
use crate::store::{self, Retention};
use std::sync::atomic::Ordering;

const TOPIC: &str = "orders";

/// A pipeline running against the mock cluster and the test's database.
/// The consumer is declared first, so it is dropped (closed) before the
/// cluster it talks to.
struct Running {
    consumer: Arc<InboxConsumer>,
    cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    metrics: Metrics,
    stop: crate::shutdown::Trigger,
    task: tokio::task::JoinHandle<Result<(), PipelineError>>,
}

/// The store's pool on the test's database, with the consumer's session
/// settings (a short lock timeout, so a held row fails a batch quickly).
async fn inbox(connect: &PgConnectOptions) -> Arc<Inbox> {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL (.cargo/config.toml)");
    let database = connect.get_database().expect("the test database");
    let url = format!("{}/{database}", &base[..base.rfind('/').expect("a URL")]);
    let pool = store::connect(
        store::Connection {
            url: &url,
            statement_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_millis(200),
            pooler: store::Pooler::None,
        },
        1,
    )
    .await
    .expect("pool");
    let retention = Retention {
        ledger_days: 14,
        parked_days: 30,
        parked_payload_days: 0,
        reservation_days: 30,
        detach_reservations: false,
    };
    store::migrate(&pool, retention).await.expect("migrate");
    sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ('SKU-A', 1000, 0)")
        .execute(&pool)
        .await
        .expect("seed");
    Arc::new(Inbox::new(pool, "pipeline-tests".into()))
}

async fn start(inbox: Arc<Inbox>, linger: Duration) -> Running {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic(TOPIC, 1, 1).expect("topic");
    let kafka = KafkaSettings {
        bootstrap_servers: cluster.bootstrap_servers(),
        group_protocol: GroupProtocol::Classic,
        properties: vec![],
    };
    let metrics = Metrics::new();
    let offsets = Arc::new(CommittedOffsets::default());
    let context = InboxContext {
        offsets: offsets.clone(),
        metrics: metrics.clone(),
        positions: None,
    };
    let consumer = Arc::new(
        InboxConsumer::from_config_and_context(&kafka.consumer_config("pipeline-tests"), context)
            .expect("consumer"),
    );
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    let (stop, shutdown) = crate::shutdown::channel();
    let pipeline = Pipeline {
        consumer: consumer.clone(),
        offsets,
        inbox,
        dlq: None,
        metrics: metrics.clone(),
        settings: BatchSettings {
            max_records: 100,
            linger,
            lanes: 1,
            lanes_from_round_trip: Duration::ZERO,
            poison_breaker: crate::breaker::BreakerSettings::off(),
        },
        telemetry: Telemetry::off(),
        group: "pipeline-tests".into(),
    };
    let task = tokio::spawn(pipeline.run(shutdown));
    let running = Running {
        consumer,
        cluster,
        metrics,
        stop,
        task,
    };
    running
        .until("the partition is assigned", |r| {
            r.metrics
                .readiness
                .partitions_assigned
                .load(Ordering::Relaxed)
        })
        .await;
    running
}

impl Running {
    async fn produce(&self, order_id: &str) {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", self.cluster.bootstrap_servers())
            .create()
            .expect("producer");
        let payload = order_placed(order_id).to_json();
        producer
            .send(
                FutureRecord::to(TOPIC).key(order_id).payload(&payload),
                Duration::from_secs(5),
            )
            .await
            .expect("delivered");
    }

    /// Sends the events of `order_ids` together, one producer, and waits
    /// until each is delivered: they reach the consumer back to back.
    async fn produce_all(&self, order_ids: &[&str]) {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", self.cluster.bootstrap_servers())
            .set("linger.ms", "100")
            .create()
            .expect("producer");
        let payloads: Vec<(String, Vec<u8>)> = order_ids
            .iter()
            .map(|order_id| (order_id.to_string(), order_placed(order_id).to_json()))
            .collect();
        let sent = payloads.iter().map(|(key, payload)| {
            producer.send(
                FutureRecord::to(TOPIC).key(key).payload(payload),
                Duration::from_secs(5),
            )
        });
        for delivery in futures::future::join_all(sent).await {
            delivery.expect("delivered");
        }
    }

    async fn until(&self, what: &str, condition: impl Fn(&Running) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !condition(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn batches(&self) -> (u64, f64) {
        let sizes = &self.metrics.batch_size;
        (sizes.get_sample_count(), sizes.get_sample_sum())
    }

    fn committed(&self) -> Offset {
        let mut list = TopicPartitionList::new();
        list.add_partition(TOPIC, 0);
        let committed = self
            .consumer
            .committed_offsets(list, Duration::from_secs(5))
            .expect("committed offsets");
        committed.elements()[0].offset()
    }

    async fn stop(self) {
        self.stop.ask();
        let ran = tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the pipeline stops")
            .expect("the task ends");
        assert!(ran.is_ok(), "{ran:?}");
    }
}

/// An event of one line of SKU-A.
fn order_placed(order_id: &str) -> OrderPlaced {
    OrderPlaced {
        message_id: Uuid::new_v4(),
        order_id: order_id.into(),
        occurred_at: Utc::now(),
        lines: vec![OrderLine {
            sku: "SKU-A".into(),
            quantity: 1,
        }],
    }
}

async fn ledger_rows(pool: &store::DbPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM processed_inbox")
        .fetch_one(pool)
        .await
        .expect("count")
}

/// An idle consumer lingers for more after a first record: records that
/// follow within the linger, each soon after the one before, share its
/// transaction.
#[sqlx::test(migrations = false)]
async fn records_within_the_linger_of_an_idle_consumer_share_a_batch(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let inbox = inbox(&connect).await;
    let running = start(inbox.clone(), Duration::from_millis(5_000)).await;
    running.produce_all(&["O-0", "O-1", "O-2"]).await;
    running
        .until("one batch committed", |r| r.batches().0 >= 1)
        .await;
    assert_eq!(running.batches(), (1, 3.0), "the three in one batch");
    assert_eq!(ledger_rows(inbox.pool()).await, 3);
    running
        .until("its offsets committed", |r| {
            r.committed() == Offset::Offset(3)
        })
        .await;
    running.stop().await;
}

/// An idle consumer's round does not wait out the whole linger when Kafka
/// brings nothing more: it goes once nothing came for a tenth of it (here
/// 4 s of 40, where waiting for the condition gives up after 30).
#[sqlx::test(migrations = false)]
async fn an_idle_consumers_round_goes_once_kafka_is_quiet(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let inbox = inbox(&connect).await;
    let running = start(inbox.clone(), Duration::from_secs(40)).await;
    running.produce("O-1").await;
    running
        .until("the one record's batch committed", |r| r.batches().0 >= 1)
        .await;
    assert_eq!(running.batches(), (1, 1.0));
    assert_eq!(ledger_rows(inbox.pool()).await, 1);
    running.stop().await;
}

/// A batch behind a held stock row fails (lock timeout), is retried while
/// nothing is committed, and is applied once the row is free.
#[sqlx::test(migrations = false)]
async fn a_batch_the_database_cannot_take_is_retried_and_nothing_committed(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let inbox = inbox(&connect).await;
    let mut holder = inbox.pool().begin().await.expect("begin");
    sqlx::query("SELECT * FROM inventory_stock WHERE sku = 'SKU-A' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .expect("hold the row");
    let running = start(inbox.clone(), Duration::from_millis(5)).await;
    running.produce("O-1").await;
    running.produce("O-2").await;
    running
        .until("two retries", |r| {
            r.metrics
                .db_retries
                .with_label_values(&["lock_not_available"])
                .get()
                >= 2
        })
        .await;
    assert_eq!(ledger_rows(inbox.pool()).await, 0);
    assert_eq!(running.committed(), Offset::Invalid, "nothing committed");
    assert!(
        !running.metrics.readiness.is_ready(),
        "unready while the database refuses"
    );

    holder.rollback().await.expect("free the row");
    running
        .until("applied and committed", |r| {
            r.committed() == Offset::Offset(2)
        })
        .await;
    assert_eq!(ledger_rows(inbox.pool()).await, 2);
    assert!(running.metrics.readiness.is_ready());
    running.stop().await;
}
