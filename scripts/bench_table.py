"""Gathers the reports of `make bench` into results.json and prints the
figures next to the must/aim columns of docs/design.md#numbers."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
load = lambda name: json.loads((out / f"{name}.json").read_text())
steady, spike = load("steady"), load("lag_spike")
batch, per_record, ceiling = load("max_batch"), load("max_per_record"), load("db_ceiling")
floor = load("floor")

spike_batch = spike.get("batch_duration_spike_ms") or spike["batch_duration_ms"]
ratio = batch["throughput_eps"] / per_record["throughput_eps"]
results = {
    "steady_e2e_p95_ms": steady["e2e_latency_ms"]["p95"],
    "steady_e2e_p99_ms": steady["e2e_latency_ms"]["p99"],
    "steady_batch_p95_ms": steady["batch_duration_ms"]["p95"],
    "catch_up_batch_p95_ms": spike_batch["p95"],
    "catch_up_seconds": spike["catch_up_seconds"],
    "max_throughput_eps": batch["throughput_eps"],
    "per_record_throughput_eps": per_record["throughput_eps"],
    "batch_vs_per_record": ratio,
    "db_only_ceiling_eps": ceiling["events_per_second"],
    "pipeline_fraction_of_ceiling": batch["throughput_eps"] / ceiling["events_per_second"],
    "floor_eps": floor["events_per_second"],
    "ceiling_over_floor": ceiling["events_per_second"] / floor["events_per_second"],
    "reconciliation_ok": all(r["reconciliation"]["ok"] for r in (steady, spike, batch, per_record)),
    "doubled_events": sum(r["reconciliation"]["doubled_events"] for r in (steady, spike, batch, per_record)),
    "lost_events": sum(r["reconciliation"]["lost_events"] for r in (steady, spike, batch, per_record)),
    "reports": {n: load(n) for n in ("steady", "lag_spike", "max_batch", "max_per_record", "db_ceiling", "floor")},
}
(out / "results.json").write_text(json.dumps(results, indent=2))

rows = [
    ("steady 1,400/s, end-to-end p95", f"{results['steady_e2e_p95_ms']:.1f} ms", "<= 45 ms", "<= 15 ms"),
    ("steady 1,400/s, end-to-end p99", f"{results['steady_e2e_p99_ms']:.1f} ms", "-", "<= 45 ms"),
    ("batch p95 while catching up 60 s", f"{results['catch_up_batch_p95_ms']:.1f} ms", "<= 45 ms", "<= 20 ms"),
    ("catch-up of a 60 s backlog", f"{results['catch_up_seconds']:.1f} s", "< 60 s", "<= 5 s"),
    ("max throughput, batches of 100", f"{results['max_throughput_eps']:,.0f}/s", ">= 5,000/s", ">= 25,000/s"),
    ("vs per-record baseline", f"{ratio:.1f}x ({results['per_record_throughput_eps']:,.0f}/s)", ">= 5x", ">= 15x"),
    ("db-only ceiling / pipeline share", f"{results['db_only_ceiling_eps']:,.0f}/s / {results['pipeline_fraction_of_ceiling']:.0%}", "-", "-"),
    ("floor: the statement's rows written bare", f"{results['floor_eps']:,.0f}/s", "-", "-"),
    ("ceiling / floor", f"{results['ceiling_over_floor']:.2f}", ">= 0.5", ">= 0.7"),
    ("applied twice / lost", f"{results['doubled_events']} / {results['lost_events']}", "0 / 0", "0 / 0"),
]
width = max(len(r[0]) for r in rows)
print(f"\n{'figure':<{width}}  {'measured':<26} {'must':<11} aim")
for figure, value, must, aim in rows:
    print(f"{figure:<{width}}  {value:<26} {must:<11} {aim}")
print(f"\nresults: {out / 'results.json'}")
sys.exit(0 if results["reconciliation_ok"] else 1)
