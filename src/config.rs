//! Configuration in one place (docs/design.md#configuration): every option is a flag and an
//! environment variable, validated at start-up. A bad value is reported on
//! one line naming the variable; a secret (the password in `DATABASE_URL`, a
//! `KAFKA_PROPERTY_*` value) is never echoed.

use std::net::SocketAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use uuid::Uuid;

use crate::event::ParkReason;
use crate::kafka::{GroupProtocol, KafkaSettings};
use crate::store::Retention;

/// Prefix of environment variables passed to librdkafka:
/// `KAFKA_PROPERTY_SASL_PASSWORD=x` sets `sasl.password=x`.
pub const KAFKA_PROPERTY_PREFIX: &str = "KAFKA_PROPERTY_";

/// Properties an operator may not override: they carry the guarantee that an
/// offset is committed only after the database commit.
const PROTECTED_PROPERTIES: [&str; 3] =
    ["enable.auto.commit", "enable.auto.offset.store", "group.id"];

#[derive(Debug, Parser)]
#[command(
    name = "inventory-inbox",
    version,
    about = "Reserves stock in PostgreSQL exactly once per OrderPlaced event from Kafka"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume the topic and apply every event exactly once.
    Run(RunArgs),
    /// Apply the database migrations and create the ledger partitions.
    Migrate(DatabaseArgs),
    /// Create ledger partitions ahead, drop those past the retention, prune
    /// parked records (for cron; `run` also does it hourly).
    Maintain(DatabaseArgs),
    /// Inspect and replay parked records.
    Parked {
        #[command(subcommand)]
        command: ParkedCommand,
    },
    /// The positions in the database where partitions start (docs/design.md#positions).
    Positions {
        #[command(subcommand)]
        command: PositionsCommand,
    },
    /// The poison breaker (`INBOX_POISON_BREAKER_*`): whether it holds
    /// consumption, and resuming it.
    Breaker {
        #[command(subcommand)]
        command: BreakerCommand,
    },
    /// What the database holds of one event, order or record: its ledger
    /// row, order lines, parked rows, the partition's position, and the
    /// verdict in one line (docs/runbook.md).
    Inspect(InspectArgs),
    /// The operator console in the browser (docs/operations.md#console):
    /// parked records, search, positions, the breaker; read-only unless
    /// INBOX_CONSOLE_TOKEN is set and the browser signed in with it.
    Console(ConsoleArgs),
}

/// `inventory-inbox console`: the settings of `run`, and where it listens.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub run: Box<RunArgs>,
    /// Where the console listens (HTTP). Loopback unless a token is set.
    #[arg(long, env = "INBOX_CONSOLE_ADDR", default_value = "127.0.0.1:9465")]
    pub inbox_console_addr: SocketAddr,
    /// The token a browser signs in with to act (replay, positions, resume)
    /// and to see payloads and headers; unset: read-only.
    #[arg(long, env = "INBOX_CONSOLE_TOKEN", hide_env_values = true)]
    pub inbox_console_token: Option<String>,
}

impl ConsoleArgs {
    /// The token, when one is set (an empty one is none).
    pub fn token(&self) -> Option<&str> {
        self.inbox_console_token
            .as_deref()
            .filter(|token| !token.trim().is_empty())
    }

    /// A console that binds beyond loopback needs a token: without one,
    /// anyone who reaches the port would read every parked record's
    /// metadata. Said in one line naming both settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.inbox_console_addr.ip().is_loopback() && self.token().is_none() {
            return Err(ConfigError(format!(
                "INBOX_CONSOLE_ADDR={} is not a loopback address and INBOX_CONSOLE_TOKEN is not set: set a token, or bind 127.0.0.1",
                self.inbox_console_addr
            )));
        }
        if self
            .token()
            .is_some_and(|token| token.len() < MIN_CONSOLE_TOKEN)
        {
            return Err(ConfigError(format!(
                "INBOX_CONSOLE_TOKEN is shorter than {MIN_CONSOLE_TOKEN} characters (value not shown)"
            )));
        }
        Ok(())
    }
}

/// The shortest console token taken: one guessed by trying is no token.
const MIN_CONSOLE_TOKEN: usize = 16;

#[derive(Debug, Subcommand)]
pub enum BreakerCommand {
    /// Whether the breaker holds consumption, since when and why.
    Status {
        #[command(flatten)]
        target: ParkedTarget,
    },
    /// Resume consumption: every consumer held by the breaker takes records
    /// again within seconds, from where it stopped.
    Resume {
        #[command(flatten)]
        target: ParkedTarget,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["event", "order", "offset"])))]
