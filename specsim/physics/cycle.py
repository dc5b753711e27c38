"""One EAGLE speculative cycle and one plain decode step, phase by phase (SGLang v1/v2 order).

cycle = draft (steps-1 head forwards, one graph) + target verify (num_draft_tokens per request)
      + accept/sample (eager kernels, GPU->CPU sync, Python per token) + draft-extend
      + host scheduling; with the overlap scheduler, host work hides behind the GPU.
tok/s = running x E[tokens per request per cycle] / cycle time        (Sequoia's one line)
running = min(batch, the engine's running-requests cap): SGLang runs at most 48 requests at once with EAGLE
unless the launch sets --max-running-requests; the rest of the batch waits in the queue.
"""

from __future__ import annotations

import contextvars
import functools
import math
import operator
import os

import numpy as np

from .cost import draft_forward_ms, target_forward_ms, weight_bytes_per_rank
from .memory import kv_requests_held
from .numeric import maximum as _maximum
from .numeric import num as _num
from .operators import FLAT, LOGIT_BYTES, batch_expansion, host_planned_tree, memo
from .params import NO_RUNNING_CAP, Params

PHASES = ("draft", "verify", "accept", "draft_extend", "host")


def graph_batch(p: Params, batch, graph):
    """Pad a batch up to the next captured graph size; past the largest one the forward is eager."""
    sizes = np.asarray(p["capture_batch_sizes"], dtype=float)
    if isinstance(batch, (float, int)) and isinstance(graph, (float, int)):  # one scenario: the same on floats
        b = float(batch)
        idx = int(np.searchsorted(sizes, b, side="left"))
        fits = idx < len(sizes)
        g = float(graph) * fits
        return (float(sizes[idx]) if fits else b) if g > 0 else b, g
    b = np.asarray(batch, dtype=float)
    fits, padded = memo("graph_batch", lambda: _pad_batch(sizes, b), sizes, b)  # the same for every forward of a block
    g = np.asarray(graph, dtype=float) * fits
    return np.where(g > 0, padded, b), g


def _pad_batch(sizes, b):
    idx = _first_at_least(sizes, b)
    fits = idx < len(sizes)
    return fits, np.where(fits, sizes[np.minimum(idx, len(sizes) - 1)], b)


_LUT_MAX = 1 << 16  # the largest captured size looked up through a table (a few hundred KiB of int64)


