//! The `inventory-inbox` binary: parses the command line and dispatches.

use std::process::ExitCode;

use clap::Parser;
use inventory_inbox::config::{
    self, BreakerCommand, Cli, Command, InspectArgs, OffsetTarget, ParkedCommand, PositionsCommand,
};
use inventory_inbox::inspect::{self, Subject};
use inventory_inbox::kafka::cluster;
use inventory_inbox::operator;
use inventory_inbox::service;
use inventory_inbox::store::positions;
use inventory_inbox::store::{self, DbPool, ParkedFilter, ReplayOutcome};
use inventory_inbox::telemetry::Telemetry;

/// mimalloc: with glibc's malloc about a third of the batch path's CPU
/// went to malloc and free (docs/benchmarks/2026-12-06.md#the-allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            eprintln!("{}", config::one_line(&error));
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files or collectors.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let names = std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned());
    for misspelled in config::misspelled_variables(names) {
        tracing::warn!("{misspelled}");
    }
    // Tracing is set up before the runtime: its exporter's HTTP client
    // blocks on a thread of its own.
    let (telemetry, tracing_guard) = match &cli.command {
        Command::Run(_) => match Telemetry::from_env(|name| std::env::var(name).ok()) {
            Ok(tracing) => tracing,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        },
        _ => Telemetry::off_with_guard(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(dispatch(cli.command, telemetry));
    drop(runtime);
    tracing_guard.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command, telemetry: Telemetry) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => service::run(args, telemetry).await?,
        Command::Migrate(args) => {
            args.validate()?;
            let pool = store::connect(args.connection(), 1).await?;
            let report = store::migrate(&pool, args.retention()).await?;
            println!(
                "migrated; partitions created: {}, dropped: {}",
                report.created, report.dropped
            );
        }
        Command::Maintain(args) => {
            args.validate()?;
            let pool = store::connect(args.connection(), 1).await?;
            service::warn_if_retention_differs(&pool, args.retention()).await?;
            let report = store::maintain(&pool, store::MaintenanceTrigger::Command).await?;
            if report.locked {
                println!(
                    "maintained; partitions created: {}, dropped: {}; parked rows deleted: {}, payloads cleared: {}",
                    report.created, report.dropped, report.parked_deleted, report.payloads_cleared
                );
            } else {
                println!("another instance holds the maintenance lock; nothing done");
            }
            while let Some(built) = store::build_next_filter(&pool).await? {
                println!(
                    "ledger filter of {} built: {} ids, {} words, {} ms",
                    built.day,
                    built.ids,
                    built.words,
                    built.took.as_millis()
                );
            }
            let compacted = store::compact(&pool).await?;
            if !compacted.owner {
                println!("indexes of closed days: not compacted (only the tables' owner may)");
            } else {
                println!(
                    "indexes of closed days compacted: {} ({} -> {} bytes){}",
                    compacted.rebuilt,
                    compacted.bytes_before,
                    compacted.bytes_after,
                    if compacted.failed.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; not rebuilt, tried again next time: {}",
                            compacted.failed.join(", ")
                        )
                    }
                );
            }
        }
        Command::Parked { command } => parked(command).await?,
        Command::Positions { command } => positions_command(command).await?,
        Command::Inspect(args) => inspect_command(args).await?,
        Command::Breaker { command } => breaker_command(command).await?,
        Command::Console(args) => inventory_inbox::console::run(args).await?,
    }
    Ok(())
}

async fn breaker_command(command: BreakerCommand) -> anyhow::Result<()> {
    match command {
        BreakerCommand::Status { target } => {
            let pool = store::connect(target.database.connection(), 1).await?;
            match store::breaker(&pool, &target.inbox_consumer_name).await? {
                Some(state) if state.holds() => println!(
                    "held since {}: {}; `inventory-inbox breaker resume` resumes consumption",
                    state.opened_at.to_rfc3339(),
                    state.reason
                ),
                Some(state) => println!(
                    "not held; last opened at {} ({}), resumed at {} by {}",
                    state.opened_at.to_rfc3339(),
                    state.reason,
                    state.resumed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                    state.resumed_by.as_deref().unwrap_or("?")
                ),
                None => println!("not held; never opened"),
            }
        }
        BreakerCommand::Resume { target } => {
            let pool = store::connect(target.database.connection(), 1).await?;
            match store::resume_breaker(&pool, &target.inbox_consumer_name).await? {
                Some(state) => println!(
                    "resumed (held since {}: {}); the consumers take records again within seconds",
                    state.opened_at.to_rfc3339(),
                    state.reason
                ),
                None => println!("not held; nothing to resume"),
            }
        }
    }
    Ok(())
}

