//! `docs/schema.sql` is the schema the migrations build, in one file a
//! person reads whole: `scripts/schema.sh` dumps a fresh database migrated
//! by this build, and the committed file must be what it prints
//! (`make schema` writes it again after a migration).

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn docs_schema_sql_is_what_the_migrations_build() {
    common::require_services();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = std::env::temp_dir().join(common::unique("schema"));
    let bin_dir = common::binary()
        .parent()
        .expect("the binary's directory")
        .to_owned();
    let status = Command::new("bash")
        .arg(repo.join("scripts/schema.sh"))
        .arg(&built)
        .env("INBOX_BIN_DIR", bin_dir)
        .status()
        .expect("run scripts/schema.sh");
    assert!(status.success(), "scripts/schema.sh failed");
    let built_text = std::fs::read_to_string(&built).expect("the dump");
    let _ = std::fs::remove_file(&built);
    let committed = std::fs::read_to_string(repo.join("docs/schema.sql")).expect("docs/schema.sql");
    assert!(
        built_text.contains("CREATE TABLE public.processed_inbox"),
        "the dump holds the ledger"
    );
    if let Some((line, (want, got))) = committed
        .lines()
        .zip(built_text.lines())
        .enumerate()
        .find(|(_, (want, got))| want != got)
    {
        panic!(
            "docs/schema.sql is not what the migrations build (run `make schema`): line {}: \
             {want:?} in the file, {got:?} built",
            line + 1
        );
    }
    assert_eq!(
        committed.lines().count(),
        built_text.lines().count(),
        "docs/schema.sql is not what the migrations build (run `make schema`)"
    );
}
