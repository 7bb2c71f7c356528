//! The store against the reference model (the `model/` crate): generated
//! sequences of batches applied in-process by `Inbox::apply` to a real,
//! fresh PostgreSQL database per case, and after every batch the tables
//! (ledger, order lines, stock, parked rows, positions) and the batch's
//! counts must be what the model says
//! (docs/design.md#checked-against-a-model).
//!
//! The inputs are drawn from a deliberately small space (24 ids, four of
//! them drawn as often as the other twenty; 5 orders; 3 SKUs with little
//! stock and one unknown; 3 partitions; 2 consumers; days around the
//! window's edges), so that collisions are the rule: producer retries, the
//! same event written out again or sent as a structured CloudEvent, an id
//! reused for another payload or another day, another event of the same
//! order, unknown SKUs, scarce stock, invalid records (every reason of the
//! event's own), odd headers, days outside the window, an order the
//! database refuses (the store splits the batch until it is alone),
//! redeliveries after a rewind, repeats within and across batches, members
//! restarted, filters of closed days built by maintenance between polls,
//! and polls applied through concurrent lanes.
//!
//! Each case gets a database made from a migrated template (`CREATE
//! DATABASE … TEMPLATE`, made once per run), dropped after it passes; names
//! begin with `inbox_test_` so that `scripts/services.sh prune` removes any
//! a crash left. `MODEL_CASES` sets the number of cases (default 24, about
//! 20 s; `make verify` runs 2,000). A failure is shrunk to a minimal case
//! (at most `MODEL_SHRINK_ITERS` steps, 10,000 by default, 0 for none) and
//! kept in `tests/proptest-regressions/model_store.txt`, which is replayed
//! first on every run.
//!
//! Layout: `generate` (the inputs: messages, partition logs, polls made
//! batches), `database` (the template, a copy per case, the tables read
//! back), `lanes` (polls applied concurrently, and the schedules their
//! outcome may be that of); this file compares, runs a case, and is the
//! test.

// The parts of this test, in tests/model_store/ (a test's root file looks
// for its modules beside it, in tests/).
#[path = "model_store/database.rs"]
mod database;
#[path = "model_store/generate.rs"]
mod generate;
#[path = "model_store/lanes.rs"]
mod lanes;

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures::FutureExt;

use inbox_model::{diff, Counts, Model, Tables};
use inventory_inbox::store::{build_next_filter, register_codes, BatchOutcome, Inbox, StoreError};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

use database::Server;
use generate::{batches, case, logs, Batch, Case};
use inbox_model::database::tables;
use lanes::{apply, lanes, schedules, Lanes};

const TOPIC: &str = "orders.placed.v1";
/// The ledger's retention of the template: a short window, so that its
/// edges are often crossed.
const RETENTION_DAYS: u64 = 3;
const CONSUMERS: [&str; 2] = ["inventory-allocation-service", "audit"];
const ORDERS: [&str; 5] = ["O-0", "O-1", "O-2", "O-3", REFUSED_ORDER];
/// The database refuses this order's lines (a CHECK constraint the
/// template adds), so a batch holding one is split by the store.
const REFUSED_ORDER: &str = "REFUSED";
/// The last is not in `inventory_stock`.
const SKUS: [&str; 4] = ["S-0", "S-1", "S-2", "S-9"];
const KNOWN_SKUS: usize = 3;
/// Ids of events: the first few are drawn far more often than the rest.
const IDS: u8 = 24;
const COMMON_IDS: u8 = 4;
const PARTITIONS: u8 = 3;
const MAX_BATCH: usize = 100;

// ---------------------------------------------------------------------------
// The comparison.

/// The store's outcome in the model's terms.
fn counts(outcome: &BatchOutcome) -> Counts {
    let mut newly_parked: Vec<(i32, i64, String)> = outcome
        .newly_parked
        .iter()
        .map(|row| (row.partition, row.offset, row.reason.as_str().to_owned()))
        .collect();
    newly_parked.sort();
    Counts {
        processed: outcome.processed,
        business_duplicates: outcome.business_duplicates,
        duplicates: outcome.duplicates,
        lines_reserved: outcome.lines_reserved,
        lines_rejected: outcome.lines_rejected,
        newly_parked,
    }
}

// ---------------------------------------------------------------------------
// One case.

