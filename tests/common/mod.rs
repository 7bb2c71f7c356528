//! Helpers shared by the integration tests: the real services (checked, never
//! mocked), a fresh topic and a fresh database per test, events built with the
//! service's own types, and the consumer run as a real process.
//!
//! A missing service FAILS the test with a message saying how to start it.

#![allow(dead_code)]

pub mod private_kafka;
pub mod private_otelcol;
pub mod private_pg;
pub mod proxy;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use inventory_inbox::event::{OrderLine, OrderPlaced};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};
use uuid::Uuid;

pub const KAFKA: &str = "127.0.0.1:9092";
/// The owner role of the default DATABASE_URL (docs/design.md#configuration); it may create databases.
pub const ADMIN_URL: &str = "postgres://inventory:inventory@127.0.0.1:5432/inventory";

/// Fails (never skips) when PostgreSQL or Kafka is not reachable.
pub fn require_services() {
    for (name, address) in [("PostgreSQL", "127.0.0.1:5432"), ("Kafka", KAFKA)] {
        let reachable = std::net::TcpStream::connect_timeout(
            &address.parse().expect("address"),
            Duration::from_secs(2),
        )
        .is_ok();
        assert!(
            reachable,
            "{name} is not reachable on {address}: run `scripts/services.sh up` (make test does)"
        );
    }
}

/// Waits until `condition` holds, polling; panics with `what` after `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A unique name for a test resource.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::new_v4().simple())
}

/// A test's database and its snapshots are dropped when the test passes, so
/// runs do not pile databases up in the shared cluster (each costs autovacuum
/// and catalog work that slows every later measurement). A failed test keeps
/// them for inspection and says so.
impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept database {} of the failed test", self.name);
            return;
        }
        let name = self.name.clone();
        // Drop runs inside the test's runtime, which cannot be blocked on:
        // the drop gets a thread and a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for dropping the test database");
            runtime.block_on(drop_databases(&name))
        })
        .join();
        if let Ok(Err(error)) = dropped {
            eprintln!("could not drop database {}: {error}", self.name);
        }
    }
}

/// Drops the database `name` and every database named `name_…` (snapshots).
async fn drop_databases(name: &str) -> Result<(), sqlx::Error> {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(ADMIN_URL)
        .await?;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database WHERE datname = $1 OR starts_with(datname, $1 || '_')",
    )
    .bind(name)
    .fetch_all(&admin)
    .await?;
    for database in names {
        sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            .execute(&admin)
            .await?;
    }
    admin.close().await;
    Ok(())
}

/// The login role the consumer runs as in tests: a member of the
/// least-privilege role `inventory_app` that the migrations grant.
pub const APP_ROLE: &str = "inventory_app_test";

/// A fresh database with the service's migrations applied.
pub struct TestDb {
    pub name: String,
    /// As the owner role (migrations, operator commands, test queries).
    pub url: String,
    /// As the least-privilege application role (`run`).
    pub app_url: String,
    pub pool: PgPool,
}

