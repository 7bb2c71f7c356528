"""Gathers the reports of `make bench-network` into .local/bench/network.json
and prints them as one table beside docs/design.md#numbers's must and aim, with the ratios
to loopback. With --sweep, the lanes measurement into .local/bench/lanes.json.
"""
import json
import sys
from pathlib import Path

args = sys.argv[1:]
sweep = args[0] == "--sweep"
if sweep:
    args = args[1:]
out = Path(args[0])
bench = out.parent
load = lambda name: json.loads((out / f"{name}.json").read_text())


def reconciled(*reports):
    return all(r["reconciliation"]["ok"] for r in reports)


if sweep:
    lanes = args[1].split()
    table = {}
    print(f"\n{'lanes':<6} {'RTT':>6} {'max events/s':>13} {'steady p95':>11} {'steady p99':>11}")
    for rtt in ("0", "2", "10"):
        for n in lanes:
            top, steady = load(f"lanes{n}_rtt{rtt}_max"), load(f"lanes{n}_rtt{rtt}_steady")
            row = {
                "max_throughput_eps": top["throughput_eps"],
                "steady_e2e_ms": steady["e2e_latency_ms"],
                "reconciled": reconciled(top, steady),
            }
            table[f"lanes{n}_rtt{rtt}"] = row
            print(f"{n:<6} {rtt + ' ms':>6} {row['max_throughput_eps']:>13,.0f} "
                  f"{steady['e2e_latency_ms']['p95']:>8.1f} ms {steady['e2e_latency_ms']['p99']:>8.1f} ms"
                  + ("" if row["reconciled"] else "  NOT RECONCILED"))
    (bench / "lanes.json").write_text(json.dumps(table, indent=2))
    print(f"\nresults: {bench / 'lanes.json'}")
    sys.exit(0 if all(r["reconciled"] for r in table.values()) else 1)

rtts = args[1].split()
rows = {}
for label in ["loopback"] + [f"rtt{r}" for r in rtts]:
    steady, top, backlog = load(f"{label}_steady"), load(f"{label}_max"), load(f"{label}_backlog")
    spike_batch = backlog.get("batch_duration_spike_ms") or backlog["batch_duration_ms"]
    rows[label] = {
        "steady_e2e_ms": steady["e2e_latency_ms"],
        "steady_batch_ms": steady["batch_duration_ms"],
        "steady_produce_ack_ms": steady.get("produce_ack_ms"),
        "steady_throughput_eps": steady["throughput_eps"],
        "max_throughput_eps": top["throughput_eps"],
        "catch_up_seconds": backlog["catch_up_seconds"],
        "catch_up_batch_p95_ms": spike_batch["p95"],
        "reconciled": reconciled(steady, top, backlog),
        "lost_events": sum(r["reconciliation"]["lost_events"] for r in (steady, top, backlog)),
        "doubled_events": sum(r["reconciliation"]["doubled_events"] for r in (steady, top, backlog)),
    }
base = rows["loopback"]
for row in rows.values():
    row["p95_vs_loopback"] = row["steady_e2e_ms"]["p95"] / base["steady_e2e_ms"]["p95"]
    row["max_vs_loopback"] = row["max_throughput_eps"] / base["max_throughput_eps"]

# docs/design.md#numbers: (figure, row, value, must, aim, passes must, meets aim)
checks = []
def check(figure, label, value, must, aim, ok_must, ok_aim):
    if label in rows:
        checks.append({"figure": figure, "measured": value, "must": must, "aim": aim,
                       "must_met": ok_must, "aim_met": ok_aim})
for label, must, aim in (("rtt2", 20, 15), ("rtt10", 45, 25)):
    if label in rows:
        p95 = rows[label]["steady_e2e_ms"]["p95"]
        check(f"steady 1,400/s e2e p95 at {label[3:]} ms RTT", label, f"{p95:.1f} ms",
              f"<= {must} ms", f"<= {aim} ms", p95 <= must, p95 <= aim)
if "rtt50" in rows:
    r = rows["rtt50"]
    keeps_up = r["reconciled"] and r["steady_throughput_eps"] >= 1400 * 0.9
    check("steady 1,400/s at 50 ms RTT", "rtt50",
          f"{r['steady_throughput_eps']:,.0f}/s, p95 {r['steady_e2e_ms']['p95']:.1f} ms",
          "keeps up, reconciled", "p95 <= 115 ms", keeps_up, r["steady_e2e_ms"]["p95"] <= 115)
if "rtt10" in rows:
    r = rows["rtt10"]
    check("max throughput at 10 ms RTT", "rtt10", f"{r['max_throughput_eps']:,.0f}/s",
          ">= 5,000/s", ">= 15,000/s", r["max_throughput_eps"] >= 5000, r["max_throughput_eps"] >= 15000)
    check("catch-up of a 60 s backlog at 10 ms RTT", "rtt10", f"{r['catch_up_seconds']:.1f} s",
          "< 60 s", "<= 10 s", r["catch_up_seconds"] < 60, r["catch_up_seconds"] <= 10)
check("lost / applied twice, every run", "loopback",
      f"{sum(r['lost_events'] for r in rows.values())} / {sum(r['doubled_events'] for r in rows.values())}",
      "0 / 0", "0 / 0", all(r["reconciled"] for r in rows.values()), all(r["reconciled"] for r in rows.values()))

(bench / "network.json").write_text(json.dumps({"rows": rows, "checks": checks}, indent=2))

print(f"\n{'RTT':<9} {'steady p50 / p95 / p99':>26} {'batch p95':>10} {'max events/s':>13} "
      f"{'catch-up':>9} {'batch p95':>10} {'p95 x':>6} {'max x':>6}")
for label, r in rows.items():
    e = r["steady_e2e_ms"]
    name = "loopback" if label == "loopback" else f"{label[3:]} ms"
    print(f"{name:<9} {e['p50']:>7.1f} / {e['p95']:>6.1f} / {e['p99']:>6.1f} ms "
          f"{r['steady_batch_ms']['p95']:>7.1f} ms {r['max_throughput_eps']:>13,.0f} "
          f"{r['catch_up_seconds'] or float('nan'):>7.1f} s {r['catch_up_batch_p95_ms']:>7.1f} ms "
          f"{r['p95_vs_loopback']:>6.2f} {r['max_vs_loopback']:>6.2f}"
          + ("" if r["reconciled"] else "  NOT RECONCILED"))
print("(batch p95 after the max: while catching up the backlog; x: ratio to loopback)\n")
width = max(len(c["figure"]) for c in checks)
print(f"{'figure':<{width}}  {'measured':<28} {'must':<21} {'aim':<14} must met")
for c in checks:
    print(f"{c['figure']:<{width}}  {c['measured']:<28} {c['must']:<21} {c['aim']:<14} "
          f"{'yes' if c['must_met'] else 'NO'}{'' if not c['aim_met'] else ' (aim met)'}")
print(f"\nresults: {bench / 'network.json'}")
sys.exit(0 if all(r["reconciled"] for r in rows.values()) else 1)
