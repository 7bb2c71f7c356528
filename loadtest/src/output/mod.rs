//! What a person gets from a run: the JSON report of SPEC §9 with a summary
//! on the terminal, and the picture beside the report.

pub mod report;
pub mod svg;