pub struct InspectArgs {
    #[command(flatten)]
    pub run: Box<RunArgs>,
    /// An event, by its message id (the CloudEvents id).
    #[arg(long, value_name = "ID")]
    pub event: Option<Uuid>,
    /// An order, by its order id.
    #[arg(long, value_name = "ID")]
    pub order: Option<String>,
    /// A record of the topic, by its position, read back from Kafka while
    /// the topic holds it.
    #[arg(long, value_name = "PARTITION:OFFSET", value_parser = crate::inspect::parse_record)]
    pub offset: Option<(i32, i64)>,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PositionsCommand {
    /// The consumer's position per partition of the topic, with the
    /// partition's earliest and end offsets and the group's committed one.
    List {
        #[command(flatten)]
        run: Box<RunArgs>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Move positions on purpose (a re-read, or a skip), also while
    /// consumers run: a running consumer reads the partition from the new
    /// position within 10 s, and a batch of it in flight is refused, not
    /// applied; a stopped one starts there.
    #[command(group(clap::ArgGroup::new("target").required(true)))]
    Set {
        #[command(flatten)]
        run: Box<RunArgs>,
        /// A partition to move (repeatable); every partition of the topic
        /// when absent.
        #[arg(long = "partition", value_name = "P")]
        partitions: Vec<i32>,
        /// The next offset to read: a number, `earliest` or `latest`.
        #[arg(long, value_parser = parse_offset, group = "target")]
        offset: Option<OffsetTarget>,
        /// The group's committed offsets in Kafka (KAFKA_GROUP_ID), where it
        /// has one.
        #[arg(long, group = "target")]
        to_kafka: bool,
    },
}

/// Where `positions set --offset` moves a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetTarget {
    At(i64),
    /// The partition's log start: a re-read of all the topic still holds.
    Earliest,
    /// The partition's end: a skip of everything not read yet.
    Latest,
}

fn parse_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err("expected a share greater than 0 and at most 1 (1: never)".into()),
    }
}

fn parse_offset(text: &str) -> Result<OffsetTarget, String> {
    match text {
        "earliest" => Ok(OffsetTarget::Earliest),
        "latest" => Ok(OffsetTarget::Latest),
        number => match number.parse::<i64>() {
            Ok(offset) if offset >= 0 => Ok(OffsetTarget::At(offset)),
            _ => Err("expected an offset >= 0, `earliest` or `latest`".into()),
        },
    }
}

#[derive(Debug, Subcommand)]
pub enum ParkedCommand {
    /// List parked records, oldest first.
    List {
        #[command(flatten)]
        target: ParkedTarget,
        /// Only this reason code.
        #[arg(long, value_parser = parse_reason)]
        reason: Option<ParkReason>,
        /// Only records parked since this time (RFC 3339, or YYYY-MM-DD).
        #[arg(long, value_parser = parse_since)]
        since: Option<DateTime<Utc>>,
        /// At most this many records.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Re-run parked records through the normal path (e.g. after their SKU
    /// was created): one record by id, or every unreplayed one of a reason.
    #[command(group(clap::ArgGroup::new("records").required(true)))]
    Replay {
        #[command(flatten)]
        target: ParkedTarget,
        /// The parked record's id (see `parked list`).
        #[arg(group = "records")]
        id: Option<i64>,
        /// Every parked record of this reason not replayed yet.
        #[arg(long, value_parser = parse_reason, group = "records")]
        reason: Option<ParkReason>,
    },
}

/// Whose parked records.
#[derive(Debug, Clone, Args)]
pub struct ParkedTarget {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Logical consumer name in the ledger.
    #[arg(
        long,
        env = "INBOX_CONSUMER_NAME",
        default_value = "inventory-allocation-service"
    )]
    pub inbox_consumer_name: String,
}

fn parse_reason(code: &str) -> Result<ParkReason, String> {
    ParkReason::from_code(code).ok_or_else(|| {
        let codes: Vec<_> = ParkReason::ALL.iter().map(|r| r.as_str()).collect();
        format!("unknown reason code (one of: {})", codes.join(", "))
    })
}