def _first_at_least(sizes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sizes, x, side="left")``: the index of the first captured size >= x. In a flat block
    (every input finite, see :func:`_finite`) with whole-number sizes, by a table over ceil(x): the same index,
    without a binary search per point (the first whole size >= x is the first >= ceil(x))."""
    if not FLAT.n or not sizes.size or sizes[-1] > _LUT_MAX or not np.array_equal(sizes, np.floor(sizes)):
        return np.searchsorted(sizes, x, side="left")
    top = int(sizes[-1])
    table = memo("size_table", lambda: np.searchsorted(sizes, np.arange(top + 2, dtype=float), side="left"), sizes)
    return table[np.clip(np.ceil(x), 0, top + 1).astype(np.intp)]


def graph_width(p: Params, batch, width, graph):
    """vLLM-style token padding: ``(width, graph)`` of a forward of batch x width tokens. A graph replay runs them
    padded up to the next captured token count; past the largest one the forward runs eagerly (graph 0)."""
    sizes = np.asarray(p["capture_token_sizes"], dtype=float)
    scalar = isinstance(batch, (float, int)) and isinstance(width, (float, int)) and isinstance(graph, (float, int))
    if sizes.size == 0:
        return (float(width), graph) if scalar else (np.asarray(width, dtype=float), graph)
    if scalar:
        n = float(batch) * float(width)
        idx = int(np.searchsorted(sizes, n, side="left"))
        fits = idx < len(sizes)
        g = float(graph) * fits
        return (float(sizes[idx]) / float(batch) if (g > 0) else float(width)), g
    n = np.asarray(batch, dtype=float) * np.asarray(width, dtype=float)
    idx = _first_at_least(sizes, n)
    fits = idx < len(sizes)
    padded = np.where(fits, sizes[np.minimum(idx, len(sizes) - 1)], n)
    g = np.asarray(graph, dtype=float) * fits
    return np.where(g > 0, padded / np.asarray(batch, dtype=float), np.asarray(width, dtype=float)), g


def vocab_pass_us(p: Params, rows, vocab, topk_over_one=False):
    """softmax + max (or top-k) over ``rows`` fp32 logit rows of ``vocab`` entries (us, measured form)."""
    stream = rows * vocab * LOGIT_BYTES / p["vocab_pass_bytes_per_s"] * 1e6
    factor = np.where(topk_over_one, p["vocab_topk_pass_factor"], 1.0) if np.ndim(topk_over_one) else (
        p["vocab_topk_pass_factor"] if topk_over_one else 1.0)
    return p["vocab_topk_fixed_us"] + stream * factor


def argmax_pass_us(p: Params, rows, vocab):
    """Greedy sampling: one streaming pass over ``rows`` fp32 logit rows (argmax) at elementwise bandwidth,
    after the latency floor of a row reduction over the vocabulary (the profile's softmax + max fit)."""
    return rows * vocab * LOGIT_BYTES / (p["hbm_bytes_per_s"] * p["elementwise_mem_efficiency"]) * 1e6 + p["vocab_topk_fixed_us"]


def _eager_small_ms(p: Params, count):
    """count tiny eager kernels: each costs the longer of its launch and its GPU floor."""
    return count * _maximum(p["eager_launch_us"], p["kernel_floor_us"]) / 1e3


def verify_breakdown(p: Params, num_draft_tokens=None, batch=None, ctx=None, keep_rows: bool = False) -> dict:
    """Target verify forward (ms by component) over batch x num_draft_tokens tokens at context ``ctx``
    (``keep_rows``: with the per-operator rows of ``specsim verify --breakdown``)."""
    ndt = p["num_draft_tokens"] if num_draft_tokens is None else num_draft_tokens
    b, g = graph_batch(p, p["batch"] if batch is None else batch, p["graph_verify"])
    w, g = graph_width(p, b, ndt, g)
    requests = _num(p["batch"] if batch is None else batch)
    real = requests * _num(ndt)  # the tokens that pick experts (padding rows of a graph pick none) ...
    # ... whose distinct experts are those of 1 + rho (ndt - 1) independent tokens a request (target.moe.routing_locality)
    independent = requests * (1.0 + p["routing_locality"] * (_num(ndt) - 1.0))
    return target_forward_ms(p, w, batch=b, ctx=ctx, graph=g, multi_token=_num(ndt) > 1, routed_tokens=real,
                             keep_rows=keep_rows, verify=True, independent_tokens=independent)


def decode_breakdown(p: Params, batch=None) -> dict:
    """Target forward of the plain 1-token decode step (ms by component)."""
    b, g = graph_batch(p, p["batch"] if batch is None else batch, p["graph_decode"])
    w, g = graph_width(p, b, 1.0, g)
    return target_forward_ms(p, w, batch=b, graph=g, multi_token=False)


def cycle_phases_ms(p: Params, tau, verify_parts: dict | None = None) -> dict:
    """Per-phase time of one speculative cycle (ms); ``tau`` = mean accepted length per request.

    ``verify_parts``: the verify forward's breakdown when the caller has it already.
    """
    return _with_host(p, tau, cycle_gpu_ms(p, verify_parts))


def cycle_gpu_ms(p: Params, verify_parts: dict | None = None) -> dict:
    """The GPU phases of one cycle (ms) and their sum ``gpu``: none depends on the accept length."""
    steps, topk = p["steps"], p["topk"]
    batch = _num(p["batch"])

    # draft: steps-1 head forwards of width topk, captured together in one graph
    bd, gd = graph_batch(p, batch, p["graph_draft"])
    fwd = draft_forward_ms(p, topk, batch=bd, graph=gd, branches=True)
    n_fwd = _maximum(steps - 1.0, 0.0)
    per_step_ms = fwd["total"] - gd * p["graph_fixed_us"] / 1e3
    # softmax + top-k over the draft vocabulary for every row (B x topk) each step, two kernels
    topk_gpu_us = vocab_pass_us(p, bd * topk, p["draft_vocab"], topk > 1)
    topk_kernels_ms = (topk_gpu_us + 2 * gd * p["graph_node_us"]) / 1e3 + (1 - gd) * 2 * _maximum(
        p["eager_launch_us"] - topk_gpu_us / 2, 0.0) / 1e3
    draft_gpu = n_fwd * (per_step_ms + topk_kernels_ms) + (n_fwd > 0) * gd * p["graph_fixed_us"] / 1e3
    draft_pre_gpu = _eager_small_ms(p, p["draft_preprocess_kernels"])  # KV slot assignment kernels

    verify = (verify_breakdown(p) if verify_parts is None else verify_parts)["total"]

    # accept/sample: tree build + argmax/sampling kernels over the logits, then a host sync
    rows = batch * p["num_draft_tokens"]
    logits_ms = argmax_pass_us(p, rows, p["vocab"]) / 1e3  # greedy accept: argmax over every verified row
    accept_gpu = _eager_small_ms(p, p["sample_kernels"]) + logits_ms

    # draft-extend over accepted + bonus tokens, padded to steps+1 per request (v1 graph width)
    be, ge = graph_batch(p, batch, p["graph_draft_extend"])
    extend_gpu = draft_forward_ms(p, steps + 1, batch=be, graph=ge, fuse=True)["total"]
    return {"draft": draft_gpu + draft_pre_gpu, "verify": verify, "accept": accept_gpu, "draft_extend": extend_gpu,
            "gpu": draft_gpu + draft_pre_gpu + verify + accept_gpu + extend_gpu}


def _with_host(p: Params, tau, gpu: dict) -> dict:
    """The phases with the cycle's exposed host time for accept length ``tau``."""
    batch = _num(p["batch"])
    overlap = _num(p["overlap_scheduler"])
    # host: scheduler/bookkeeping, GPU->CPU syncs (draft preprocess, accept, extend) and the
    # Python loop over committed tokens; v2 (overlap) drops the syncs and hides the rest. With stop
    # strings every finish check (one per committed token, one per request) decodes the output tail.
    # a tree on a backend that plans on the host: one plan per draft step, verify and draft extend (steps + 1),
    # the verify's custom-mask plan's extra, the prefill plans' Python pass over the requests, and extra syncs
    # to copy the plan inputs to the host
    tree = host_planned_tree(p)
    host_ms = (p["host_per_cycle_ms"] + batch * (p["host_per_request_us"] + tau * p["host_per_token_us"]
                                                 + (tau + 1) * p["stop_check_us"]) / 1e3
               + tree * ((p["steps"] + 1) * p["tree_plan_us"] + p["tree_verify_plan_extra_us"]
                         + batch * p["tree_plan_us_per_request"]) / 1e3
               # batch expansion: every verify row's token ids copied into a sequence of its own (context-long)
               + batch * p["num_draft_tokens"] * _num(p["ctx"]) * p["host_expansion_us_per_row_token"] * batch_expansion(p)
               / 1e3)
    syncs_ms = (p["host_syncs_per_cycle"] + tree * p["tree_host_syncs_per_cycle"]) * (p["host_sync_us"] / 1e3) * (1 - overlap)
    exposed_host = (1 - overlap) * host_ms + overlap * _maximum(host_ms - gpu["gpu"], 0.0) + syncs_ms
    return {"draft": gpu["draft"], "verify": gpu["verify"], "accept": gpu["accept"], "draft_extend": gpu["draft_extend"],
            "host": exposed_host}


def cycle_ms(phases: dict) -> np.ndarray:
    return sum(phases[k] for k in PHASES)


FLAT_CHUNK = 65536  # points per block when every per-point parameter is one flat array (512 KiB temporaries, L2-sized;
# 32768 ran ~5 % slower on the project's 2-core machine: more blocks, each paying the Python work of ~2,000 array operations)
_NOT_PER_POINT = ("capture_batch_sizes", "capture_token_sizes")


def _flat_points(p: Params, tau) -> int:
    """n when every array parameter (and tau) is a flat array of n points, else 0."""
    n = 0
    for k, v in p.items():
        if type(v) is float:  # most entries of most calls: one scenario's plain numbers
            continue
        if isinstance(v, np.ndarray) and v.ndim and k not in _NOT_PER_POINT:
            if v.ndim != 1 or (n and v.shape[0] != n):
                return 0
            n = v.shape[0]
    t = np.shape(tau)
    return n if t == () or t == (n,) else 0


def block_threads() -> int:
    """Threads that evaluate the blocks of one flat call: the CPUs this process may run on (numpy
    releases the GIL inside each element-wise loop, so blocks proceed side by side)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


#: glibc's malloc: keep up to this many freed bytes at the heap top instead of handing them back to the kernel,
#: and serve blocks below the second number from the heap rather than fresh mmaps. A flat block's temporaries
#: are 512 KiB arrays (256 KiB when this was measured); under the default (dynamic) thresholds each one's pages were faulted in anew (181 K page
#: faults and 0.4-0.9 s of system time per million points on this project's 2-core machine, none after).
HEAP_TRIM_BYTES, HEAP_MMAP_BYTES = 256 << 20, 4 << 20


@functools.cache  # once per process
def _keep_heap() -> None:
    """Once per process, before the first multi-block flat call: raise glibc's trim and mmap thresholds to
    :data:`HEAP_TRIM_BYTES` / :data:`HEAP_MMAP_BYTES` (the process keeps that much freed heap for reuse).
    Elsewhere (not glibc, or a platform without ``mallopt``) nothing changes."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (Windows: CDLL(None) raises TypeError)
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_trim_threshold, HEAP_TRIM_BYTES)
    mallopt(m_mmap_threshold, HEAP_MMAP_BYTES)


