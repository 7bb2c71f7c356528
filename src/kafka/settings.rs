//! Where the cluster is and how to talk to it: the settings every client of
//! the service is made from, and the scrubbing of the operator's property
//! values (they may be secrets) out of every error a client's creation
//! returns.

use clap::ValueEnum;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;

/// The consumer group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupProtocol {
    /// The classic protocol: the client-side cooperative-sticky assignor,
    /// the client's session and heartbeat settings.
    Classic,
    /// Kafka 4's consumer group protocol (KIP-848): the broker assigns, and
    /// the session and heartbeat are the broker's group settings.
    Consumer,
}

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    pub group_protocol: GroupProtocol,
    /// Extra librdkafka properties (TLS, SASL...). Values may be secrets:
    /// never log them.
    pub properties: Vec<(String, String)>,
}

/// Shortest property value taken out of error text whatever its key: a
/// shorter one (`1`, `all`, `PLAIN`) is no secret, and taking it out would
/// garble the words around it.
const SCRUBBED_FROM_LENGTH: usize = 8;

/// The classic protocol's heartbeat: a member that leaves hands its
/// partitions over within about this long (docs/deploy.md#deploys-under-load).
const CLASSIC_HEARTBEAT_INTERVAL_MS: &str = "250";

/// Property keys whose values are secrets at any length.
const SECRET_PROPERTY_MARKERS: [&str; 5] = ["password", "secret", "token", "jaas", "key"];

impl KafkaSettings {
    /// A librdkafka error without the values of the operator's properties:
    /// its text may quote them (an invalid value, a mandatory property), and
    /// they may be secrets. Every error of a client's creation goes through
    /// here before it is logged or returned.
    pub fn scrub(&self, error: KafkaError) -> KafkaError {
        match error {
            KafkaError::ClientConfig(result, description, key, _value) => KafkaError::ClientConfig(
                result,
                self.scrub_text(&description),
                key,
                "(value not shown)".into(),
            ),
            KafkaError::ClientCreation(text) => KafkaError::ClientCreation(self.scrub_text(&text)),
            other => other,
        }
    }

    /// `text` with every property value that could be a secret replaced.
    pub fn scrub_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (key, value) in &self.properties {
            let secret = SECRET_PROPERTY_MARKERS
                .iter()
                .any(|marker| key.contains(marker));
            if !value.is_empty() && (secret || value.len() >= SCRUBBED_FROM_LENGTH) {
                text = text.replace(value.as_str(), "[redacted]");
            }
        }
        text
    }

    /// The common configuration of every client of the service.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// The consumer: explicit offset commits only, cooperative rebalancing,
    /// earliest reset (an inventory consumer must never skip events; the
    /// ledger makes rereading safe), lag statistics every few seconds.
    pub fn consumer_config(&self, group_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("statistics.interval.ms", "5000")
            .set("fetch.wait.max.ms", "100")
            // A fetch brings at most about 100 records of each partition, so
            // a backlog reaches the consumer interleaved across partitions
            // and a round can apply several of them concurrently (lanes),
            // rather than one partition's megabyte at a time.
            .set("max.partition.fetch.bytes", "32768");
        match self.group_protocol {
            // Incremental rebalances: a member keeps its partitions while
            // others join or leave. The heartbeat is how soon the others
            // learn that a member left (a deploy's SIGTERM) and take its
            // partitions: librdkafka's 3 s default stalls them for seconds.
            GroupProtocol::Classic => config
                .set("partition.assignment.strategy", "cooperative-sticky")
                .set("heartbeat.interval.ms", CLASSIC_HEARTBEAT_INTERVAL_MS),
            // The broker assigns, incrementally too, and sets the heartbeat
            // (group.consumer.heartbeat.interval.ms; docs/deploy.md).
            GroupProtocol::Consumer => config.set("group.protocol", "consumer"),
        };
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        // Properties given by the operator must not undo the guarantee.
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaConfRes;

    fn settings(properties: &[(&str, &str)]) -> KafkaSettings {
        KafkaSettings {
            bootstrap_servers: "127.0.0.1:9092".into(),
            group_protocol: GroupProtocol::Classic,
            properties: properties
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn the_classic_heartbeat_is_short_and_the_consumer_protocol_leaves_it_to_the_broker() {
        let classic = settings(&[]).consumer_config("group");
        assert_eq!(classic.get("heartbeat.interval.ms"), Some("250"));
        let operator = settings(&[("heartbeat.interval.ms", "1000")]).consumer_config("group");
        assert_eq!(operator.get("heartbeat.interval.ms"), Some("1000"));
        let consumer = KafkaSettings {
            group_protocol: GroupProtocol::Consumer,
            ..settings(&[])
        }
        .consumer_config("group");
        assert_eq!(consumer.get("group.protocol"), Some("consumer"));
        assert_eq!(consumer.get("heartbeat.interval.ms"), None);
    }

    #[test]
    fn no_property_value_that_could_be_a_secret_reaches_an_error() {
        let settings = settings(&[
            ("sasl.password", "pw"),
            ("socket.timeout.ms", "hunter2hunter2"),
            ("acks", "all"),
        ]);
        let scrubbed = settings.scrub(KafkaError::ClientConfig(
            RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
            "Invalid value \"hunter2hunter2\" for configuration property \"socket.timeout.ms\"; pw"
                .into(),
            "socket.timeout.ms".into(),
            "hunter2hunter2".into(),
        ));
        let text = scrubbed.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("; pw"), "{text}");
        assert!(text.contains("socket.timeout.ms"), "{text}");
        let created = settings
            .scrub(KafkaError::ClientCreation(
                "call me all hunter2hunter2".into(),
            ))
            .to_string();
        assert_eq!(created, "Client creation error: call me all [redacted]");
    }
}