async fn inspect_command(args: InspectArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let run = &args.run;
    let subject = match (&args.event, &args.order, args.offset) {
        (Some(id), _, _) => Subject::Event(*id),
        (_, Some(order), _) => Subject::Order(order.clone()),
        (_, _, Some((partition, offset))) => Subject::Record { partition, offset },
        (None, None, None) => unreachable!("clap requires one of --event, --order, --offset"),
    };
    let kafka = run.kafka_settings(std::env::vars())?;
    let topic = inspect::TopicReader {
        settings: &kafka,
        group: &run.kafka_group_id,
        topic: &run.kafka_topic,
    };
    let pool = store::connect(run.database.connection(), 1).await?;
    let found = inspect::inspect(&pool, &run.inbox_consumer_name, &topic, &subject).await?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string(&found)?)
    } else {
        found.text()
    };
    // A reader that went away (`inspect ... | head -1`) ends the output
    // quietly, as it ends any Unix tool's.
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}

async fn positions_command(command: PositionsCommand) -> anyhow::Result<()> {
    match command {
        PositionsCommand::List { run, json } => positions_list(&run, json).await,
        PositionsCommand::Set {
            run,
            partitions,
            offset,
            to_kafka: _,
        } => positions_set(&run, &partitions, offset).await,
    }
}

/// `positions list`: each partition's position beside Kafka's offsets.
async fn positions_list(run: &config::RunArgs, json: bool) -> anyhow::Result<()> {
    let kafka = run.kafka_settings(std::env::vars())?;
    let pool = store::connect(run.database.connection(), 1).await?;
    let stored = positions::list(&pool, &run.inbox_consumer_name, Some(&run.kafka_topic)).await?;
    let offsets = cluster::kafka_offsets(&kafka, &run.kafka_group_id, &run.kafka_topic).await?;
    if !json {
        println!(
            "{:>9}  {:>12}  {:>12}  {:>12}  {:>12}  updated",
            "partition", "position", "earliest", "end", "kafka group"
        );
    }
    for partition in &offsets {
        let position = stored.iter().find(|p| p.partition == partition.partition);
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "topic": run.kafka_topic,
                    "partition": partition.partition,
                    "position": position.map(|p| p.next_offset),
                    "updated_at": position.map(|p| p.updated_at),
                    "earliest": partition.earliest,
                    "end": partition.end,
                    "committed": partition.committed,
                })
            );
        } else {
            let show = |o: Option<i64>| o.map_or("-".to_owned(), |o| o.to_string());
            println!(
                "{:>9}  {:>12}  {:>12}  {:>12}  {:>12}  {}",
                partition.partition,
                show(position.map(|p| p.next_offset)),
                partition.earliest,
                partition.end,
                show(partition.committed),
                position.map_or("-".to_owned(), |p| p.updated_at.to_rfc3339())
            );
        }
    }
    Ok(())
}