def throughput(p: Params, tau, threads: int | None = None) -> dict:
    """The one tok/s formula: speculative and baseline tokens/s for accept length ``tau``.

    ``tok/s = running x tau / cycle``; ``baseline tok/s = running / decode step``, where ``running`` is the
    batch or the engine's cap on requests run at once (:func:`running`), each run its own. Every command
    (predict, sweep, figures, reports, what-ifs) goes through this function. A flat set of
    points (every array parameter one 1-D array) runs in blocks of :data:`FLAT_CHUNK`: the
    same element-wise arithmetic, with temporaries that stay in cache, the blocks spread over
    ``threads`` threads (default :func:`block_threads`; the result does not depend on it).
    """
    n = _flat_points(p, tau)
    if not n:
        return _throughput(p, tau)
    if n <= FLAT_CHUNK:
        return _flat_block(p, tau, n)
    _keep_heap()
    blocks = [slice(i, min(n, i + FLAT_CHUNK)) for i in range(0, n, FLAT_CHUNK)]

    def block(sl: slice) -> dict:
        q = {k: (v[sl] if isinstance(v, np.ndarray) and v.ndim and k not in _NOT_PER_POINT else v) for k, v in p.items()}
        return _flat_block(q, tau[sl] if np.ndim(tau) else tau, sl.stop - sl.start)

    wanted = block_threads() if threads is None else max(1, int(threads))
    workers = min(wanted, len(blocks) - 1)  # the later blocks' pool; this thread computes the first meanwhile
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(workers, thread_name_prefix="specsim-block") if wanted > 1 else None
    try:
        # the other blocks start at once, each in a copy of the caller's context (its numpy error state, np.errstate,
        # holds in the workers), while this thread computes the first, whose results lay out the joined arrays
        later = None if pool is None else [pool.submit(contextvars.copy_context().run, block, sl) for sl in blocks[1:]]
        first = block(blocks[0])
        out, leaves = _alloc(first, n, blocks[0].stop)

        def into(sl: slice, res: dict) -> None:  # each block straight into the joined arrays (no list of blocks kept)
            for dst, path in leaves:
                dst[sl] = _leaf(res, path)

        into(blocks[0], first)
        for i, sl in enumerate(blocks[1:]):
            into(sl, block(sl) if later is None else later[i].result())  # result() re-raises a block's exception
            if later is not None:
                later[i] = None  # its arrays are copied: free them
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return out


