//! The subcommands, one file each: what each does, in which order. They own
//! the flags (`clap` derive) and put the other layers together; the work
//! itself is in `workload`, `probes`, `verdict` and `output`.

pub mod chaos;
pub mod db_ceiling;
pub mod flags;
pub mod run;
pub mod settle;
