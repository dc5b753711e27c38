"""What-if levers: direction of each effect, the seed's NCCL tuning, CLI round trips."""

import json

import pytest

from specsim.analysis.whatif import (
    seed_nccl_tuning,
    whatif_allreduce,
    whatif_gpu,
    whatif_graph,
    whatif_overlap,
    whatif_quant,
    whatif_tp,
)
from specsim.errors import SpecsimError


def test_seed_nccl_tuning_reproduces_measured_cut():
    w = seed_nccl_tuning()
    assert 1 - w.after.verify_ms / w.before.verify_ms == pytest.approx(0.27, abs=0.03)
    assert w.after.tok_s > w.before.tok_s
    assert w.before.baseline_tok_s == pytest.approx(w.after.baseline_tok_s)


def test_allreduce_scale_direction():
    w = whatif_allreduce(scale=0.5)
    assert w.after.verify_breakdown_ms["allreduce"] == pytest.approx(0.5 * w.before.verify_breakdown_ms["allreduce"], rel=0.05)
    assert w.after.tok_s > w.before.tok_s


def test_graph_capture_of_verify_helps_eager_seed():
    w = whatif_graph(phase="verify", on=True)
    assert w.after.verify_ms < w.before.verify_ms
    assert w.after.verify_breakdown_ms["launch"] < w.before.verify_breakdown_ms["launch"]


def test_overlap_hides_host():
    w = whatif_overlap(on=True)
    assert w.after.phases_ms["host"] < w.before.phases_ms["host"]


def test_gpu_swap_faster_memory_helps():
    w = whatif_gpu(to="b200")
    assert w.after.baseline_tok_s > w.before.baseline_tok_s


def test_quant_bf16_experts_slow_moe():
    w = whatif_quant(dtype="bf16")
    assert w.after.verify_breakdown_ms["weights"] > w.before.verify_breakdown_ms["weights"]


def test_tp_change_warns_when_weights_do_not_fit():
    w = whatif_tp(to=4)
    assert any("GB per rank" in x for x in w.after.warnings)


@pytest.mark.parametrize("fn,kw", [(whatif_allreduce, {}), (whatif_allreduce, {"scale": -1.0}), (whatif_graph, {"phase": "x", "on": True}),
                                   (whatif_quant, {"dtype": "int3"}), (whatif_gpu, {"to": "x100"})])
def test_bad_levers(fn, kw):
    with pytest.raises(SpecsimError):
        fn(**kw)


def test_cli_whatif(run_cli):
    code, out, _ = run_cli("whatif", "allreduce", "--seed-nccl-tuning", "--json")
    d = json.loads(out)
    assert code == 0 and d["delta"]["verify ms"]["delta_pct"] < -20
    code, out, _ = run_cli("whatif", "training", "--json")
    d = json.loads(out)
    assert code == 0 and d["tau_target"] > d["tau_now"] and d["payback_days"] > 0
    code, out, _ = run_cli("whatif", "gpu", "--to", "h100", "--format", "markdown")
    assert code == 0 and "| tok/s |" in out
    code, _, err = run_cli("whatif", "training", "--data", "37K=2.1", "--gpu-hours-per-100k", "-5")
    assert code == 2 and "gpu-hours" in err


def test_cli_explain(run_cli):
    code, out, _ = run_cli("explain")
    assert code == 0 and "Break-even" in out
    code, out, _ = run_cli("explain", "--format", "latex")
    assert code == 0 and "\\frac" in out


@pytest.mark.parametrize("model, target", [("llama-3.1-8b", "all"), ("qwen3-30b-a3b", "routed_experts")])
def test_quant_takes_every_dtype_and_fewer_bytes_are_less_weight_time(model, target):
    """The what-if takes the deployment flag's dtypes (bf16, fp8, int4) and every other one the physics has bytes
    for; the weights' memory time follows the bytes per weight (smaller weights, less memory time)."""
    from specsim.analysis.build import DTYPES
    from specsim.physics.rules import DTYPE_BYTES

    assert set(DTYPES) <= set(DTYPE_BYTES)
    ms = {dt: whatif_quant(dtype=dt, target=target, model=model, gpu="h100", tp=1).after.verify_breakdown_ms["weights"]
          for dt in DTYPE_BYTES}
    order = sorted(DTYPE_BYTES, key=DTYPE_BYTES.get)
    assert all(ms[a] <= ms[b] for a, b in zip(order, order[1:])), ms
    assert ms["int4"] < 0.5 * ms["bf16"] and ms["fp8"] < 0.6 * ms["bf16"] and ms["fp32"] > 1.5 * ms["bf16"]


def test_quant_to_a_dtype_it_lacks_lists_the_allowed_ones(run_cli):
    code, out, err = run_cli("whatif", "quant", "--dtype", "nf4")
    assert code == 2 and err.strip() == "error: dtype: got 'nf4'; choose one of: fp32, bf16, fp16, fp8, int8, int4, fp4"
