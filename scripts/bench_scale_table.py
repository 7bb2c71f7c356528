"""Gathers the reports of `make bench-scale` into scale.json and prints the
empty and history figures side by side with the must/aim of SPEC §14
(docs/design.md#storage). Each round ran the empty database and then the
history: a figure is the mean of the rounds, a ratio the mean of the
rounds' ratios, each round's given too."""
import json
import sys
from pathlib import Path

out, history_events, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
load = lambda name: json.loads((out / f"{name}.json").read_text())


def snapshot(name):
    rows = {}
    for line in (out / f"{name}.txt").read_text().split("\n"):
        if line.strip():
            table, heap, index, count, vacuums, analyzes = line.split()
            rows[table] = dict(heap=int(heap), index=int(index), rows=int(count),
                               autovacuums=int(vacuums), autoanalyzes=int(analyzes))
    return rows


def size_figures(size):
    steady, most, ceiling = load(f"scale_{size}_steady"), load(f"scale_{size}_max"), load(f"scale_{size}_ceiling")
    before, after = snapshot(f"scale_{size}_before"), snapshot(f"scale_{size}_after")
    events = ceiling["events"]
    grew = lambda t: (after[t]["heap"] + after[t]["index"]) - (before[t]["heap"] + before[t]["index"])
    new_lines = after["order_reservation"]["rows"] - before["order_reservation"]["rows"]
    return {
        "steady_e2e_p50_ms": steady["e2e_latency_ms"]["p50"],
        "steady_e2e_p95_ms": steady["e2e_latency_ms"]["p95"],
        "steady_e2e_p99_ms": steady["e2e_latency_ms"]["p99"],
        "steady_batch_p95_ms": steady["batch_duration_ms"]["p95"],
        "max_throughput_eps": most["throughput_eps"],
        "db_only_ceiling_eps": ceiling["events_per_second"],
        "statement_ms_per_100_events": 100_000 / ceiling["events_per_second"],
        "ledger_bytes_per_event": grew("processed_inbox") / events,
        "reservation_bytes_per_line": grew("order_reservation") / max(new_lines, 1),
        "wal_bytes_per_event": (after["wal"]["heap"] - before["wal"]["heap"]) / events,
        "ledger_rows": after["processed_inbox"]["rows"],
        "reservation_rows": after["order_reservation"]["rows"],
        "ledger_index_bytes": after["processed_inbox"]["index"],
        "reservation_index_bytes": after["order_reservation"]["index"],
        "ledger_heap_bytes": after["processed_inbox"]["heap"],
        "reservation_heap_bytes": after["order_reservation"]["heap"],
        "autovacuums_during_ceiling": sum(after[t]["autovacuums"] - before[t]["autovacuums"] for t in after if t != "wal"),
        "autoanalyzes_during_ceiling": sum(after[t]["autoanalyzes"] - before[t]["autoanalyzes"] for t in after if t != "wal"),
        "reconciliation_ok": steady["reconciliation"]["ok"] and most["reconciliation"]["ok"],
    }


def mean(runs):
    figures = {}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            figures[key] = all(run[key] for run in runs)
        else:
            figures[key] = sum(run[key] for run in runs) / len(runs)
    return figures


empties = [size_figures(f"empty_{r}") for r in range(1, rounds + 1)]
histories = [size_figures(f"history_{r}") for r in range(1, rounds + 1)]
empty, history = mean(empties), mean(histories)
ratios = lambda key: [h[key] / e[key] for e, h in zip(empties, histories)]
results = {
    "history_events": history_events,
    "rounds": rounds,
    "empty": empty,
    "history": history,
    "empty_rounds": empties,
    "history_rounds": histories,
    "steady_p95_history_vs_empty_rounds": ratios("steady_e2e_p95_ms"),
    "max_throughput_history_vs_empty_rounds": ratios("max_throughput_eps"),
    "steady_p95_history_vs_empty": sum(ratios("steady_e2e_p95_ms")) / rounds,
    "max_throughput_history_vs_empty": sum(ratios("max_throughput_eps")) / rounds,
}
(out / "scale.json").write_text(json.dumps(results, indent=2))

fmt = lambda v, spec: format(v, spec)
rows = [
    ("steady 1,400/s e2e p50 / p95 / p99 (ms)", lambda f: f"{f['steady_e2e_p50_ms']:.1f} / {f['steady_e2e_p95_ms']:.1f} / {f['steady_e2e_p99_ms']:.1f}"),
    ("steady batch p95 (ms)", lambda f: f"{f['steady_batch_p95_ms']:.1f}"),
    ("max throughput (events/s)", lambda f: f"{f['max_throughput_eps']:,.0f}"),
    ("db-only ceiling (events/s)", lambda f: f"{f['db_only_ceiling_eps']:,.0f}"),
    ("statement time per 100 events (ms)", lambda f: f"{f['statement_ms_per_100_events']:.1f}"),
    ("ledger bytes per event", lambda f: f"{f['ledger_bytes_per_event']:.0f}"),
    ("reservation bytes per line", lambda f: f"{f['reservation_bytes_per_line']:.0f}"),
    ("WAL bytes per event", lambda f: f"{f['wal_bytes_per_event']:.0f}"),
    ("ledger / reservation rows", lambda f: f"{f['ledger_rows']:,.0f} / {f['reservation_rows']:,.0f}"),
    ("ledger / reservation index MB", lambda f: f"{f['ledger_index_bytes'] / 1e6:,.0f} / {f['reservation_index_bytes'] / 1e6:,.0f}"),
    ("autovacuum / autoanalyze runs (ceiling)", lambda f: f"{f['autovacuums_during_ceiling']:g} / {f['autoanalyzes_during_ceiling']:g}"),
    ("reconciled", lambda f: "yes" if f["reconciliation_ok"] else "NO"),
]
print(f"| figure (mean of {rounds} rounds) | empty | {history_events:,} events of history |")
print("|---|---|---|")
for name, show in rows:
    print(f"| {name} | {show(empty)} | {show(history)} |")
each = lambda key: " ".join(f"{r:.2f}" for r in results[key])
print(f"\nhistory/empty: steady p95 {results['steady_p95_history_vs_empty']:.2f} "
      f"(rounds: {each('steady_p95_history_vs_empty_rounds')}), "
      f"max throughput {results['max_throughput_history_vs_empty']:.2f} "
      f"(rounds: {each('max_throughput_history_vs_empty_rounds')}) (must: within 10 %)")