fn parse_since(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|day| day.and_time(chrono::NaiveTime::MIN).and_utc())
        .map_err(|_| "expected RFC 3339 or YYYY-MM-DD".to_owned())
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL (its password is never logged).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://inventory:inventory@127.0.0.1:5432/inventory",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub database_url: String,

    /// Days of ledger partitions kept behind today: the dedup window.
    #[arg(long, env = "INBOX_RETENTION_DAYS", default_value_t = 14,
          value_parser = clap::value_parser!(i32).range(1..=3650))]
    pub inbox_retention_days: i32,

    /// Days a parked record is kept before maintenance deletes it.
    #[arg(long, env = "INBOX_PARKED_RETENTION_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(i32).range(1..=3650))]
    pub inbox_parked_retention_days: i32,

    /// Days after which a parked record's payload (order data) is cleared,
    /// its row kept until INBOX_PARKED_RETENTION_DAYS (0: kept as long as
    /// the row). A week: time to fix the cause and replay it.
    #[arg(long, env = "INBOX_PARKED_PAYLOAD_DAYS", default_value_t = 7,
          value_parser = clap::value_parser!(i32).range(0..=3650))]
    pub inbox_parked_payload_days: i32,

    /// Days of reservations (`order_reservation`, one partition a day) kept
    /// behind today; at least INBOX_RETENTION_DAYS [default: the same].
    #[arg(long, env = "INBOX_RESERVATION_RETENTION_DAYS",
          value_parser = clap::value_parser!(i32).range(1..=3650))]
    pub inbox_reservation_retention_days: Option<i32>,

    /// What becomes of a day of reservations past its retention: `drop`, or
    /// `detach` (left as a table of its own, for an archive to take).
    #[arg(long, env = "INBOX_RESERVATION_EXPIRY", default_value = "drop",
          value_parser = ["drop", "detach"])]
    pub inbox_reservation_expiry: String,

    /// Longest a statement may run on the server, in ms (0: no limit). A
    /// batch that hits it is rolled back and retried (`query_canceled`).
    #[arg(long, env = "DB_STATEMENT_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u32).range(0..=86_400_000))]
    pub db_statement_timeout_ms: u32,

    /// Longest a statement waits for a lock, in ms (0: no limit): a batch
    /// behind a stuck session, or maintenance's DROP of a ledger partition
    /// behind the batches, gives up and is retried instead of queueing
    /// everything behind it (`lock_not_available`).
    #[arg(long, env = "DB_LOCK_TIMEOUT_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u32).range(0..=86_400_000))]
    pub db_lock_timeout_ms: u32,

    /// What stands between the service and PostgreSQL: `none`, or a
    /// connection pooler such as PgBouncer in `session` or `transaction`
    /// pooling (docs/deploy.md "Behind a connection pooler"). The pool mode cannot
    /// be seen from here; a wrong `session` breaks on a transaction pooler.
    #[arg(long, env = "INBOX_DB_POOLER", value_enum, default_value = "none")]
    pub inbox_db_pooler: crate::store::Pooler,
}

impl DatabaseArgs {
    /// Where and how to connect.
    pub fn connection(&self) -> crate::store::Connection<'_> {
        crate::store::Connection {
            url: &self.database_url,
            statement_timeout: Duration::from_millis(self.db_statement_timeout_ms.into()),
            lock_timeout: Duration::from_millis(self.db_lock_timeout_ms.into()),
            pooler: self.inbox_db_pooler,
        }
    }

    /// How long any statement waits for the database's answer: its
    /// `statement_timeout` and 5 s more (the server ends a statement that
    /// runs too long; this ends one whose answer never comes), 35 s without
    /// one.
    pub fn answer_within(&self) -> Duration {
        match self.db_statement_timeout_ms {
            0 => Duration::from_secs(35),
            ms => Duration::from_millis(u64::from(ms)) + Duration::from_secs(5),
        }
    }

    /// Days of reservations kept: INBOX_RESERVATION_RETENTION_DAYS, else the
    /// dedup window's.
    pub fn reservation_retention_days(&self) -> i32 {
        self.inbox_reservation_retention_days
            .unwrap_or(self.inbox_retention_days)
    }

    pub fn retention(&self) -> Retention {
        Retention {
            ledger_days: self.inbox_retention_days,
            parked_days: self.inbox_parked_retention_days,
            parked_payload_days: self.inbox_parked_payload_days,
            reservation_days: self.reservation_retention_days(),
            detach_reservations: self.inbox_reservation_expiry == "detach",
        }
    }

    /// A PostgreSQL URL that parses, and timeouts a statement can meet; the
    /// message never contains the URL.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, ms) in [
            ("DB_STATEMENT_TIMEOUT_MS", self.db_statement_timeout_ms),
            ("DB_LOCK_TIMEOUT_MS", self.db_lock_timeout_ms),
        ] {
            if (1..MIN_TIMEOUT_MS).contains(&ms) {
                return Err(ConfigError(format!(
                    "{name}={ms} is too short for any statement: 0 for none, else at least {MIN_TIMEOUT_MS}"
                )));
            }
        }
        if self.reservation_retention_days() < self.inbox_retention_days {
            return Err(ConfigError(format!(
                "INBOX_RESERVATION_RETENTION_DAYS={} is shorter than INBOX_RETENTION_DAYS={}: the reservations must cover the dedup window",
                self.reservation_retention_days(),
                self.inbox_retention_days
            )));
        }
        let url = self.database_url.trim();
        let scheme_ok = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if !scheme_ok || url.parse::<sqlx::postgres::PgConnectOptions>().is_err() {
            return Err(ConfigError(
                "DATABASE_URL is not a valid postgres:// URL (value not shown)".into(),
            ));
        }
        Ok(())
    }
}