def _flat_block(p: Params, tau, n: int) -> dict:
    """:func:`_throughput` of one flat block of n points, with this thread's block state (:data:`FLAT`) set."""
    outer = FLAT.n, FLAT.cache
    try:
        FLAT.n, FLAT.cache = (n, {}) if _finite(p) else (0, None)
        return _throughput(p, tau)
    finally:
        FLAT.n, FLAT.cache = outer


def _finite(p: Params) -> bool:
    """Every parameter finite, per-point and plain: the flat-block shortcuts apply (an operator skipped as all-zero
    adds 0 x its time, exactly 0 only where that time is finite; one path's numbers taken where the blend would
    give 0 x inf; captured sizes looked up by table); else the block runs the general path."""
    for k, v in p.items():
        if isinstance(v, float):
            if not math.isfinite(v):
                return False
        elif isinstance(v, np.ndarray) and v.ndim and k not in _NOT_PER_POINT:
            with np.errstate(all="ignore"):
                s = float(np.add.reduce(v, axis=None, dtype=float))  # inf or nan when any point is (or it overflows)
            if not math.isfinite(s):
                return False
    return True


def _alloc(block: dict, n: int, m: int):
    """The joined result laid out from the first block: per-point arrays of n points (filled block by
    block), anything else (depends on no per-point parameter: the same in every block) as it is."""
    leaves = []

    def walk(x, path):
        if isinstance(x, dict):
            return {k: walk(v, path + (k,)) for k, v in x.items()}
        if np.ndim(x) == 0:
            return x
        assert np.shape(x)[0] == m, "a flat block's array is not per point"
        dst = np.empty((n,) + np.shape(x)[1:], dtype=np.asarray(x).dtype)
        leaves.append((dst, path))
        return dst

    return walk(block, ()), leaves


