#!/usr/bin/env python3
"""Draws docs/benchmarks.png from the bench's results.json.

    python3 benches/operators/chart.py target/bench/results.json docs/benchmarks.png

Installs matplotlib into a virtualenv under ~/.cache/enka/tools on first use
and re-executes itself there.
"""

import json
import os
import subprocess
import sys
import venv

MATPLOTLIB = "matplotlib==3.10.8"
VENV = os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
    "enka", "tools", MATPLOTLIB.replace("==", "-"),
)


def ensure_venv():
    python = os.path.join(VENV, "bin", "python3")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(os.path.join(VENV, ".complete")):
        venv.create(VENV, with_pip=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", MATPLOTLIB], check=True)
        open(os.path.join(VENV, ".complete"), "w").close()
    os.execv(python, [python, __file__, *sys.argv[1:]])


def percentile(samples, p):
    ordered = sorted(samples)
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def main(results_path, chart_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(results_path) as f:
        results = json.load(f)

    systems = [("bare API calls", results["bare"], "#999999"),
               ("enka", results["enka"], "#d62728"),
               ("upstream", results["upstream"], "#1f77b4")]
    systems = [(name, data, colour) for name, data, colour in systems if data]

    fig, (latency, memory) = plt.subplots(1, 2, figsize=(12, 4.5))

    names = [name for name, _, _ in systems]
    for offset, (p, hatch) in enumerate([(50, None), (99, "//")]):
        values = [percentile(data["latency_ms"], p) for _, data, _ in systems]
        positions = [i + (offset - 0.5) * 0.38 for i in range(len(systems))]
        bars = latency.bar(positions, values, width=0.36, hatch=hatch,
                           color=[colour for _, _, colour in systems], edgecolor="black",
                           label=f"p{p}")
        latency.bar_label(bars, labels=[f"{v:.0f}" if v >= 10 else f"{v:.1f}" for v in values],
                          fontsize=8, padding=2)
    latency.set_yscale("log")
    latency.set_xticks(range(len(systems)), names)
    latency.set_ylabel("ms, log scale")
    latency.set_title("Memcached created → Deployment exists (p50, p99 hatched)")

    scale = results["scale"]
    memory.plot([p["crs"] for p in scale], [p["rss_mib"] for p in scale], "o-",
                color="#d62728", label="enka RSS")
    memory.plot([p["crs"] for p in scale], [p["heap_mib"] for p in scale], "o:",
                color="#d62728", label="enka anonymous RSS (heap)")
    for name, data, colour in systems:
        if name == "bare API calls":
            continue
        memory.plot([0, data["burst_crs"]], [data["idle_rss_mib"], data["rss_after_burst_mib"]],
                    "s--", color=colour, label=f"{name} (idle, after burst)")
    memory.set_xlabel("Memcacheds")
    memory.set_ylabel("operator RSS, MiB")
    memory.set_ylim(bottom=0)
    memory.set_title("Operator memory as custom resources grow")
    memory.legend()

    fig.tight_layout()
    fig.savefig(chart_path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ensure_venv()
    main(sys.argv[1], sys.argv[2])