/// Applies the case's batches to the store and to the model; after each,
/// the database must be what the model holds. `Err`: what differs.
async fn run_case(server: &Server, case: &Case) -> Result<(), String> {
    let on_hand: BTreeMap<String, i64> = SKUS[..KNOWN_SKUS]
        .iter()
        .zip(case.on_hand)
        .map(|(sku, n)| (sku.to_string(), n))
        .collect();
    let logs = logs(case, server.today);
    let batches = batches(case, &logs);
    let mut model = Model::new(
        server.today,
        RETENTION_DAYS,
        on_hand.clone(),
        Some(REFUSED_ORDER.into()),
    );
    if server.gone().is_some() {
        return Ok(());
    }
    let (name, pool) = match server.database(&on_hand).await {
        Ok(database) => database,
        Err(why) => {
            server.lost(why);
            return Ok(());
        }
    };
    let mut inboxes: HashMap<&str, Inbox> = HashMap::new();
    let mut result = Ok(());
    for (n, batch) in batches.iter().enumerate() {
        if batch.restart || !inboxes.contains_key(batch.consumer) {
            // As `run` does at start-up, before its first batch: a batch
            // that made the codes itself would hold them uncommitted while
            // other lanes wait (src/store/schema.rs).
            register_codes(&pool.clone().into(), batch.consumer, &[TOPIC.to_owned()])
                .await
                .expect("register the ledger's codes");
            inboxes.insert(
                batch.consumer,
                Inbox::new(pool.clone().into(), batch.consumer.into()),
            );
        }
        if batch.filters {
            // What maintenance builds now; a build that waits too long for
            // older transactions of the server leaves the day for later.
            while let Some(built) = build_next_filter(&pool.clone().into())
                .await
                .expect("build a filter")
            {
                server.note(&format!(
                    "filters built ({} ids)",
                    if built.ids > 0 { "with" } else { "no" }
                ));
            }
        }
        let lanes = lanes(batch, &model);
        let outcomes = apply(&pool, &inboxes[batch.consumer], &lanes).await;
        let differences = match tables(&pool).await {
            Ok((found, mut differences)) => {
                match judge(&mut model, batch.consumer, &lanes, &outcomes, &found) {
                    Ok(counts) => {
                        if lanes.lanes.len() > 1 {
                            server.note("polls applied through concurrent lanes");
                        }
                        if lanes.fell_back {
                            server.note("polls through lanes applied as one batch");
                        }
                        if lanes.splitting.is_some() {
                            server.note("polls through lanes, one of them split");
                        }
                        for (lane, counts) in lanes.lanes.iter().zip(&counts) {
                            server.count(lane.len(), counts);
                        }
                    }
                    Err(found) => differences.extend(found),
                }
                differences
            }
            Err(error) => vec![format!("reading the tables: {error}")],
        };
        if !differences.is_empty() {
            result = Err(report(&batches[..=n], &differences));
            break;
        }
    }
    drop(inboxes);
    pool.close().await;
    match result {
        Ok(()) => server.drop_database(&name).await,
        Err(_) => server.keep(name).await,
    }
    result
}

/// Adds `more` to `counts`.
fn add(counts: &mut Counts, more: Counts) {
    counts.processed += more.processed;
    counts.business_duplicates += more.business_duplicates;
    counts.duplicates += more.duplicates;
    counts.lines_reserved += more.lines_reserved;
    counts.lines_rejected += more.lines_rejected;
    counts.newly_parked.extend(more.newly_parked);
    counts.newly_parked.sort();
}