/// Properties librdkafka refuses with `group.protocol=consumer`: the broker
/// owns them (`group.consumer.*` settings of the broker or the group).
const CLASSIC_ONLY_PROPERTIES: [&str; 3] = [
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
];

/// What a DLQ copy carries of the record's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DlqPayload {
    /// The payload as received: a reader of the DLQ can fix and re-send it.
    Full,
    /// No payload (the order data stays in the database, under
    /// INBOX_PARKED_PAYLOAD_DAYS): the copy says where the record was and
    /// why it was parked, header `inbox.payload: omitted`.
    Omit,
}

/// How records are grouped into transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Strategy {
    /// Up to BATCH_MAX_RECORDS records per transaction and offset commit.
    Batch,
    /// The classic inbox, as a baseline: one transaction and one offset commit
    /// per record.
    PerRecord,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,

    /// Kafka bootstrap servers.
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub kafka_bootstrap_servers: String,

    /// Topic of OrderPlaced events.
    #[arg(long, env = "KAFKA_TOPIC", default_value = "orders.placed.v1")]
    pub kafka_topic: String,

    /// Consumer group.
    #[arg(
        long,
        env = "KAFKA_GROUP_ID",
        default_value = "inventory-allocation-service"
    )]
    pub kafka_group_id: String,

    /// Logical consumer name in the ledger: stable across pods, restarts and
    /// group ids.
    #[arg(
        long,
        env = "INBOX_CONSUMER_NAME",
        default_value = "inventory-allocation-service"
    )]
    pub inbox_consumer_name: String,

    /// Most records in one batch (one transaction).
    #[arg(long, env = "BATCH_MAX_RECORDS", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_max_records: u32,

    /// How long a batch waits for more records after its first one, at
    /// most: it goes sooner when Kafka brought nothing for a tenth of it.
    #[arg(long, env = "BATCH_LINGER_MS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub batch_linger_ms: u64,

    /// Lanes: batches of distinct partitions applied concurrently, one
    /// database connection each (plus one for maintenance). A round uses
    /// more than one only when it holds more than one full batch (a
    /// backlog). 4 measured best at round trips of 0, 2 and 10 ms on 2 cores
    /// (docs/benchmarks.md, "At a distance from the database").
    #[arg(long, env = "DB_POOL_SIZE", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=128))]
    pub db_pool_size: u32,

    /// Round trip to the database, in milliseconds, from which a backlog is
    /// applied in several lanes (0: always). Nearer, one lane meets every
    /// figure of §11 and concurrent batches only wait on each other's locks
    /// of the hot stock rows: at 2 and 5 ms four lanes took the batch p95
    /// while catching up past 45 ms for 8–19 % more throughput; at 10 ms one
    /// lane fell below 5,000/s (docs/benchmarks.md, "How many lanes at a
    /// distance").
    #[arg(long, env = "INBOX_LANES_FROM_ROUND_TRIP_MS", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub lanes_from_round_trip_ms: u64,

    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,

    /// Topic receiving copies of parked records; empty disables it.
    #[arg(long, env = "DLQ_TOPIC", default_value = "orders.placed.v1.dlq")]
    pub dlq_topic: String,

    /// What a DLQ copy carries of the payload: `full`, or `omit` where
    /// order data must not be copied beyond the database.
    #[arg(long, env = "DLQ_PAYLOAD", value_enum, default_value_t = DlqPayload::Full)]
    pub dlq_payload: DlqPayload,

    /// Seconds between the maintenance runs inside `run` (docs/design.md#the-dedup-window: hourly).
    #[arg(long, env = "INBOX_MAINTENANCE_INTERVAL_SECONDS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub maintenance_interval_seconds: u64,

    /// Parked records in a row that pause consumption until an operator
    /// runs `inventory-inbox breaker resume` (0: never). A healthy stream
    /// parks one record in hundreds; a broken producer parks every one.
    #[arg(long, env = "INBOX_POISON_BREAKER_CONSECUTIVE", default_value_t = 1000)]
    pub poison_breaker_consecutive: u64,

    /// Share of the last INBOX_POISON_BREAKER_WINDOW records parked that
    /// pauses consumption likewise (1: never).
    #[arg(long, env = "INBOX_POISON_BREAKER_SHARE", default_value_t = 0.5,
          value_parser = parse_share)]
    pub poison_breaker_share: f64,

    /// Records the share is taken over.
    #[arg(long, env = "INBOX_POISON_BREAKER_WINDOW", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub poison_breaker_window: u64,

    /// Transaction strategy.
    #[arg(long, env = "INBOX_STRATEGY", value_enum, default_value_t = Strategy::Batch)]
    pub strategy: Strategy,

    /// Consumer group protocol: `classic`, or Kafka 4's `consumer` (KIP-848).
    #[arg(long, env = "GROUP_PROTOCOL", value_enum, default_value_t = GroupProtocol::Classic)]
    pub group_protocol: GroupProtocol,

    /// Extra librdkafka property as key=value (repeatable); also every
    /// KAFKA_PROPERTY_<NAME> variable, NAME lower-cased with '_' -> '.'.
    #[arg(long = "kafka-property", value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
}

