//! I/O that reads the world while and after the workload runs: the
//! consumer's database (which the generator also seeds), its `/metrics`,
//! its group's committed offsets. A probe hands back plain data; judging it
//! is [`crate::verdict`]'s job.

pub mod database;
pub mod group_progress;
pub mod scrape;
pub mod topic_log;
