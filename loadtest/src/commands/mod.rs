//! The subcommands, one module each: what each does, in which order. They
//! own the flags (`clap` derive; those shared are in [`flags`]) and put the
//! other layers together; the work itself is in `workload`, `probes`,
//! `verdict` and `output`. [`settle`] is the end of a load that `run` and
//! every `chaos` scenario share.

pub mod chaos;
pub mod db_ceiling;
pub mod deploy;
pub mod explore;
pub mod flags;
pub mod profile;
pub mod run;
pub mod settle;
pub mod shell;
pub mod table;