/// The shortest statement or lock timeout that a batch can meet: shorter,
/// every statement fails and the consumer retries for ever.
const MIN_TIMEOUT_MS: u32 = 100;

/// A configuration error: one line, naming the variable or flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl RunArgs {
    /// Records per transaction for the chosen strategy.
    pub fn max_records(&self) -> usize {
        match self.strategy {
            Strategy::Batch => self.batch_max_records as usize,
            Strategy::PerRecord => 1,
        }
    }

    /// Batches applied concurrently: one per database connection; the
    /// per-record baseline stays strictly sequential.
    pub fn lanes(&self) -> usize {
        match self.strategy {
            Strategy::Batch => self.db_pool_size as usize,
            Strategy::PerRecord => 1,
        }
    }

    pub fn lanes_from_round_trip(&self) -> Duration {
        Duration::from_millis(self.lanes_from_round_trip_ms)
    }

    pub fn poison_breaker(&self) -> crate::breaker::BreakerSettings {
        crate::breaker::BreakerSettings {
            consecutive: self.poison_breaker_consecutive,
            share: self.poison_breaker_share,
            window: self.poison_breaker_window as usize,
        }
    }

    pub fn maintenance_interval(&self) -> Duration {
        Duration::from_secs(self.maintenance_interval_seconds)
    }

    pub fn linger(&self) -> Duration {
        match self.strategy {
            Strategy::Batch => Duration::from_millis(self.batch_linger_ms),
            Strategy::PerRecord => Duration::ZERO,
        }
    }

    /// Validates what clap cannot, and gathers the Kafka settings from the
    /// flags and the environment.
    pub fn kafka_settings(
        &self,
        environment: impl IntoIterator<Item = (String, String)>,
    ) -> Result<KafkaSettings, ConfigError> {
        self.database.validate()?;
        self.check_names()?;
        let properties = self.operator_properties(environment)?;
        let settings = KafkaSettings {
            group_protocol: self.group_protocol,
            bootstrap_servers: self.kafka_bootstrap_servers.clone(),
            properties: properties
                .iter()
                .map(|(k, v, _)| (k.clone(), v.clone()))
                .collect(),
        };
        // librdkafka checks each property's name and value as it takes it:
        // a mistake is one line naming where the property came from, before
        // anything connects, and never its value.
        if let Err(error) = settings
            .consumer_config(&self.kafka_group_id)
            .create_native_config()
        {
            let error = settings.scrub(error);
            let message = match &error {
                rdkafka::error::KafkaError::ClientConfig(_, description, key, _) => {
                    let origin = properties
                        .iter()
                        .find(|(k, _, _)| k == key)
                        .map_or("KAFKA_PROPERTY_*", |(_, _, origin)| origin.as_str());
                    format!("{origin}: {description} (value not shown)")
                }
                other => format!("KAFKA_PROPERTY_*: {other}"),
            };
            return Err(ConfigError(message));
        }
        Ok(settings)
    }

    /// The names every client needs are there, and the topics are topic
    /// names (the DLQ topic not the one read).
    fn check_names(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("KAFKA_BOOTSTRAP_SERVERS", &self.kafka_bootstrap_servers),
            ("KAFKA_TOPIC", &self.kafka_topic),
            ("KAFKA_GROUP_ID", &self.kafka_group_id),
            ("INBOX_CONSUMER_NAME", &self.inbox_consumer_name),
        ] {
            if value.trim().is_empty() {
                return Err(ConfigError(format!("{name} must not be empty")));
            }
        }
        for (name, topic) in [
            ("KAFKA_TOPIC", self.kafka_topic.trim()),
            ("DLQ_TOPIC", self.dlq_topic.trim()),
        ] {
            if !topic.is_empty() && !is_topic_name(topic) {
                return Err(ConfigError(format!(
                    "{name} {topic:?} is not a Kafka topic name (1-249 characters of [a-zA-Z0-9._-], not . or ..)"
                )));
            }
        }
        if self.dlq_topic.trim() == self.kafka_topic.trim() {
            return Err(ConfigError(
                "DLQ_TOPIC is KAFKA_TOPIC: copies of parked records would be read again and parked again, without end".into(),
            ));
        }
        Ok(())
    }

    /// The operator's librdkafka properties (`KAFKA_PROPERTY_*`, then
    /// `--kafka-property`), each with where it came from, refused when the
    /// service manages it or the group protocol forbids it.
    fn operator_properties(
        &self,
        environment: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Vec<(String, String, String)>, ConfigError> {
        let mut properties = Vec::new();
        for (name, value) in environment {
            if let Some(suffix) = name.strip_prefix(KAFKA_PROPERTY_PREFIX) {
                if suffix.is_empty() {
                    return Err(ConfigError(format!(
                        "{name}: a property name must follow {KAFKA_PROPERTY_PREFIX}"
                    )));
                }
                properties.push((suffix.to_ascii_lowercase().replace('_', "."), value, name));
            }
        }
        for flag in &self.kafka_property {
            let Some((key, value)) = flag.split_once('=') else {
                return Err(ConfigError(
                    "--kafka-property: expected KEY=VALUE (the value is not shown)".into(),
                ));
            };
            properties.push((
                key.trim().to_owned(),
                value.to_owned(),
                "--kafka-property".into(),
            ));
        }
        for (key, _, origin) in &properties {
            if key.is_empty() {
                return Err(ConfigError(format!("{origin}: empty property name")));
            }
            if PROTECTED_PROPERTIES.contains(&key.as_str()) {
                return Err(ConfigError(format!(
                    "{origin}: {key} is managed by the service (offsets are committed only after the database commit)"
                )));
            }
            if key == "group.protocol" {
                return Err(ConfigError(format!(
                    "{origin}: set the group protocol with GROUP_PROTOCOL (classic or consumer)"
                )));
            }
            if self.group_protocol == GroupProtocol::Consumer
                && CLASSIC_ONLY_PROPERTIES.contains(&key.as_str())
            {
                return Err(ConfigError(format!(
                    "{origin}: {key} belongs to the classic protocol; with GROUP_PROTOCOL=consumer the broker's group settings (group.consumer.*) decide it"
                )));
            }
        }
        Ok(properties)
    }
}

