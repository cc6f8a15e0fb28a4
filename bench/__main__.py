"""Run every benchmark and print one table: ``python -m bench`` (``make bench``).

``BENCH_ONLY=b1,b4`` runs a subset. Each benchmark also runs alone
(``python -m bench.e2e_stream`` ...). Figures are ratios against baselines measured
in the same run on the same machine, never capacity.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
import traceback

from bench.common import Row, print_rows, save_rows

BENCHES = {
    "b1": "bench.e2e_stream",
    "b1sse": "bench.e2e_sse",
    "b2": "bench.approval_latency",
    "b3": "bench.dispatch",
    "b4": "bench.write_amplification",
    "b5": "bench.ws_memory",
    "b6": "bench.cold_start",
    "b7": "bench.throughput",
    "b8": "bench.mcp_gateway",
    "b9": "bench.big_history",
    "b10": "bench.queue",
}


def main() -> int:
    only = [
        b.strip().lower()
        for b in (os.environ.get("BENCH_ONLY") or "").split(",")
        if b.strip()
    ]
    rows: list[Row] = []
    failed = []
    for key, module in BENCHES.items():
        if only and key not in only:
            continue
        started = time.monotonic()
        print(f"== {key.upper()} ({module})", flush=True)
        try:
            result = importlib.import_module(module).main()
        except Exception:
            traceback.print_exc()
            failed.append(key)
            continue
        rows += result
        print_rows(result)
        print(f"   {time.monotonic() - started:.0f} s", flush=True)
    print(
        f"\n== All results ({time.strftime('%Y-%m-%d')}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()})"
    )
    print_rows(rows)
    save_rows("all", rows)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
