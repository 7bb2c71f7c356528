//! Rebuilds the service when a migration is added: `sqlx::migrate!` embeds
//! the `migrations/` folder at compile time, and cargo does not watch a
//! folder's new files on its own.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
