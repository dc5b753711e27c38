"""Invariants over every preset combination: finite, positive, monotone where physics says so."""

import itertools
import math

import numpy as np
import pytest

import specsim
from specsim.io.presets import engine_names, gpu_names, model_names

TP_FOR = {"kimi-k2.5": 8, "kimi-k2": 8, "deepseek-v3": 8, "qwen3-235b-a22b": 4, "qwen3-30b-a3b": 1,
          "llama-3.1-8b": 1, "llama-3.1-8b-eagle": 1, "llama-3.1-70b": 4, "llama-3-70b-eagle": 4, "glm-4.7-flash": 1, "qwen3-8b": 1,
          "llama-2-7b": 1, "glm-4.7-fp8": 8}


@pytest.mark.parametrize("model,engine", list(itertools.product(model_names(), engine_names())))
def test_every_model_engine_gpu_is_finite_and_monotone(model, engine):
    for gpu in gpu_names():
        kw = dict(model=model, gpu=gpu, tp=TP_FOR[model], engine=engine, accept_rates=[0.8, 0.7, 0.6])
        p = specsim.predict(steps=3, **kw)
        assert all(math.isfinite(x) and x > 0 for x in (p.tok_s, p.baseline_tok_s, p.cycle_ms, p.verify_ms))
        assert all(v >= 0 for v in p.phases_ms.values()) and all(v >= 0 for v in p.verify_breakdown_ms.values())
        v = specsim.verify_ms([1, 2, 4, 8, 16, 32, 64], model=model, gpu=gpu, tp=TP_FOR[model], engine=engine).verify_ms
        assert all(b >= a - 1e-9 for a, b in zip(v, v[1:])), (gpu, v)


@pytest.mark.parametrize("model", model_names())
def test_more_context_and_more_batch_never_faster_per_cycle(model):
    base = dict(model=model, gpu="h200", tp=TP_FOR[model], steps=3, accept_rates=[0.8])
    ctx = [specsim.predict(ctx=c, **base).cycle_ms for c in (0, 2048, 32768)]
    assert ctx == sorted(ctx)
    bat = [specsim.predict(batch=b, **base).cycle_ms for b in (1, 4, 16, 64)]
    assert bat == sorted(bat)


def test_speedup_never_exceeds_accept_length_on_graph_engines():
    for model, gpu in itertools.product(model_names(), ("h100", "h200", "b200")):
        p = specsim.predict(model=model, gpu=gpu, tp=TP_FOR[model], steps=4, accept_rates=[0.9])
        assert p.speedup <= p.accept_length + 1e-9


def test_allreduce_scale_never_helps():
    from specsim.analysis.sweep import sweep

    r = sweep(steps=[1, 3], batch=[1, 16], allreduce_scale=list(np.linspace(0.25, 4, 6)))
    tok = r.columns["tok_s"].reshape(2, 2, 6)  # steps x batch x scale (row-major over axes)
    assert (np.diff(tok, axis=-1) <= 1e-9).all()