impl TestDb {
    pub async fn new() -> TestDb {
        require_services();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(ADMIN_URL)
            .await
            .expect("connect to PostgreSQL as the owner role");
        let name = unique("inbox_test");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let url = format!("postgres://inventory:inventory@127.0.0.1:5432/{name}");
        let status = Command::new(binary())
            .args(["migrate"])
            .env("DATABASE_URL", &url)
            .status()
            .expect("run inventory-inbox migrate");
        assert!(status.success(), "migrate failed");
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .expect("connect to the test database");
        // Roles are cluster-wide: create the test login role once; tests
        // running at the same moment may race to do it.
        let create = format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                 CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{APP_ROLE}' IN ROLE inventory_app;
               END IF;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
             END $$"
        );
        sqlx::query(&create)
            .execute(&pool)
            .await
            .expect("app login role");
        let app_url = format!("postgres://{APP_ROLE}:{APP_ROLE}@127.0.0.1:5432/{name}");
        TestDb {
            name,
            url,
            app_url,
            pool,
        }
    }

    /// A copy of the whole database as it is now (a backup), by name. No
    /// consumer may be connected; the test's own connections are closed.
    pub async fn snapshot(&self) -> String {
        let copy = format!("{}_backup_{}", self.name, unique("b"));
        // A consumer of the owner role may connect again in between: retry.
        for attempt in 1.. {
            let copied = self
                .try_admin(&[
                    format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()", self.name),
                    format!("CREATE DATABASE {copy} TEMPLATE {}", self.name),
                ])
                .await;
            match copied {
                Ok(()) => break,
                Err(error) if attempt < 20 => {
                    eprintln!("snapshot: {error}; again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("snapshot of {}: {error}", self.name),
            }
        }
        copy
    }

    /// Puts a snapshot back in place of the database (a restore): what was
    /// committed since is gone. No consumer may be connected.
    pub async fn restore(&self, snapshot: &str) {
        self.admin(&[
            format!("DROP DATABASE {} WITH (FORCE)", self.name),
            format!("CREATE DATABASE {} TEMPLATE {snapshot}", self.name),
        ])
        .await;
    }

    async fn try_admin(&self, statements: &[String]) -> Result<(), String> {
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(ADMIN_URL)
            .await
            .expect("connect to PostgreSQL as the owner role");
        for statement in statements {
            if let Err(error) = sqlx::query(statement).execute(&admin).await {
                admin.close().await;
                return Err(format!("{statement}: {error}"));
            }
        }
        admin.close().await;
        Ok(())
    }

    async fn admin(&self, statements: &[String]) {
        if let Err(error) = self.try_admin(statements).await {
            panic!("{error}");
        }
    }

    /// Sets the stock of SKUs (on_hand, nothing reserved).
    pub async fn seed_stock(&self, stock: &[(&str, i64)]) {
        for (sku, on_hand) in stock {
            sqlx::query(
                "INSERT INTO inventory_stock (sku, on_hand) VALUES ($1, $2)
                 ON CONFLICT (sku) DO UPDATE SET on_hand = EXCLUDED.on_hand, reserved = 0",
            )
            .bind(sku)
            .bind(on_hand)
            .execute(&self.pool)
            .await
            .expect("seed stock");
        }
    }

    /// Another session holding a stock row (`FOR UPDATE`) until the returned
    /// transaction is rolled back: a batch that needs the row waits for it,
    /// and gives up after the consumer's lock timeout.
    pub async fn hold_stock_row(&self, sku: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut holder = self.pool.begin().await.expect("begin");
        sqlx::query("SELECT * FROM inventory_stock WHERE sku = $1 FOR UPDATE")
            .bind(sku)
            .execute(&mut *holder)
            .await
            .expect("lock the row");
        holder
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    pub async fn ledger_rows(&self) -> i64 {
        self.count("SELECT count(*) FROM processed_inbox").await
    }

    /// sku -> (on_hand, reserved)
    pub async fn stock(&self) -> BTreeMap<String, (i64, i64)> {
        sqlx::query("SELECT sku, on_hand, reserved FROM inventory_stock ORDER BY sku")
            .fetch_all(&self.pool)
            .await
            .expect("read stock")
            .into_iter()
            .map(|r| (r.get("sku"), (r.get("on_hand"), r.get("reserved"))))
            .collect()
    }

    pub async fn reserved(&self, sku: &str) -> i64 {
        self.stock().await.get(sku).map(|s| s.1).unwrap_or(-1)
    }

    /// (order_id, sku) -> (quantity, status)
    pub async fn reservations(&self) -> BTreeMap<(String, String), (i32, String)> {
        sqlx::query("SELECT order_id, sku, quantity, status FROM order_reservation")
            .fetch_all(&self.pool)
            .await
            .expect("read reservations")
            .into_iter()
            .map(|r| {
                (
                    (r.get("order_id"), r.get("sku")),
                    (r.get("quantity"), r.get("status")),
                )
            })
            .collect()
    }

    /// (reason, offset) of every parked row, by offset.
    pub async fn parked(&self) -> Vec<(String, i64)> {
        sqlx::query(
            "SELECT reason, kafka_offset FROM inbox_parked ORDER BY kafka_partition, kafka_offset",
        )
        .fetch_all(&self.pool)
        .await
        .expect("read parked")
        .into_iter()
        .map(|r| (r.get("reason"), r.get("kafka_offset")))
        .collect()
    }
}

/// A fresh topic with `partitions` partitions.
pub async fn fresh_topic(partitions: i32) -> String {
    fresh_topic_with(partitions, &[]).await
}

/// A fresh topic with topic-level configuration.
pub async fn fresh_topic_with(partitions: i32, config: &[(&str, &str)]) -> String {
    require_services();
    create_topic_at(KAFKA, "orders_test", partitions, config).await
}

/// Creates a topic named `prefix` plus a unique suffix (replication 1) on
/// the given bootstrap servers; returns its name.
pub async fn create_topic_at(
    bootstrap: &str,
    prefix: &str,
    partitions: i32,
    config: &[(&str, &str)],
) -> String {
    create_topic_replicated(bootstrap, prefix, partitions, 1, config).await
}

/// A fresh topic with `replicas` copies of each partition.
pub async fn create_topic_replicated(
    bootstrap: &str,
    prefix: &str,
    partitions: i32,
    replicas: i32,
    config: &[(&str, &str)],
) -> String {
    let name = unique(prefix);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            &[config.iter().fold(
                NewTopic::new(&name, partitions, TopicReplication::Fixed(replicas)),
                |topic, (key, value)| topic.set(key, value),
            )],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create topic");
    for result in results {
        result.expect("topic created");
    }
    name
}

/// A producer for tests: idempotent, acks=all.
pub fn producer() -> FutureProducer {
    producer_at(KAFKA)
}

/// A producer for tests on the given bootstrap servers.
pub fn producer_at(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// One record to produce.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub key: String,
    pub payload: Vec<u8>,
    pub headers: Vec<(String, String)>,
    /// Partition to write to; None lets the key decide.
    pub partition: Option<i32>,
}

impl Outgoing {
    pub fn event(event: &OrderPlaced) -> Outgoing {
        Outgoing {
            key: event.order_id.clone(),
            payload: event.to_json(),
            headers: vec![],
            partition: None,
        }
    }

    pub fn raw(key: &str, payload: &[u8]) -> Outgoing {
        Outgoing {
            key: key.into(),
            payload: payload.to_vec(),
            headers: vec![],
            partition: None,
        }
    }

    pub fn on_partition(mut self, partition: i32) -> Outgoing {
        self.partition = Some(partition);
        self
    }

    pub fn header(mut self, key: &str, value: &str) -> Outgoing {
        self.headers.push((key.into(), value.into()));
        self
    }
}

/// Produces records in order and waits until all are acknowledged.
pub async fn produce(producer: &FutureProducer, topic: &str, records: &[Outgoing]) {
    let mut deliveries = Vec::with_capacity(records.len());
    for record in records {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        let mut message = FutureRecord::to(topic)
            .key(&record.key)
            .payload(&record.payload)
            .headers(headers);
        if let Some(partition) = record.partition {
            message = message.partition(partition);
        }
        loop {
            match producer.send_result(message) {
                Ok(delivery) => {
                    deliveries.push(delivery);
                    break;
                }
                Err((_, returned)) => {
                    message = returned;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    for delivery in deliveries {
        delivery
            .await
            .expect("delivery future")
            .expect("record acknowledged");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
}

/// An order with the given lines, placed now.
pub fn order(order_id: &str, lines: &[(&str, i32)]) -> OrderPlaced {
    order_at(order_id, lines, Utc::now())
}

pub fn order_at(order_id: &str, lines: &[(&str, i32)], occurred_at: DateTime<Utc>) -> OrderPlaced {
    OrderPlaced {
        message_id: Uuid::new_v4(),
        order_id: order_id.into(),
        occurred_at,
        lines: lines
            .iter()
            .map(|(sku, quantity)| OrderLine {
                sku: (*sku).into(),
                quantity: *quantity,
            })
            .collect(),
    }
}

/// A configuration template of the local services (`scripts/services/`),
/// which the private servers read as `scripts/services.sh` does.
pub fn services_template(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/services")
        .join(name)
}

/// The service binary built by cargo for these tests.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_inventory-inbox"))
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The consumer, run as a real process.
pub struct ConsumerProcess {
    pub child: Child,
    pub metrics_port: u16,
    pub log: PathBuf,
}

/// How to start a consumer.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub bootstrap: String,
    pub database_url: String,
    pub topic: String,
    pub group: String,
    pub consumer_name: String,
    pub dlq_topic: String,
    pub extra_env: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl ConsumerSpec {
    pub fn new(db: &TestDb, topic: &str) -> ConsumerSpec {
        ConsumerSpec {
            bootstrap: KAFKA.into(),
            database_url: db.app_url.clone(),
            topic: topic.into(),
            group: unique("group"),
            consumer_name: "inventory-allocation-service".into(),
            dlq_topic: String::new(),
            extra_env: vec![],
            args: vec![],
        }
    }

    pub fn env(mut self, key: &str, value: &str) -> ConsumerSpec {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    /// Runs `inventory-inbox positions ARGS` with the consumer's settings;
    /// its success and its standard output and error.
    pub fn positions(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new(binary())
            .arg("positions")
            .args(args)
            .env("DATABASE_URL", &self.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.bootstrap)
            .env("KAFKA_TOPIC", &self.topic)
            .env("KAFKA_GROUP_ID", &self.group)
            .env("INBOX_CONSUMER_NAME", &self.consumer_name)
            .output()
            .expect("run inventory-inbox positions");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    pub fn start(&self) -> ConsumerProcess {
        let metrics_port = free_port();
        let log_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("consumer-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let log = log_dir.join(format!("{}.log", unique("consumer")));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(binary());
        command
            .arg("run")
            .args(&self.args)
            .env("DATABASE_URL", &self.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.bootstrap)
            .env("KAFKA_TOPIC", &self.topic)
            .env("KAFKA_GROUP_ID", &self.group)
            .env("INBOX_CONSUMER_NAME", &self.consumer_name)
            .env("DLQ_TOPIC", &self.dlq_topic)
            .env("METRICS_ADDR", format!("127.0.0.1:{metrics_port}"))
            .env("RUST_LOG", "info,inventory_inbox=debug")
            .stdout(Stdio::null())
            .stderr(log_file);
        // A stopped member's partitions move quickly in tests: the client's
        // session with the classic protocol; the consumer protocol's is the
        // broker's (scripts/services.sh sets it to 10 s).
        let consumer_protocol = self
            .extra_env
            .iter()
            .any(|(k, v)| k == "GROUP_PROTOCOL" && v == "consumer");
        if !consumer_protocol {
            command
                .env("KAFKA_PROPERTY_SESSION_TIMEOUT_MS", "6000")
                .env("KAFKA_PROPERTY_HEARTBEAT_INTERVAL_MS", "1000");
        }
        for (key, value) in &self.extra_env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start inventory-inbox run");
        ConsumerProcess {
            child,
            metrics_port,
            log,
        }
    }
}

impl ConsumerProcess {
    /// Sends a signal (SIGTERM for a graceful stop, SIGKILL for a crash).
    pub fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Graceful stop; asserts exit status 0 within the timeout.
    pub async fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait(Duration::from_secs(30)).await;
        assert!(
            status.success(),
            "consumer exited with {status:?}; log: {}",
            self.log_text()
        );
    }

    /// Crash: SIGKILL and reap.
    pub async fn kill(mut self) {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(10)).await;
    }

    pub async fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                started.elapsed() < timeout,
                "consumer did not exit within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The body of a GET on the metrics endpoint, or None.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics_port))
            .await
            .ok()?;
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        Some((status, body))
    }

    /// The text of `/metrics`. Waits up to 10 s for the endpoint to answer
    /// (the process may be starting), then fails the test.
    pub async fn metrics_text(&self) -> String {
        let started = Instant::now();
        loop {
            if let Some((200, body)) = self.get("/metrics").await {
                return body;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the consumer's /metrics does not answer; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The value of one series, its name and labels exactly as exposed.
    /// Fails the test when the series is not exposed: every series the
    /// tests read exists from the first scrape, so a missing one is a wrong
    /// name (or a dead endpoint), never a zero.
    pub async fn metric(&self, series: &str) -> f64 {
        let body = self.metrics_text().await;
        series_value(&body, series).unwrap_or_else(|| {
            panic!("{series} is not exposed by the consumer's /metrics:\n{body}")
        })
    }

    /// The sum of every series of a family (`inbox_db_retries_total`: all
    /// reasons). Fails the test when the family is not exposed.
    pub async fn metric_sum(&self, family: &str) -> f64 {
        let body = self.metrics_text().await;
        let values: Vec<f64> = body
            .lines()
            .filter(|line| {
                line.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|line| line.rsplit_once(' ')?.1.parse().ok())
            .collect();
        assert!(
            !values.is_empty(),
            "{family} is not exposed by the consumer's /metrics:\n{body}"
        );
        values.iter().sum()
    }
}

/// The value of one series in a Prometheus text exposition.
pub fn series_value(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until the ledger holds `rows` rows, then watches it for a second:
/// no more may appear.
pub async fn wait_for_ledger(db: &TestDb, rows: i64, timeout: Duration) {
    wait_until(timeout, &format!("{rows} ledger rows"), || async {
        db.ledger_rows().await >= rows
    })
    .await;
    for _ in 0..10 {
        assert_eq!(
            db.ledger_rows().await,
            rows,
            "more ledger rows than expected"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the spec's group has committed `offset` on partition 0 of its
/// (one-partition) topic.
pub async fn wait_committed(spec: &ConsumerSpec, offset: i64) {
    wait_until(
        Duration::from_secs(60),
        &format!("offset {offset} committed"),
        || async { committed_offsets(&spec.group, &spec.topic, 1)[&0] == offset },
    )
    .await;
}

/// Waits until the group's committed offsets over all partitions add up to
/// `total` records (each partition's log starts at 0).
pub async fn wait_all_committed(
    group: &str,
    topic: &str,
    partitions: i32,
    total: i64,
    timeout: Duration,
) {
    wait_until(timeout, &format!("{total} records committed"), || async {
        committed_offsets(group, topic, partitions)
            .values()
            .filter(|offset| **offset > 0)
            .sum::<i64>()
            == total
    })
    .await;
}

/// Committed offsets of a group for a topic, per partition (-1001 = none).
pub fn committed_offsets(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    committed_offsets_at(KAFKA, group, topic, partitions)
}

/// Committed offsets of a group on the given bootstrap servers.
pub fn committed_offsets_at(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    for partition in 0..partitions {
        list.add_partition(topic, partition);
    }
    consumer
        .committed_offsets(list, Duration::from_secs(10))
        .expect("committed offsets")
        .elements()
        .iter()
        .map(|e| {
            (
                e.partition(),
                match e.offset() {
                    Offset::Offset(o) => o,
                    _ => -1001,
                },
            )
        })
        .collect()
}

/// A stream of unique orders with exact duplicates, and what the database
/// must show once it has been consumed.
pub struct Traffic {
    /// What is produced, in order.
    pub records: Vec<Outgoing>,
    pub unique_events: i64,
    pub order_lines: usize,
    /// sku -> sum of the quantities of the unique orders.
    pub reserved: BTreeMap<String, i64>,
}

impl Traffic {
    /// `unique` orders `PREFIX-i` of 1–3 lines over `skus` (line k names SKU
    /// (i + 2k) mod len, distinct within the order when there are at least
    /// five), with an exact copy of the event sent `lag` events earlier after
    /// every `every` events: a producer retry or a replay.
    pub fn orders(prefix: &str, skus: &[&str], unique: usize, every: usize, lag: usize) -> Traffic {
        let mut reserved: BTreeMap<String, i64> = BTreeMap::new();
        let mut order_lines = 0;
        let mut sent = Vec::with_capacity(unique);
        let mut records = Vec::with_capacity(unique + unique / every);
        for i in 0..unique {
            let lines: Vec<(&str, i32)> = (0..=i % 3)
                .map(|k| (skus[(i + 2 * k) % skus.len()], 1 + ((i * 7 + k) % 4) as i32))
                .collect();
            for (sku, quantity) in &lines {
                *reserved.entry((*sku).to_owned()).or_default() += i64::from(*quantity);
            }
            order_lines += lines.len();
            let record = Outgoing::event(&order(&format!("{prefix}-{i}"), &lines));
            sent.push(record.clone());
            records.push(record);
            if i % every == every - 1 && i >= lag {
                records.push(sent[i - lag].clone());
            }
        }
        Traffic {
            records,
            unique_events: unique as i64,
            order_lines,
            reserved,
        }
    }

    /// Every unique order applied exactly once, nothing parked.
    pub async fn assert_applied_once(&self, db: &TestDb) {
        assert_eq!(db.ledger_rows().await, self.unique_events, "ledger rows");
        let reserved: BTreeMap<String, i64> = db
            .stock()
            .await
            .into_iter()
            .map(|(sku, (_, reserved))| (sku, reserved))
            .collect();
        assert_eq!(reserved, self.reserved, "per-SKU reserved stock");
        let reservations = db.reservations().await;
        assert_eq!(
            reservations.len(),
            self.order_lines,
            "order_reservation rows"
        );
        assert!(
            reservations
                .values()
                .all(|(_, status)| status == "reserved"),
            "every line reserved"
        );
        assert_eq!(db.parked().await, vec![], "nothing parked");
    }

    /// Produces the records in chunks of `per_tick` every `tick`.
    pub fn produce_paced(
        &self,
        producer: FutureProducer,
        topic: &str,
        per_tick: usize,
        tick: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let (records, topic) = (self.records.clone(), topic.to_owned());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            for (n, chunk) in records.chunks(per_tick).enumerate() {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep_until(started + tick * (n as u32 + 1)).await;
            }
        })
    }
}

/// Deletes the records of `topic` before the given offset of each partition
/// (Kafka's DeleteRecords, as `kafka-delete-records.sh` does): the log start
/// moves there, as retention would have moved it.
pub fn delete_records_before(topic: &str, before: &[(i32, i64)]) {
    use rdkafka::bindings as rdsys;
    use rdkafka::producer::BaseProducer;
    use rdkafka::{Offset, TopicPartitionList};
    let client: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", KAFKA)
        .create()
        .expect("admin client");
    let mut offsets = TopicPartitionList::new();
    for (partition, offset) in before {
        offsets
            .add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .expect("offset");
    }
    // SAFETY: every handle made here is destroyed here; librdkafka copies
    // the list, and the result event is read before it is destroyed.
    let (error, message) = unsafe {
        let rk = client.client().native_ptr();
        let queue = rdsys::rd_kafka_queue_new(rk);
        let mut request = rdsys::rd_kafka_DeleteRecords_new(offsets.ptr());
        rdsys::rd_kafka_DeleteRecords(rk, &mut request, 1, std::ptr::null(), queue);
        rdsys::rd_kafka_DeleteRecords_destroy(request);
        let event = rdsys::rd_kafka_queue_poll(queue, 30_000);
        assert!(!event.is_null(), "DeleteRecords: no answer within 30 s");
        let mut error = rdsys::rd_kafka_event_error(event);
        let mut message = String::new();
        if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            let result = rdsys::rd_kafka_event_DeleteRecords_result(event);
            let list = rdsys::rd_kafka_DeleteRecords_result_offsets(result);
            for i in 0..(*list).cnt as usize {
                let element = *(*list).elems.add(i);
                if element.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    error = element.err;
                    message = format!("partition {}", element.partition);
                }
            }
        } else {
            message = std::ffi::CStr::from_ptr(rdsys::rd_kafka_event_error_string(event))
                .to_string_lossy()
                .into_owned();
        }
        rdsys::rd_kafka_event_destroy(event);
        rdsys::rd_kafka_queue_destroy(queue);
        (error, message)
    };
    assert_eq!(
        error,
        rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
        "DeleteRecords failed: {message}"
    );
}
