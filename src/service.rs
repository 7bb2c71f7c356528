//! Start-up and shutdown of `inventory-inbox run`: wires the database, the
//! consumer, maintenance, metrics and signals around the pipeline.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::Consumer;

use crate::config::{ConfigError, RunArgs};
use crate::kafka::{CommittedOffsets, Dlq, InboxContext, KafkaSettings, PositionSource};
use crate::metrics::{self, Metrics, Readiness};
use crate::pipeline::{BatchSettings, InboxConsumer, Pipeline};
use crate::shutdown::{self, Shutdown, Trigger};
use crate::store::{self, Inbox};
use crate::telemetry::Telemetry;

/// Errors that stop the service before or while it runs.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("METRICS_ADDR {address}: {source}")]
    Metrics {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    // Not sources: the message says it once (an error chain would repeat it).
    #[error("kafka: {0}")]
    Kafka(rdkafka::error::KafkaError),
    #[error("database: {0}")]
    Store(store::StoreError),
    #[error(transparent)]
    Pipeline(#[from] crate::pipeline::PipelineError),
}

impl From<rdkafka::error::KafkaError> for ServiceError {
    fn from(error: rdkafka::error::KafkaError) -> Self {
        ServiceError::Kafka(error)
    }
}

impl From<store::StoreError> for ServiceError {
    fn from(error: store::StoreError) -> Self {
        ServiceError::Store(error)
    }
}

/// Runs the consumer until SIGTERM or SIGINT, then drains and exits.
///
/// The background tasks (the metrics endpoint, the signal handler,
/// maintenance) are stopped by one `finished` signal once the consumer has
/// closed, and joined (a maintenance run in progress finishes first; a
/// scrape or the build of a ledger filter in progress is cut). The metrics
/// endpoint serves the whole drain, with `/readyz` unready from the signal
/// on.
pub async fn run(args: RunArgs, telemetry: Telemetry) -> Result<(), ServiceError> {
    let kafka = args.kafka_settings(std::env::vars())?;
    let metrics = Metrics::new();
    // The consumer's statement series exists from the first scrape, at zero.
    metrics
        .statement_duration
        .with_label_values(&[args.inbox_consumer_name.as_str()]);
    let listener =
        metrics::bind(args.metrics_addr)
            .await
            .map_err(|source| ServiceError::Metrics {
                address: args.metrics_addr,
                source,
            })?;
    let (finish, finished) = shutdown::channel();
    let (stop, asked) = shutdown::channel();
    let mut tasks = vec![
        tokio::spawn(metrics::serve(listener, metrics.clone(), finished.clone())),
        tokio::spawn(forward_signals(
            stop,
            metrics.readiness.clone(),
            finished.clone(),
        )),
    ];
    let ran = consume_until_shutdown(
        &args, &kafka, &metrics, &telemetry, asked, finished, &mut tasks,
    )
    .await;
    finish.ask();
    for task in tasks {
        if let Err(error) = task.await {
            tracing::warn!(%error, "a background task ended abnormally");
        }
    }
    ran
}

/// Start-up (the database, maintenance, the topic's retention), then one
/// consumer after another until shutdown: a static member fenced when its
/// coordinator moved joins again with a new one.
async fn consume_until_shutdown(
    args: &RunArgs,
    kafka: &KafkaSettings,
    metrics: &Metrics,
    telemetry: &Telemetry,
    shutdown: Shutdown,
    finished: Shutdown,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Result<(), ServiceError> {
    let pool = store::connect_lazy(args.database.connection(), args.db_pool_size)?
        .answer_within(args.database.answer_within());
    let inbox = Inbox::new(pool.clone(), args.inbox_consumer_name.clone())
        .with_dlq_copies(!args.dlq_topic.trim().is_empty());
    if !database_ready(&pool, &inbox, args, &shutdown).await? {
        // Stopped before the database ever answered: nothing to drain.
        return Ok(());
    }
    metrics
        .readiness
        .database_reachable
        .store(true, std::sync::atomic::Ordering::Relaxed);
    count_unfiltered_days(&pool, metrics).await;
    tasks.push(tokio::spawn(maintain_periodically(
        pool.clone(),
        metrics.clone(),
        args.maintenance_interval(),
        finished,
    )));

    check_topics_exist(kafka, args).await?;
    check_group_protocol_offered(kafka, args).await?;
    let retention = warn_if_retention_differs(&pool, args.database.retention()).await?;
    check_topic_retention(kafka, &args.kafka_topic, retention.ledger_days, metrics).await;

    let inbox = Arc::new(inbox);
    let mut fences: std::collections::VecDeque<std::time::Instant> = Default::default();
    loop {
        let result = consume(args, kafka, &inbox, metrics, telemetry, shutdown.clone()).await;
        match result {
            Err(crate::pipeline::PipelineError::Kafka(error)) if is_fenced(&error) => {
                // A static member fenced by its own instance id: the group
                // coordinator moved (a broker lost) and the new one no longer
                // knew this member. librdkafka's consumer is done for; a new
                // one joins again under the same group.instance.id, and the
                // database's positions say where each partition starts.
                // Fence after fence is another process running with the same
                // instance id: stop rather than fence it back forever.
                fences.retain(|at| at.elapsed() < FENCE_WINDOW);
                fences.push_back(std::time::Instant::now());
                if fences.len() >= FENCES_TO_STOP {
                    tracing::error!(%error, fences = fences.len(), "fenced again and again: another consumer runs with this group.instance.id; stopping");
                    return Err(crate::pipeline::PipelineError::Kafka(error).into());
                }
                tracing::warn!(%error, "this static member was fenced (the group coordinator moved); joining the group again with a new consumer");
                tokio::time::sleep(Duration::from_secs(1)).await;
                if shutdown.is_asked() {
                    return Ok(());
                }
            }
            result => return result.map_err(Into::into),
        }
    }
}

/// The start-up checks and maintenance, waited for: the dedup window must
/// be known before the first batch, and a pod that starts before its
/// database waits for it rather than failing. False when shutdown came
/// before the database answered.
async fn database_ready(
    pool: &store::DbPool,
    inbox: &Inbox,
    args: &RunArgs,
    shutdown: &Shutdown,
) -> Result<bool, store::StoreError> {
    let mut delay = Duration::from_millis(200);
    loop {
        match maintain_and_load(pool, inbox, args).await {
            Ok(()) => return Ok(true),
            Err(store::StoreError::Transient { .. }) if shutdown.is_asked() => return Ok(false),
            Err(error @ store::StoreError::Transient { .. }) => {
                let error = match error.retry_reason() {
                    store::RetryReason::PoolTimeout => {
                        pool.why_no_connection().await.unwrap_or(error)
                    }
                    _ => error,
                };
                if !matches!(error, store::StoreError::Transient { .. }) {
                    return Err(error);
                }
                tracing::warn!(%error, "the database did not answer the start-up checks; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(error) => return Err(error),
        }
    }
}

/// So many fences within `FENCE_WINDOW` mean two processes share an
/// instance id.
const FENCES_TO_STOP: usize = 3;
const FENCE_WINDOW: Duration = Duration::from_secs(300);

/// Whether a fatal consumer error is a static member's fence.
fn is_fenced(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    matches!(
        error,
        KafkaError::MessageConsumptionFatal(RDKafkaErrorCode::FencedInstanceId)
    )
}

/// One Kafka consumer's life: created, subscribed, run by the pipeline until
/// shutdown (or a fatal client error), closed.
async fn consume(
    args: &RunArgs,
    kafka: &KafkaSettings,
    inbox: &Arc<Inbox>,
    metrics: &Metrics,
    telemetry: &Telemetry,
    shutdown: Shutdown,
) -> Result<(), crate::pipeline::PipelineError> {
    let offsets = Arc::new(CommittedOffsets::default());
    let context = InboxContext {
        offsets: offsets.clone(),
        metrics: metrics.clone(),
        positions: Some(PositionSource {
            inbox: inbox.clone(),
            runtime: tokio::runtime::Handle::current(),
            shutdown: shutdown.clone(),
        }),
    };
    let consumer: InboxConsumer = InboxConsumer::from_config_and_context(
        &kafka.consumer_config(&args.kafka_group_id),
        context,
    )
    .map_err(|error| kafka.scrub(error))?;
    consumer.subscribe(&[&args.kafka_topic])?;
    let dlq = match args.dlq_topic.trim() {
        "" => None,
        topic => Some(Dlq::new(
            kafka,
            topic.to_owned(),
            metrics.clone(),
            args.dlq_payload == crate::config::DlqPayload::Omit,
        )?),
    };
    tracing::info!(
        topic = %args.kafka_topic,
        group = %args.kafka_group_id,
        consumer = %args.inbox_consumer_name,
        strategy = ?args.strategy,
        max_records = args.max_records(),
        "consuming"
    );
    Pipeline {
        consumer: Arc::new(consumer),
        offsets,
        inbox: inbox.clone(),
        dlq,
        metrics: metrics.clone(),
        settings: BatchSettings {
            max_records: args.max_records(),
            linger: args.linger(),
            lanes: args.lanes(),
            lanes_from_round_trip: args.lanes_from_round_trip(),
            poison_breaker: args.poison_breaker(),
        },
        telemetry: telemetry.clone(),
        group: args.kafka_group_id.clone(),
    }
    .run(shutdown)
    .await
}

/// Stops the start when the topic to read, or the DLQ topic, does not exist
/// (the broker does not create topics on demand: the consumer would wait,
/// or every copy fail, without end), or when the cluster refuses this
/// configuration (a login, a certificate, the security protocol: the
/// consumer would retry without end). A broker that does not answer is no
/// reason to stop: the consumer waits for it as for any outage.
async fn check_topics_exist(kafka: &KafkaSettings, args: &RunArgs) -> Result<(), ServiceError> {
    let mut topics = vec![args.kafka_topic.trim().to_owned()];
    if !args.dlq_topic.trim().is_empty() {
        topics.push(args.dlq_topic.trim().to_owned());
    }
    match crate::kafka::cluster::missing_topics(kafka, &topics).await {
        Ok(missing) => match missing.first() {
            Some(topic) => {
                let name = if *topic == topics[0] {
                    "KAFKA_TOPIC"
                } else {
                    "DLQ_TOPIC"
                };
                let missing = crate::kafka::cluster::ClusterError::NoTopic {
                    setting: name,
                    topic: topic.clone(),
                };
                Err(ConfigError(format!(
                    "{missing}{}",
                    if name == "DLQ_TOPIC" {
                        ", or set DLQ_TOPIC empty to keep parked records in the database only"
                    } else {
                        ""
                    }
                ))
                .into())
            }
            None => Ok(()),
        },
        Err(crate::kafka::cluster::ClusterError::Refused(line)) => Err(ConfigError(line).into()),
        Err(error) => {
            tracing::warn!(%error, "could not check that the topics exist; going on");
            Ok(())
        }
    }
}

/// Stops the start when GROUP_PROTOCOL=consumer and the cluster does not
/// offer that protocol (Kafka 3.x by default, or brokers configured for the
/// classic one only): librdkafka would wait for a coordinator without end.
/// A broker that cannot be asked (no DescribeConfigs right, an outage) is no
/// reason to stop.
async fn check_group_protocol_offered(
    kafka: &KafkaSettings,
    args: &RunArgs,
) -> Result<(), ServiceError> {
    if args.group_protocol != crate::kafka::GroupProtocol::Consumer {
        return Ok(());
    }
    match crate::kafka::cluster::offered_group_protocols(kafka).await {
        Ok(offered) if offered.iter().any(|protocol| protocol == "consumer") => Ok(()),
        Ok(offered) => Err(ConfigError(format!(
            "GROUP_PROTOCOL=consumer: the cluster does not offer the consumer group protocol (its brokers' group.coordinator.rebalance.protocols is {:?}; Kafka 4.0 or later has it): set GROUP_PROTOCOL=classic",
            offered.join(",")
        ))
        .into()),
        Err(error) => {
            tracing::warn!(%error, "could not check that the cluster offers the consumer group protocol; going on");
            Ok(())
        }
    }
}

/// Warns when the topic keeps records longer than the dedup window: a replay
/// from the earliest offset would then reach events whose duplicates can no
/// longer be recognised, and those are parked (never applied).
async fn check_topic_retention(
    kafka: &KafkaSettings,
    topic: &str,
    retention_days: i32,
    metrics: &Metrics,
) {
    let window = Duration::from_secs(u64::from(retention_days.unsigned_abs()) * 86_400);
    match crate::kafka::cluster::topic_retention(kafka, topic).await {
        Ok(retention) => {
            metrics
                .topic_retention
                .set(retention.map_or(-1, |r| r.as_secs() as i64));
            if retention.is_none_or(|r| r > window) {
                tracing::warn!(
                    topic,
                    retention_seconds = retention.map_or(-1, |r| r.as_secs() as i64),
                    dedup_window_days = retention_days,
                    "the topic keeps records longer than the dedup window: replays of records older than the window will be parked as outside_dedup_window"
                );
            }
        }
        Err(error) => {
            metrics.topic_retention.set(-1);
            tracing::warn!(%error, topic, "could not read the topic's retention.ms");
        }
    }
}

async fn maintain_and_load(
    pool: &store::DbPool,
    inbox: &Inbox,
    args: &RunArgs,
) -> Result<(), store::StoreError> {
    store::check_schema(pool).await?;
    store::register_codes(
        pool,
        &args.inbox_consumer_name,
        &[args.kafka_topic.trim().to_owned()],
    )
    .await?;
    let report = store::maintain(pool, store::MaintenanceTrigger::StartUp).await?;
    tracing::info!(?report, "ledger partitions maintained");
    inbox.refresh_window().await.map(|_| ())
}

/// The retention the database holds (its owner set it at `migrate`; it
/// applies to every consumer of the database), with a warning when this
/// process was configured otherwise.
pub async fn warn_if_retention_differs(
    pool: &store::DbPool,
    configured: store::Retention,
) -> Result<store::Retention, store::StoreError> {
    let database = store::retention(pool).await?;
    if database != configured {
        tracing::warn!(
            database_retention_days = database.ledger_days,
            database_parked_retention_days = database.parked_days,
            database_parked_payload_days = database.parked_payload_days,
            database_reservation_retention_days = database.reservation_days,
            database_detaches_reservations = database.detach_reservations,
            configured_retention_days = configured.ledger_days,
            configured_parked_retention_days = configured.parked_days,
            configured_parked_payload_days = configured.parked_payload_days,
            configured_reservation_retention_days = configured.reservation_days,
            configured_detaches_reservations = configured.detach_reservations,
            "INBOX_RETENTION_DAYS, INBOX_PARKED_RETENTION_DAYS, INBOX_PARKED_PAYLOAD_DAYS, INBOX_RESERVATION_RETENTION_DAYS or INBOX_RESERVATION_EXPIRY differ from the database's retention, which applies: run `inventory-inbox migrate` with the new values to change it"
        );
    }
    Ok(database)
}

/// Maintenance every `every` until `finished`.
async fn maintain_periodically(
    pool: store::DbPool,
    metrics: Metrics,
    every: Duration,
    finished: Shutdown,
) {
    let mut interval = tokio::time::interval(every);
    interval.tick().await;
    loop {
        tokio::select! {
            _ = finished.asked() => return,
            _ = interval.tick() => {}
        }
        match store::maintain(&pool, store::MaintenanceTrigger::Hourly).await {
            Ok(report) => tracing::info!(?report, "ledger partitions maintained"),
            Err(error) => {
                tracing::warn!(%error, "maintenance failed; tried again at the next interval")
            }
        }
        // The filters of closed days, one day at a time, until all are
        // built. A build takes minutes at production size: the service's
        // end abandons it (its connection closes, nothing is published).
        loop {
            let built = tokio::select! {
                _ = finished.asked() => return,
                built = store::build_next_filter(&pool) => built,
            };
            match built {
                Ok(Some(built)) => tracing::info!(
                    day = %built.day,
                    ids = built.ids,
                    orders = built.orders,
                    words = built.words,
                    took_ms = built.took.as_millis() as u64,
                    "ledger filter of a closed day built"
                ),
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "a ledger filter was not built; tried again at the next interval");
                    break;
                }
            }
        }
        count_unfiltered_days(&pool, &metrics).await;
    }
}

/// Sets `inbox_ledger_filters_stale`: the closed days every batch looks
/// up in full. Left as it was when the database does not answer.
async fn count_unfiltered_days(pool: &store::DbPool, metrics: &Metrics) {
    match store::unfiltered_days(pool).await {
        Ok(days) => metrics.ledger_filters_stale.set(days),
        Err(error) => {
            tracing::warn!(%error, "the closed days without a ledger filter were not counted")
        }
    }
}

/// Turns SIGTERM and SIGINT into the shutdown signal, and `/readyz` unready
/// (draining); ends without one when the service is `finished` otherwise
/// (a fatal error).
async fn forward_signals(stop: Trigger, readiness: Arc<Readiness>, finished: Shutdown) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: finishing the batch in hand"),
        _ = int.recv() => tracing::info!("SIGINT: finishing the batch in hand"),
        _ = finished.asked() => return,
    }
    readiness
        .draining
        .store(true, std::sync::atomic::Ordering::Relaxed);
    stop.ask();
    // A second signal: the operator will not wait. Nothing is lost by
    // stopping now: no offset reaches Kafka before its batch's database
    // commit, and what is not committed is read again.
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = finished.asked() => return,
    }
    tracing::warn!("a second signal: exiting at once, without finishing the batch in hand (it is read again by the next owner)");
    std::process::exit(130);
}