def _leaf(x, path):
    for k in path:
        x = x[k]
    return x


#: parameters only the speculative cycle reads: the plain decode step is the same for any value of them
_SPEC_ONLY = frozenset(("steps", "topk", "num_draft_tokens"))
_CACHE_SIZE = 256
_BASELINE_CACHE: dict = {}
_GPU_CACHE: dict = {}


def _baseline_key(p: Params):
    """A hashable key of every parameter the decode step may read (one scenario: plain floats), else None."""
    names = tuple(p)
    plan = _KEY_PLANS.get(names)
    if plan is None:  # which positions the key takes, and which hold arrays: once per parameter layout
        keep = tuple(i for i, k in enumerate(names) if k not in _SPEC_ONLY)
        plan = _KEY_PLANS[names] = (tuple(names[i] for i in keep), operator.itemgetter(*keep),
                                    tuple(i for i in keep if names[i] in _NOT_PER_POINT))
    kept_names, take, array_at = plan
    vals = list(p.values())
    for i in array_at:  # the captured sizes: an array of the scenario's, not of points
        if isinstance(vals[i], np.ndarray):
            vals[i] = vals[i].tobytes()
    kept = take(vals)
    if not set(map(type, kept)) <= _KEY_TYPES:
        return None
    return kept_names, kept


_KEY_PLANS: dict = {}
_KEY_TYPES = frozenset((float, bytes))


def _cached(cache: dict, key, fn):
    """``fn()`` once per key (pure functions of one scenario's plain-float parameters); copies out."""
    if key is None:
        return fn()
    hit = cache.get(key)
    if hit is None:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        hit = cache[key] = fn()
    return _copy(hit)  # callers own their arrays


def _copy(x):
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return x.copy() if isinstance(x, np.ndarray) else x


def running(p: Params, cap: str, weights=None) -> Params:
    """``p`` with ``batch`` the requests the engine runs at once: the offered batch, the cap ``p[cap]``
    (``running_cap`` for plain decode, ``spec_running_cap`` with speculation on) or the requests whose KV cache its
    pool holds at the context (:func:`kv_held`), whichever is smallest. Requests past them wait in the queue; they
    add no work to a forward. ``weights``: the target's bytes per rank, where the caller has them."""
    b, c = p["batch"], np.minimum(p[cap], kv_held(p, cap == "spec_running_cap", weights))
    if type(b) is float and np.ndim(c) == 0:
        c = float(c)
        return p if b <= c else {**p, "batch": c}
    if np.all(np.less_equal(b, c)):
        return p
    return {**p, "batch": np.minimum(b, c)}


