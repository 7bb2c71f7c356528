//! How far a consumer group has got, read from Kafka: its committed offsets
//! against the topic's end offsets. The service commits an offset only after
//! the database commit of the batch holding it, so "committed up to the end
//! offsets of moment T" means every record on the topic at T is in the
//! database: the group has recovered from whatever happened before T.
//!
//! Every query is retried until it succeeds (the broker may be down: that is
//! the point of a chaos run) or the caller's deadline passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

/// Timeout of one request to the broker.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two looks at the committed offsets.
const POLL: Duration = Duration::from_millis(100);

/// Reads one group's committed offsets and the topic's end offsets.
#[derive(Clone)]
pub struct GroupProgress {
    client: Arc<BaseConsumer>,
    topic: String,
    partitions: i32,
}

impl GroupProgress {
    /// A client of `group` (it never joins it: it only reads offsets).
    pub async fn new(bootstrap_servers: &str, group: &str, topic: &str) -> Result<Self> {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap_servers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .context("creating the offsets client")?;
        let client = Arc::new(client);
        let (reader, name) = (client.clone(), topic.to_owned());
        let partitions = tokio::task::spawn_blocking(move || {
            reader
                .fetch_metadata(Some(&name), REQUEST_TIMEOUT)
                .map(|m| m.topics().first().map_or(0, |t| t.partitions().len()))
        })
        .await?
        .with_context(|| format!("no metadata for {topic}"))?;
        if partitions == 0 {
            bail!("topic {topic} has no partitions");
        }
        Ok(GroupProgress {
            client,
            topic: topic.to_owned(),
            partitions: partitions as i32,
        })
    }

    /// The end offset of every partition, retried until `deadline`.
    pub async fn end_offsets(&self, deadline: Instant) -> Result<Vec<i64>> {
        self.retrying(deadline, "end offsets", |client, topic, partitions| {
            (0..partitions)
                .map(|p| {
                    client
                        .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                        .map(|(_, high)| high)
                })
                .collect::<Result<Vec<i64>, _>>()
                .map_err(|e| anyhow!(e))
        })
        .await
    }

    /// The committed offset of every partition (0 where none), retried
    /// until `deadline`.
    pub async fn committed(&self, deadline: Instant) -> Result<Vec<i64>> {
        self.retrying(
            deadline,
            "committed offsets",
            |client, topic, partitions| {
                let mut list = TopicPartitionList::new();
                for partition in 0..partitions {
                    list.add_partition(topic, partition);
                }
                let committed = client.committed_offsets(list, REQUEST_TIMEOUT)?;
                Ok((0..partitions)
                    .map(
                        |p| match committed.find_partition(topic, p).map(|e| e.offset()) {
                            Some(Offset::Offset(offset)) => offset,
                            _ => 0,
                        },
                    )
                    .collect())
            },
        )
        .await
    }

    /// Waits until the committed offsets reach `ends` on every partition;
    /// returns the instant they did.
    pub async fn wait_caught_up(&self, ends: &[i64], deadline: Instant) -> Result<Instant> {
        loop {
            let committed = self.committed(deadline).await?;
            if caught_up(&committed, ends) {
                return Ok(Instant::now());
            }
            if Instant::now() >= deadline {
                bail!("not caught up in time: committed {committed:?}, end offsets {ends:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs a blocking query off the runtime, again and again until it
    /// succeeds or `deadline` passes.
    async fn retrying<T, F>(&self, deadline: Instant, what: &str, query: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&BaseConsumer, &str, i32) -> Result<T> + Send + Sync + Clone + 'static,
    {
        loop {
            let (client, topic, partitions) =
                (self.client.clone(), self.topic.clone(), self.partitions);
            let query = query.clone();
            let outcome =
                tokio::task::spawn_blocking(move || query(&client, &topic, partitions)).await?;
            match outcome {
                Ok(value) => return Ok(value),
                Err(error) if Instant::now() >= deadline => {
                    return Err(error.context(format!("reading {what}")))
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }
}

/// Whether every partition's committed offset has reached its end offset.
pub fn caught_up(committed: &[i64], ends: &[i64]) -> bool {
    committed.len() == ends.len() && committed.iter().zip(ends).all(|(c, e)| c >= e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_must_reach_its_end() {
        assert!(caught_up(&[5, 7, 0], &[5, 6, 0]));
        assert!(!caught_up(&[5, 5, 0], &[5, 6, 0]));
        assert!(!caught_up(&[5, 7], &[5, 6, 0]), "a partition missing");
    }
}
