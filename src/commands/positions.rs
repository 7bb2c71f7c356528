//! `inventory-inbox positions list|set`: each partition's position
//! beside Kafka's offsets, and positions moved by an operator.

use inventory_inbox::config::{self, OffsetTarget, PositionsCommand};
use inventory_inbox::kafka::cluster;
use inventory_inbox::operator;
use inventory_inbox::store::{self, positions};

pub async fn run(command: PositionsCommand) -> anyhow::Result<()> {
    match command {
        PositionsCommand::List { run, json } => list(&run, json).await,
        PositionsCommand::Set {
            run,
            partitions,
            offset,
            to_kafka: _,
        } => set(&run, &partitions, offset).await,
    }
}

/// `positions list`: each partition's position beside Kafka's offsets.
async fn list(run: &config::RunArgs, json: bool) -> anyhow::Result<()> {
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
async fn set(
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
