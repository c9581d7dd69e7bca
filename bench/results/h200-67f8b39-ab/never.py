"""Work never seen before (bench.sweep's part), printed compactly: tree's name in argv[1]."""
import json, sys
from bench._common import Config
from bench.sweep import _never_seen_all
out = {"never_seen": {}}
_never_seen_all(Config(), out)
for kind, r in out["never_seen"].items():
    for us, x in (r.get("by_length_us") or {}).items():
        L = x["lateness_us"]
        print(f"NEVER {sys.argv[1]} {kind} {us}us p50 {L.get('p50', float('nan')):.0f} p90 {L.get('p90', float('nan')):.0f} max {L.get('max', float('nan')):.0f} cpu/wait {x.get('cpu_us_per_wait', float('nan')):.0f} counters {x.get('counters')}", flush=True)
    if "error" in r or "skipped" in r:
        print("NEVER", sys.argv[1], kind, {k: r[k] for k in r if k in ("error", "skipped")})