/// `positions set`: every chosen partition's position moved (planned
/// first, so that nothing moves when one is refused; the console plans and
/// moves with the same functions).
async fn positions_set(
    run: &config::RunArgs,
    partitions: &[i32],
    offset: Option<OffsetTarget>,
) -> anyhow::Result<()> {
    let kafka = run.kafka_settings(std::env::vars())?;
    let pool = store::connect(run.database.connection(), 1).await?;
    let offsets = cluster::kafka_offsets(&kafka, &run.kafka_group_id, &run.kafka_topic).await?;
    let stored = positions::list(&pool, &run.inbox_consumer_name, Some(&run.kafka_topic)).await?;
    let planned = operator::plan_moves(&run.kafka_topic, &offsets, &stored, partitions, offset)
        .map_err(anyhow::Error::msg)?;
    for unchanged in planned.iter().filter(|m| m.target.is_none()) {
        println!(
            "partition {}: the group has no committed offset; unchanged",
            unchanged.partition
        );
    }
    let moved =
        operator::apply_moves(&pool, &run.inbox_consumer_name, &run.kafka_topic, &planned).await?;
    for partition in &moved {
        println!(
            "partition {}: {} -> {}",
            partition.partition,
            partition
                .before
                .map_or("none".to_owned(), |b| b.to_string()),
            partition.target.unwrap_or_default()
        );
    }
    println!(
        "{} position(s) set; a running consumer reads from there within 10 s (a batch of the partition in flight is refused, not applied), a stopped one when it starts",
        moved.len()
    );
    Ok(())
}

/// The pool of the database a parked command works on.
async fn parked_pool(target: &config::ParkedTarget) -> anyhow::Result<DbPool> {
    target.database.validate()?;
    Ok(store::connect(target.database.connection(), 1).await?)
}

/// Parked records `parked list` counts at most, to say how many it chose
/// its first ones from: an index-only count of them takes milliseconds.
const PARKED_COUNTED_UP_TO: i64 = 100_000;

async fn parked(command: ParkedCommand) -> anyhow::Result<()> {
    match command {
        ParkedCommand::List {
            target,
            reason,
            since,
            limit,
            json,
        } => {
            let pool = parked_pool(&target).await?;
            let consumer = &target.inbox_consumer_name;
            let filter = ParkedFilter {
                reason,
                since,
                ..ParkedFilter::default()
            };
            let entries = store::list_parked(&pool, consumer, &filter, limit).await?;
            for entry in &entries {
                if json {
                    println!("{}", serde_json::to_string(entry)?);
                } else {
                    let show = |text: Option<String>| text.unwrap_or_else(|| "-".into());
                    println!(
                        "{:>8}  {}  {:<26}  {}/{}@{}  message {}  order {}  {}{}",
                        entry.id,
                        entry.parked_at.format("%Y-%m-%d %H:%M:%S"),
                        entry.reason,
                        entry.topic,
                        entry.partition,
                        entry.offset,
                        show(entry.message_id.map(|id| id.to_string())),
                        show(entry.order_id.clone()),
                        entry.error,
                        entry
                            .replay_outcome
                            .as_ref()
                            .map(|o| format!("  [replay: {o}]"))
                            .unwrap_or_default()
                    );
                }
            }
            if !json {
                let shown = entries.len() as i64;
                // Counted only when the limit cut the list, and then up to
                // a bound: a broken producer parks millions.
                let total = if shown < limit {
                    None
                } else {
                    Some(
                        store::count_parked(&pool, consumer, reason, since, PARKED_COUNTED_UP_TO)
                            .await?,
                    )
                };
                match total {
                    Some(total) if total.more || total.records > shown => {
                        println!("{shown} of {total} parked record(s)")
                    }
                    _ => println!("{shown} parked record(s)"),
                }
            }
        }
        ParkedCommand::Replay { target, id, reason } => {
            let pool = parked_pool(&target).await?;
            let consumer = &target.inbox_consumer_name;
            let ids = match (id, reason) {
                (Some(id), _) => vec![id],
                (None, Some(reason)) => {
                    store::replay_candidates(&pool, consumer, reason, None).await?
                }
                (None, None) => unreachable!("clap requires an id or --reason"),
            };
            let mut applied = 0;
            for id in &ids {
                let outcome = store::replay(&pool, consumer, *id, "CLI (parked replay)").await?;
                if outcome == ReplayOutcome::NotFound && reason.is_none() {
                    anyhow::bail!(
                        "no parked record {id} for INBOX_CONSUMER_NAME={}: `inventory-inbox parked list` shows the ids",
                        target.inbox_consumer_name
                    );
                }
                applied += usize::from(outcome == ReplayOutcome::Applied);
                println!("{id}: {outcome}");
            }
            println!("replayed {} record(s), {applied} applied", ids.len());
        }
    }
    Ok(())
}