def kv_held(p: Params, speculative: bool, weights=None):
    """Requests the engine's KV-cache pool holds at once at the context (:mod:`physics.memory`; ``NO_RUNNING_CAP``
    where the engine keeps no pool model or the parameters predate one)."""
    if not _pooled(p):
        return NO_RUNNING_CAP
    return kv_requests_held(p, weight_bytes_per_rank(p) if weights is None else weights, speculative=speculative,
                            no_limit=NO_RUNNING_CAP)


def _pooled(p: Params) -> bool:
    """Whether a pool can bound the run (False: parameters without the pool model, or one scenario whose engine
    keeps no pool and no launch figure; arrays of those fields count as pooled, for kv_requests_held to sort out)."""
    if "kv_memory_rule" not in p:
        return False
    rule, given = p["kv_memory_rule"], p["kv_pool_tokens"]
    return not (type(rule) is float and type(given) is float and rule == 0.0 and given <= 0.0)


def _throughput(p: Params, tau) -> dict:
    # the decode step is the same for any steps/topk/draft tokens, the cycle's GPU phases for any
    # accept length: one scenario evaluated again (a what-if or sweep over tau) reuses them
    w = weight_bytes_per_rank(p) if _pooled(p) else None  # once for both runs
    ps, pb = running(p, "spec_running_cap", w), running(p, "running_cap", w)
    key = _baseline_key(ps)
    key_b = key if pb is ps else _baseline_key(pb)
    spec = tuple(ps[k] for k in sorted(_SPEC_ONLY))
    spec_key = None if key is None or any(type(v) is not float for v in spec) else (key, spec)

    def gpu_parts():
        verify = verify_breakdown(ps)
        return {"verify_breakdown": verify, "gpu": cycle_gpu_ms(ps, verify)}

    parts = _cached(_GPU_CACHE, spec_key, gpu_parts)
    verify = parts["verify_breakdown"]
    phases = _with_host(ps, tau, parts["gpu"])
    cyc = cycle_ms(phases)
    base = _cached(_BASELINE_CACHE, key_b, lambda: baseline_step_ms(pb))
    run_s, run_b = _num(ps["batch"]), _num(pb["batch"])
    tok_s = run_s * _num(tau) / cyc * 1e3
    base_tok_s = run_b / base["total"] * 1e3
    return {"phases": phases, "verify_breakdown": verify, "cycle_ms": cyc, "tok_s": tok_s, "baseline": base, "baseline_tok_s": base_tok_s,
            "speedup": tok_s / base_tok_s, "running_requests": run_s, "baseline_running_requests": run_b}


def prefill_ms(p: Params, prompt_tokens, batch) -> dict:
    """Prefill of ``batch`` prompts of ``prompt_tokens`` tokens (ms): the target forward over all of them, run
    without CUDA graphs (prefill shapes are not captured), each prompt attending over itself; and, for speculation,
    the draft head's extend over the same tokens (EAGLE's draft prefill on the target's hidden states)."""
    target = target_forward_ms(p, prompt_tokens, batch=batch, ctx=0.0, graph=0.0, multi_token=True, last_logits=True)["total"]
    draft = draft_forward_ms(p, prompt_tokens, batch=batch, ctx=0.0, graph=0.0, fuse=True, last_logits=True)["total"]
    return {"target": target, "draft": draft}


def baseline_step_ms(p: Params) -> dict:
    """One plain decode iteration: target forward + sampling + host (amortised, overlapped)."""
    batch = _num(p["batch"])
    fwd = decode_breakdown(p)["total"]
    logits_ms = argmax_pass_us(p, batch, p["vocab"]) / 1e3
    sample = _eager_small_ms(p, p["decode_sample_kernels"]) + logits_ms
    host = (p["host_per_decode_step_ms"] / p["continuous_decode_steps"]
            + batch * (p["host_per_token_us"] + p["host_per_request_decode_us"] + p["stop_check_us"]) / 1e3)
    ov = _num(p["overlap_scheduler_baseline"])
    gpu = fwd + sample
    exposed = (1 - ov) * host + ov * _maximum(host - gpu, 0.0)
    return {"forward": fwd, "sample": sample, "host": exposed, "total": gpu + exposed}
