//! What a topic really holds: every record of every partition up to given
//! end offsets, read back from Kafka as the service reads it
//! (`inventory_inbox::to_record`: the same headers, the same keys
//! made text), for the reference model to be fed with.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use inbox_model::Record;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

/// Longest wait for one poll.
const POLL: Duration = Duration::from_millis(500);

/// Every record of `topic` below `ends[p]` on each partition `p`, per
/// partition in offset order; fails when they cannot all be read within
/// `timeout`.
pub async fn read(
    bootstrap_servers: &str,
    topic: &str,
    ends: &[i64],
    timeout: Duration,
) -> Result<BTreeMap<i32, Vec<Record>>> {
    let (servers, topic, ends) = (
        bootstrap_servers.to_owned(),
        topic.to_owned(),
        ends.to_vec(),
    );
    tokio::task::spawn_blocking(move || read_blocking(&servers, &topic, &ends, timeout)).await?
}

fn read_blocking(
    bootstrap_servers: &str,
    topic: &str,
    ends: &[i64],
    timeout: Duration,
) -> Result<BTreeMap<i32, Vec<Record>>> {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap_servers)
        .set("group.id", format!("{topic}-read-back"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .context("creating the read-back client")?;
    let mut assignment = TopicPartitionList::new();
    let mut log: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for (partition, &end) in ends.iter().enumerate() {
        let partition = partition as i32;
        log.insert(partition, Vec::new());
        if end > 0 {
            assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
        }
    }
    client.assign(&assignment).context("assigning the topic")?;
    let deadline = Instant::now() + timeout;
    let done = |log: &BTreeMap<i32, Vec<Record>>| {
        log.iter()
            .all(|(&p, records)| records.last().map_or(0, |r| r.offset + 1) >= ends[p as usize])
    };
    while !done(&log) {
        if Instant::now() >= deadline {
            let read: usize = log.values().map(Vec::len).sum();
            bail!("read back only {read} records of {topic} within {timeout:?}");
        }
        let Some(polled) = client.poll(POLL) else {
            continue;
        };
        let message = polled.context("reading the topic back")?;
        let record = inventory_inbox::to_record(&message);
        if record.offset >= ends[record.partition as usize] {
            continue;
        }
        log.entry(record.partition).or_default().push(Record {
            topic: record.topic,
            partition: record.partition,
            offset: record.offset,
            payload: record.payload,
            headers: record.headers,
        });
    }
    Ok(log)
}
