"""Score specsim's KV-pool model (specsim.physics.memory) against published engine startup lines.

    python calibration/check_kv_pool.py            # markdown table (the README's), one row per point
    python calibration/check_kv_pool.py --json     # the same rows as JSON

Data: calibration/datasets/published-kv-pool.json (each point with its source and quote). Fitted points are marked:
the engine presets' reserves were set from them (models/engines.json sources); every other point is held out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATASET = Path(__file__).resolve().parent / "datasets" / "published-kv-pool.json"
#: points an engine preset's reserve was fitted to (models/engines.json kv_reserve_* sources)
FITTED = {"lmcache-faq-qwen3-8b", "vllm2031-llama2-7b-a100-tp1-pr", "sglang4760-llama31-8b-h100-fa3"}


def rows(path: Path = DATASET) -> list[dict]:
    """One row per point with a model preset: published and modeled tokens, the error, fitted or held out."""
    from specsim.analysis.build import build_scenario
    from specsim.physics.cost import weight_bytes_per_rank
    from specsim.physics.memory import kv_pool_tokens
    from specsim.physics.params import scenario_params

    out = []
    for pt in json.loads(path.read_text())["points"]:
        if not pt.get("model"):
            continue
        engine = "vllm-v0" if pt.get("vllm_engine") == "v0" else pt["engine"]
        frac = (pt.get("mem_fraction_static") or pt.get("mem_fraction_static_default") if pt["engine"] == "sglang"
                else pt.get("gpu_memory_utilization"))
        sc = build_scenario(model=pt["model"], gpu=pt["gpu"], tp=pt["tp"], engine=engine,
                            dtype="fp8" if pt.get("weights_dtype") == "fp8" else None, mem_fraction=frac)
        p = scenario_params(sc)
        modeled = kv_pool_tokens(p, weight_bytes_per_rank(p), speculative=False)
        out.append({"id": pt["id"], "engine": engine, "gpu": pt["gpu"], "model": pt["model"], "tp": pt["tp"],
                    "mem_fraction": frac, "published_tokens": pt["kv_pool_tokens"], "modeled_tokens": round(modeled),
                    "error_pct": 100 * (modeled / pt["kv_pool_tokens"] - 1), "fitted": pt["id"] in FITTED,
                    "source": pt["source"]["url"]})
    return out


def main(argv: list[str]) -> None:
    table = rows()
    if "--json" in argv:
        print(json.dumps(table, indent=1))
        return
    print("| point | engine | GPU x TP | model | mem fraction | published tokens | modeled | error | |")
    print("|---|---|---|---|---:|---:|---:|---:|---|")
    for r in table:
        frac = "default" if r["mem_fraction"] is None else f"{r['mem_fraction']:g}"
        print(f"| [{r['id']}]({r['source']}) | {r['engine']} | {r['gpu']} x{r['tp']} | {r['model']} | {frac} | "
              f"{r['published_tokens']:,} | {r['modeled_tokens']:,} | {r['error_pct']:+.1f} % | "
              f"{'fitted' if r['fitted'] else 'held out'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