/// The model fed the lanes in each schedule in turn (one lane: just it):
/// the first whose tables and counts are the database's is what happened,
/// as concurrent batches must be equivalent to one after the other. `Ok`:
/// each lane's counts, and the model moved on; `Err`: the differences from
/// poll order.
fn judge(
    model: &mut Model,
    consumer: &str,
    lanes: &Lanes,
    outcomes: &[Result<BatchOutcome, StoreError>],
    found: &Tables,
) -> Result<Vec<Counts>, Vec<String>> {
    let mut first_differences = None;
    for schedule in schedules(lanes) {
        let mut fed = model.clone();
        let mut expected = vec![Counts::default(); lanes.lanes.len()];
        for (lane, records) in schedule {
            add(
                &mut expected[lane],
                fed.apply_batch(consumer, &lanes.lanes[lane][records]),
            );
        }
        let mut differences = Vec::new();
        for (lane, (outcome, expected)) in outcomes.iter().zip(&expected).enumerate() {
            match outcome {
                Ok(outcome) if counts(outcome) != *expected => differences.push(format!(
                    "counts of lane {lane}: model {expected:?}, store {:?}",
                    counts(outcome)
                )),
                Ok(_) => {}
                Err(error) => differences.push(format!("lane {lane}: the store failed: {error}")),
            }
        }
        diff(fed.tables(), found, &mut differences);
        if differences.is_empty() {
            *model = fed;
            return Ok(expected);
        }
        first_differences.get_or_insert(differences);
    }
    let mut differences = first_differences.expect("at least one schedule");
    if lanes.lanes.len() > 1 {
        differences.insert(
            0,
            format!(
                "no schedule of the {} lanes gives the database; from poll order:",
                lanes.lanes.len()
            ),
        );
    }
    Err(differences)
}

/// The batches up to the failing one, record by record, and the differences.
fn report(batches: &[Batch], differences: &[String]) -> String {
    let mut text = String::from("the database differs from the model\n");
    for (n, batch) in batches.iter().enumerate() {
        text.push_str(&format!(
            "batch {n} of {}{}{}{}:\n",
            batch.consumer,
            if batch.restart { " (restarted)" } else { "" },
            if batch.lanes { " (lanes)" } else { "" },
            if batch.filters {
                " (after building filters)"
            } else {
                ""
            }
        ));
        for record in &batch.records {
            let payload = record
                .payload
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let headers: Vec<String> = record
                .headers
                .iter()
                .map(|h| {
                    let value = h.value.as_deref().map(String::from_utf8_lossy);
                    format!("{}={}", h.key, value.unwrap_or_default())
                })
                .collect();
            text.push_str(&format!(
                "  p{}@{} {headers:?} {payload}\n",
                record.partition, record.offset
            ));
        }
    }
    text.push_str("after the last batch:\n");
    for line in differences {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

// ---------------------------------------------------------------------------

/// Cases to run: `MODEL_CASES`, else a few seconds' worth.
fn cases() -> u32 {
    count_from_env("MODEL_CASES", 24)
}

/// Shrinking steps at most: `MODEL_SHRINK_ITERS`, else 10,000.
fn shrink_iters() -> u32 {
    count_from_env("MODEL_SHRINK_ITERS", 10_000)
}

/// The number in the variable `name`, else `default`; anything else in it
/// stops the test, naming the variable.
fn count_from_env(name: &str, default: u32) -> u32 {
    match std::env::var(name) {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("{name} is a whole number, not {n:?}")),
        Err(_) => default,
    }
}

#[test]
fn the_database_equals_the_model_after_every_batch() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let server = runtime.block_on(Server::start());
    let cases = cases();
    let config = Config {
        cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/proptest-regressions/model_store.txt"
        )))),
        // Each shrinking step is a database of its own: at most 10 minutes,
        // and MODEL_SHRINK_ITERS steps (`make mutants` wants none: a mutant
        // is caught by the first failure).
        max_shrink_iters: shrink_iters(),
        max_shrink_time: 600_000,
        ..Config::default()
    };
    let started = Instant::now();
    let result = TestRunner::new(config).run(&case(), |case| {
        runtime.block_on(async {
            let ran = AssertUnwindSafe(run_case(&server, &case))
                .catch_unwind()
                .await;
            if !matches!(ran, Ok(Ok(()))) && !server.template_exists().await {
                server.lost("the template was dropped during a case".into());
                return Ok(());
            }
            match ran {
                Ok(compared) => compared.map_err(TestCaseError::fail),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    });
    let took = started.elapsed().max(Duration::from_millis(1));
    let tally = std::mem::take(&mut *server.tally.lock().expect("tally lock"));
    let gone = server.gone();
    runtime.block_on(server.stop());
    if let Some(why) = gone {
        panic!(
            "the run's databases were dropped under it ({why}; `scripts/services.sh prune`?): \
             nothing is known of the store; run it again"
        );
    }
    if let Err(failure) = result {
        panic!("{failure}");
    }
    println!("outcomes over every case (failing ones included): {tally:?}");
    println!(
        "{cases} cases in {:.1} s: {:.0} cases per minute",
        took.as_secs_f64(),
        f64::from(cases) * 60.0 / took.as_secs_f64()
    );
}
