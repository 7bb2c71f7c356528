//! I/O that reads the world after (and while) the workload ran: the
//! consumer's database, its `/metrics`, its group's committed offsets. Each
//! probe only reads and hands back plain data; judging it is `verdict`'s job.

pub mod group_progress;
pub mod ledger;
pub mod scrape;