/// A name Kafka accepts for a topic.
fn is_topic_name(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Renders a clap error as one line (help and version are not errors):
/// its first paragraph, where clap names the missing arguments or lists
/// the valid values on lines of their own, and its tip, without the usage.
pub fn one_line(error: &clap::Error) -> String {
    let rendered = error.to_string();
    let mut line = rendered
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        line = "error: invalid arguments".into();
    }
    for tip in rendered.lines().map(str::trim) {
        if tip.starts_with("tip:") {
            line = format!("{line} ({tip})");
        }
    }
    line
}

/// Prefixes of the variables this service reads: a variable with one of
/// them that is no setting is most likely a typo, silently ignored but
/// for the warning of [`misspelled_variables`].
const SETTING_PREFIXES: [&str; 8] = [
    "INBOX_",
    "KAFKA_",
    "DB_",
    "BATCH_",
    "DLQ_",
    "METRICS_",
    "GROUP_",
    "DATABASE_",
];

/// Settings read from the environment outside the command line:
/// src/pipeline/failpoint.rs's (tests only).
const OTHER_SETTINGS: [&str; 1] = ["INBOX_FAILPOINT"];

/// Most edits (a letter missed, added, changed, or two swapped) between a
/// variable's name and a setting's for the one to be taken for a typo of
/// the other. More would name the variables of the scripts and harnesses
/// around the service (`KAFKA_HOME`, `INBOX_TEST_KAFKA`), which are no typos.
const TYPO_EDITS: usize = 2;

/// A variable of the service's prefixes that no setting has, and the
/// setting it most likely meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MisspelledVariable {
    pub name: String,
    pub meant: String,
}

impl std::fmt::Display for MisspelledVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is no setting of inventory-inbox and is ignored: did you mean {}?",
            self.name, self.meant
        )
    }
}

