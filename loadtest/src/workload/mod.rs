//! What is done to the consumer under test: the event mix (pure), sent to
//! Kafka paced or as a prefill, the lag spike (SIGSTOP/SIGCONT of the
//! consumer), and the consumer processes a chaos run starts and kills.

pub mod fleet;
pub mod generate;
pub mod kafka;
pub mod pause;
pub mod produce;