/// Of the environment's variable `names`, those of the service's prefixes
/// (or their lower-case spelling) that are no setting but near one: a typo
/// (INBOX_RETENTION_DAY), a prefix added or dropped
/// (INBOX_BATCH_MAX_RECORDS), or librdkafka's prefix misspelled
/// (KAFKA_PROPERTIES_…). `KAFKA_PROPERTY_*` are librdkafka's; a variable
/// near no setting belongs to something else and is left alone.
pub fn misspelled_variables(names: impl IntoIterator<Item = String>) -> Vec<MisspelledVariable> {
    use clap::CommandFactory;
    let mut settings: Vec<String> = OTHER_SETTINGS.iter().map(|s| s.to_string()).collect();
    let mut commands = vec![Cli::command()];
    while let Some(command) = commands.pop() {
        for arg in command.get_arguments() {
            if let Some(env) = arg.get_env() {
                settings.push(env.to_string_lossy().into_owned());
            }
        }
        commands.extend(command.get_subcommands().cloned());
    }
    settings.sort();
    settings.dedup();
    let mut found: Vec<MisspelledVariable> = names
        .into_iter()
        .filter(|name| !settings.contains(name) && !name.starts_with(KAFKA_PROPERTY_PREFIX))
        .filter_map(|name| {
            let upper = name.to_ascii_uppercase();
            let prefixed = SETTING_PREFIXES.iter().any(|p| upper.starts_with(p));
            let meant = nearest_setting(&upper, &settings).filter(|_| prefixed)?;
            Some(MisspelledVariable { name, meant })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The setting `name` (upper case) most likely meant, if any.
fn nearest_setting(name: &str, settings: &[String]) -> Option<String> {
    let unprefixed: Vec<&str> = SETTING_PREFIXES
        .iter()
        .filter_map(|prefix| name.strip_prefix(prefix))
        .collect();
    for form in std::iter::once(name).chain(unprefixed.iter().copied()) {
        if let Some(rest) = form.strip_prefix("KAFKA_PROP") {
            let property = rest.split_once('_').map_or("", |(_, property)| property);
            let property = if property.is_empty() {
                "NAME"
            } else {
                property
            };
            return Some(format!("{KAFKA_PROPERTY_PREFIX}{property}"));
        }
    }
    settings
        .iter()
        .filter_map(|setting| {
            let prefix_added = unprefixed.contains(&setting.as_str());
            let prefix_dropped = SETTING_PREFIXES
                .iter()
                .any(|prefix| setting.strip_prefix(prefix) == Some(name));
            let edits = if prefix_added || prefix_dropped {
                0
            } else {
                edit_distance(name, setting)
            };
            (edits <= TYPO_EDITS).then_some((edits, setting))
        })
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, setting)| setting.clone())
}

/// Edits (insertion, deletion, substitution, transposition of neighbours)
/// from `a` to `b`: the optimal string alignment distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec!["inventory-inbox", "run"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Run(run) => run,
            _ => unreachable!("run was parsed"),
        })
    }

    #[test]
    fn defaults_match_the_spec() {
        let args = run_args(&[]).unwrap();
        assert_eq!(args.kafka_topic, "orders.placed.v1");
        assert_eq!(args.batch_max_records, 100);
        assert_eq!(args.batch_linger_ms, 5);
        assert_eq!(args.dlq_topic, "orders.placed.v1.dlq");
        assert_eq!(args.database.inbox_retention_days, 14);
        assert_eq!(args.metrics_addr.to_string(), "127.0.0.1:9464");
        assert_eq!(args.db_pool_size, 4);
    }

    #[test]
    fn a_bad_number_names_the_variable_on_one_line() {
        let error = run_args(&["--batch-max-records", "lots"]).unwrap_err();
        let line = one_line(&error);
        assert!(line.contains("BATCH_MAX_RECORDS"), "{line}");
        assert!(!line.contains('\n'));
        let error = run_args(&["--batch-max-records", "0"]).unwrap_err();
        assert!(one_line(&error).contains("BATCH_MAX_RECORDS"));
    }

    #[test]
    fn kafka_properties_come_from_the_environment_and_flags() {
        let args = run_args(&["--kafka-property", "security.protocol=SASL_SSL"]).unwrap();
        let settings = args
            .kafka_settings([
                (
                    "KAFKA_PROPERTY_SASL_PASSWORD".to_string(),
                    "s3cret".to_string(),
                ),
                ("PATH".to_string(), "/bin".to_string()),
            ])
            .unwrap();
        assert!(settings
            .properties
            .contains(&("sasl.password".to_string(), "s3cret".to_string())));
        assert!(settings
            .properties
            .contains(&("security.protocol".to_string(), "SASL_SSL".to_string())));
    }

    #[test]
    fn guarantees_cannot_be_overridden_and_secrets_are_not_echoed() {
        let args = run_args(&[]).unwrap();
        let error = args
            .kafka_settings([(
                "KAFKA_PROPERTY_ENABLE_AUTO_COMMIT".to_string(),
                "true".to_string(),
            )])
            .unwrap_err();
        assert!(error
            .to_string()
            .contains("KAFKA_PROPERTY_ENABLE_AUTO_COMMIT"));
        let args = run_args(&["--kafka-property", "sasl.passwordhunter2"]).unwrap();
        let error = args.kafka_settings([]).unwrap_err().to_string();
        assert!(!error.contains("hunter2"), "{error}");
    }

    fn one_line_of(argv: &[&str]) -> String {
        let mut with_name = vec!["inventory-inbox"];
        with_name.extend_from_slice(argv);
        one_line(&Cli::try_parse_from(with_name).unwrap_err())
    }

    #[test]
    fn a_missing_argument_or_a_bad_choice_is_named_on_one_line() {
        for (argv, said) in [
            (
                &["inspect"][..],
                "error: the following required arguments were not provided: <--event <ID>|--order <ID>|--offset <PARTITION:OFFSET>>",
            ),
            (
                &["positions", "set"],
                "error: the following required arguments were not provided: <--offset <OFFSET>|--to-kafka>",
            ),
            (
                &["parked", "replay"],
                "error: the following required arguments were not provided: <ID|--reason <REASON>>",
            ),
            (
                &["migrate", "--inbox-db-pooler", "bogus"],
                "error: invalid value 'bogus' for '--inbox-db-pooler <INBOX_DB_POOLER>' [possible values: none, session, transaction]",
            ),
            (
                &["migrate", "--inbox-db-poolr", "none"],
                "error: unexpected argument '--inbox-db-poolr' found (tip: a similar argument exists: '--inbox-db-pooler')",
            ),
        ] {
            assert_eq!(one_line_of(argv), said, "{argv:?}");
        }
        // Both at once is refused as before.
        let both = one_line_of(&["parked", "replay", "7", "--reason", "unknown_sku"]);
        assert!(both.contains("cannot be used with"), "{both}");
    }

    fn misspelled(names: &[&str]) -> Vec<(String, String)> {
        misspelled_variables(names.iter().map(|n| n.to_string()))
            .into_iter()
            .map(|m| (m.name, m.meant))
            .collect()
    }

    #[test]
    fn a_misspelled_setting_is_told_with_the_one_it_likely_meant() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            misspelled(&[
                "INBOX_POISON_BREAKER_CONSECTIVE",
                "INBOX_RETENTION_DAY",
                "INBOX_BATCH_MAX_RECORDS",
                "DB_POOLER",
                "inbox_retention_days",
                "KAFKA_PROPERTIES_SASL_PASSWORD",
                "KAFKA_TOPCI",
            ]),
            vec![
                pair("DB_POOLER", "INBOX_DB_POOLER"),
                pair("INBOX_BATCH_MAX_RECORDS", "BATCH_MAX_RECORDS"),
                pair(
                    "INBOX_POISON_BREAKER_CONSECTIVE",
                    "INBOX_POISON_BREAKER_CONSECUTIVE"
                ),
                pair("INBOX_RETENTION_DAY", "INBOX_RETENTION_DAYS"),
                pair(
                    "KAFKA_PROPERTIES_SASL_PASSWORD",
                    "KAFKA_PROPERTY_SASL_PASSWORD"
                ),
                pair("KAFKA_TOPCI", "KAFKA_TOPIC"),
                pair("inbox_retention_days", "INBOX_RETENTION_DAYS"),
            ]
        );
    }

    #[test]
    fn settings_librdkafka_properties_and_others_variables_are_left_alone() {
        assert_eq!(
            misspelled(&[
                // Settings, of every command.
                "INBOX_RETENTION_DAYS",
                "BATCH_MAX_RECORDS",
                "DATABASE_URL",
                "INBOX_DB_POOLER",
                "INBOX_FAILPOINT",
                // librdkafka's.
                "KAFKA_PROPERTY_SASL_PASSWORD",
                // The scripts', the harnesses', Kafka's own, Kubernetes'.
                "INBOX_TEST_KAFKA",
                "INBOX_TEST_KAFKA_LIBS",
                "INBOX_BIN_DIR",
                "KAFKA_HEAP_OPTS",
                "KAFKA_HOST",
                "KAFKA_PORT",
                "KAFKA_SIZE",
                "KAFKA_VERSION",
                "KAFKA_BOOTSTRAP",
                "KAFKA_BROKERS",
                "KAFKA_SERVICE_HOST",
                "INBOX_SERVICE_PORT",
                "DB_SECRET",
                "METRICS_PORT",
                "BATCH_DURATION",
                "PATH",
                "RETENTION_DAY",
            ]),
            vec![]
        );
    }

    #[test]
    fn per_record_strategy_means_one_record_per_transaction() {
        let args = run_args(&["--strategy", "per-record"]).unwrap();
        assert_eq!(args.max_records(), 1);
        assert_eq!(args.linger(), Duration::ZERO);
    }
}
