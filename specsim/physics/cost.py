"""Forward-pass cost per tensor-parallel rank, evaluated over a named list of operators.

A forward is a list of :class:`Op` records (name, kernel family, phase, count, bytes, flops,
GEMM shape) built by :mod:`specsim.physics.operators`; this module turns them into time.
Each family has its own time model, every one ``+ kernel floor`` and a GPU-side gap per kernel
(``graph_node_us``: back-to-back kernels, replayed or queued). Eagerly, the host issues the
forward's kernels into the stream ahead of the GPU, so the forward takes the longer of the two:
``max(kernels x (eager_launch_us + eager_dispatch_us), GPU time)``, smoothed (the launch queue; not a per-kernel max, which
charges the host's wait on every short kernel although it ran ahead during the long ones):

* ``gemm`` - dense weight GEMM over M = B*k rows: ``max(memory, compute) + loss x min(memory,
  compute)`` where memory is weights + activations over the achieved HBM bandwidth and compute
  pads M to the MMA row tile at the GPU's GEMM efficiency; the shorter of the two overlaps the
  longer but for the share ``loss`` (fitted per GPU to a measured GEMM profile). A GEMM stays
  nearly flat in M while memory-bound, rises through the transition and climbs past the ridge.
* ``grouped_gemm`` - MoE routed experts: distinct experts' weights read once (fused kernel) or
  every token's experts (gathered kernel); compute with each expert's rows padded to a tile.
* ``attention`` - each request's KV cache read once (decode kernels: one query per request;
  extend/verify kernels: k queries padded to a query tile) at the attention bandwidth.
* ``elementwise`` - norms, rotary, activations, KV stores, residuals: activation bytes over
  the bandwidth (they grow with the tokens), never less than the kernel floor.
* ``collective`` - all-reduce / all-gather, alpha-beta (:mod:`specsim.physics.collectives`).

Components reported (ms): ``launch``, ``kernel_fixed``, ``allreduce``, ``weights``,
``attention``, ``compute``, ``activations``. Inputs broadcast: any parameter may be an array.
"""

from __future__ import annotations

import math

import numpy as np

from .numeric import scalars as _scalar
from .operators import FLAT, Op, draft_ops, memo, one_launch_flag, small_floor, target_ops, zero_array
from .params import Params

COMPONENTS = ("launch", "kernel_fixed", "allreduce", "weights", "attention", "compute", "activations")

GEMM_ROW_TILE = 16  # rows an MMA instruction computes at once: M is padded to a multiple of it
#: An eager forward's time is ``max(host, GPU)`` taken as this p-norm. Where the two are about equal, a layer's short
#: kernels still wait on the host while its long ones let the host run ahead, so the forward takes up to 2^(1/8) = 9 %
#: more than the longer one. Measured: an eager Llama-3.1-8B forward at batch 64, 1 token, takes 13.99 ms, against
#: 13.1 ms of host issue and 13.0 ms replayed. 8 was chosen on the 54 held-out points of
#: calibration/datasets/h200-llama-3.1-8b-forwards-eager-ctx2048.json (batch >= 16: mean error nearest 0; MAPE 4.0 %,
#: the same as the hard max's), so those points no longer test this number.
EAGER_QUEUE_NORM = 8.0


def _is_zero(x) -> bool:
    """A count that is a scalar zero: the operator does not exist in this architecture/engine."""
    if isinstance(x, (float, int)):
        return x == 0
    return np.ndim(x) == 0 and float(x) == 0.0


def gemm_compute_us(p: Params, m, n_cols, k_dim, flop_rate):
    """Compute time (us) of an M x N x K GEMM, rows padded to the MMA tile, at the GPU's GEMM efficiency."""
    if _scalar(m):
        m_pad = math.ceil(max(float(m), 1.0) / GEMM_ROW_TILE) * GEMM_ROW_TILE
        return 2.0 * m_pad * n_cols * k_dim / (flop_rate * p["gemm_peak_efficiency"]) * 1e6
    # the same rows (and FLOP rate) serve most GEMMs of a forward: 2 x padded M and the rate once per block
    two_m_pad = memo("2m_pad", lambda: 2.0 * (np.ceil(np.maximum(np.asarray(m, dtype=float), 1.0) / GEMM_ROW_TILE) * GEMM_ROW_TILE), m)
    us_per_flop = memo("gemm_us_per_flop", lambda: 1e6 / (flop_rate * p["gemm_peak_efficiency"]), flop_rate,
                       p["gemm_peak_efficiency"])
    # and N x K x us per FLOP once per shape (a block's forwards share their GEMMs' shapes)
    return two_m_pad * memo("gemm_nk_us", lambda: n_cols * k_dim * us_per_flop, n_cols, k_dim, us_per_flop)


def gemm_us(p: Params, m, n_cols, k_dim, weight_bytes, act_bytes, bw_eff, flop_rate):
    """(memory-bound part, compute-bound excess) of one GEMM, us.

    ``t = max(memory, compute) + loss x min(memory, compute)``: the pipeline hides the shorter of
    the weight stream and the MMAs behind the longer, except the share ``gemm_stream_loss``. On
    the measured H200 profile this fits the rise between M = 32 and the ridge (Llama-3.1-8B
    shapes: +16 % measured at M = 128) that ``max(memory, compute + loss x memory)`` missed.
    """
    hbm, gpe, loss = p["hbm_bytes_per_s"], p["gemm_peak_efficiency"], p["gemm_stream_loss"]
    if _scalar(m, n_cols, k_dim, weight_bytes, act_bytes, bw_eff, flop_rate, hbm, gpe, loss):
        return _gemm_float_us(hbm, gpe, loss, m, n_cols, k_dim, weight_bytes, act_bytes, bw_eff, flop_rate)
    mem = (weight_bytes + act_bytes) * _us_per_byte(hbm, bw_eff)
    cmp_ = gemm_compute_us(p, m, n_cols, k_dim, flop_rate)
    if _scalar(cmp_, mem):
        return mem, max(cmp_ - mem, 0.0) + loss * min(mem, cmp_)
    # the same excess in one fewer array pass: cmp - (1 - loss) mem where compute leads, else loss x cmp
    kept = memo("1-loss", lambda: 1.0 - loss, loss)
    return mem, np.maximum(cmp_ - kept * mem, loss * cmp_)


def _gemm_float_us(hbm, gpe, loss, m, n_cols, k_dim, weight_bytes, act_bytes, bw_eff, flop_rate) -> tuple[float, float]:
    """:func:`gemm_us` on plain numbers (one scenario): (memory-bound part, compute-bound excess), us."""
    mem = (weight_bytes + act_bytes) * (1e6 / (hbm * bw_eff))
    m_pad = math.ceil(max(float(m), 1.0) / GEMM_ROW_TILE) * GEMM_ROW_TILE
    cmp_ = 2.0 * m_pad * n_cols * k_dim / (flop_rate * gpe) * 1e6
    return mem, max(cmp_ - mem, 0.0) + loss * min(mem, cmp_)


def _attention_float_us(hbm, kv_bytes, bw_eff, flops, flop_rate, fixed_us) -> float:
    """An attention kernel's time on plain numbers (one scenario), us: the longer of its KV stream and its MMAs (at
    the attention kernels' achieved peak), plus its fixed cost."""
    return max(kv_bytes * (1e6 / (hbm * bw_eff)), flops * (1e6 / flop_rate)) + fixed_us


def _us_per_byte(bw, eff):
    """``1e6 / (bw x eff)``: us per byte at that share of the bandwidth (once per block and pair)."""
    return memo("us_per_byte", lambda: 1e6 / (bw * eff), bw, eff)


class _Acc:
    """Accumulates operator times (us) into components, for graph or eager launch."""

    def __init__(self, p: Params, graph, keep_rows: bool = False):
        self.p = p
        self.graph = float(graph) if np.ndim(graph) == 0 else np.asarray(graph, dtype=float)
        self.all_graph = np.ndim(self.graph) == 0 and self.graph == 1.0
        self.t = {c: 0.0 for c in COMPONENTS}
        self._owned: set[str] = set()  # components whose array this accumulator made (safe to add into)
        self.kernels = 0.0
        self.rows: list[dict] | None = [] if keep_rows else None
        self.small_floor = small_floor(p)
        self.kernel_floor, self.node_us = p["kernel_floor_us"], p["graph_node_us"]
        self.eager_us = p["eager_launch_us"] + p["eager_dispatch_us"]  # host time per kernel of an eager forward
        # one scenario (graph flag and launch numbers plain floats, no flat block): the sums stay on floats until an
        # array enters (see add)
        self.floats = (not FLAT.n and type(self.graph) is float and type(self.small_floor) is float
                       and type(self.kernel_floor) is float and type(self.node_us) is float and type(self.eager_us) is float)
        # a flat block: floors and node gaps are linear in the counts, so each operator adds its count to its
        # floor's tally (_COUNTS); finish() turns the tallies into kernel_fixed, launch and kernels: sum(count) x floor
        # for sum(count x floor), the same up to rounding. _forward() checks that every component is finite, else the
        # forward is costed again by the general arithmetic
        self.linear = bool(not keep_rows and FLAT.n)
        if self.linear:
            self.t.update({k: 0.0 for k in _COUNTS.values()})
        self.eager_wait_us = 0.0  # finish(): the host's issue time beyond the GPU's, on the eager share

    def _to(self, comp: str, x) -> None:
        """``t[comp] += x``: in place once ``t[comp]`` is an array of this accumulator's own and
        ``x`` fits its shape (the same sum, without a new array per operator), else a new array."""
        cur = self.t[comp]
        if type(cur) is float and type(x) is float:  # one scenario: plain float sums
            self.t[comp] = cur + x
            return
        if comp in self._owned:
            try:
                np.add(cur, x, out=cur)
                return
            except ValueError:  # x broadcasts beyond cur's shape (grid axes): a bigger array
                pass
        new = cur + x
        if isinstance(new, np.ndarray) and new.ndim and new is not x:
            self._owned.add(comp)
        else:
            self._owned.discard(comp)
        self.t[comp] = new

    def add(self, op: Op, parts: dict):
        """One operator: ``parts`` maps components to per-kernel us (launch and floor added here)."""
        count = op.count
        if self.floats:
            if type(count) is float:
                for us in parts.values():
                    if type(us) is not float:
                        break
                else:
                    self._add_floats(op, count, parts)  # one scenario: the same sums on plain floats
                    return
            self.floats = False  # an array entered: every later sum goes through numpy
        if op.family == "fixed":  # extra GPU time with no kernel of its own
            for comp, us in parts.items():
                self.t[comp] = self.t[comp] + count * us
            if self.rows is not None:
                self._row(op, count, parts, None)
            return
        fam = op.family
        for comp, us in parts.items():
            self._to(comp, count * us)
        floor = self.small_floor if fam == "elementwise" else 0.0 if fam == "collective" else self.p["kernel_floor_us"]
        if self.linear:
            self._to(_COUNTS[fam], count)
            return
        self._to("kernel_fixed", count * floor)
        busy = _sum(parts) + floor
        launch = count * self.node_us
        self._to("launch", launch)
        self.kernels = self.kernels + count
        if self.rows is not None:
            self._row(op, count, parts, count * busy + launch)

    def _add_floats(self, op: Op, count: float, parts: dict):
        """:meth:`add` where the count, every part and every sum so far is a Python float (one scenario): the same
        arithmetic in the same order, without numpy's dispatch per operator."""
        t = self.t
        if op.family == "fixed":
            for comp, us in parts.items():
                t[comp] += count * us
            if self.rows is not None:
                self._row(op, count, parts, None)
            return
        fam = op.family
        floor = self.small_floor if fam == "elementwise" else 0.0 if fam == "collective" else self.kernel_floor
        busy = None
        for comp, us in parts.items():
            t[comp] += count * us
            busy = us if busy is None else busy + us
        busy += floor
        launch = self._float_kernels(count, floor, busy)
        if self.rows is not None:
            self._row(op, count, parts, count * busy + launch)

    def _float_kernels(self, count: float, floor: float, busy: float) -> float:
        """On plain floats: ``count`` kernels of ``busy`` us each (``floor`` of it their floor) into kernel_fixed,
        launch and the kernel count; returns their launch us (a node gap each; the eager host's wait is the forward's,
        see :meth:`finish`)."""
        t = self.t
        t["kernel_fixed"] += count * floor
        launch = count * self.node_us
        t["launch"] += launch
        self.kernels += count
        return launch

    def _row(self, op: Op, count, parts: dict, us) -> None:
        """The operator's line of the per-operator table (``us`` None: a fixed-time operator, no kernel of its own)."""
        parts_us = {k: count * v for k, v in parts.items()}
        if us is None:
            self.rows.append({"name": op.name, "family": op.family, "phase": op.phase, "count": 0.0, "bytes": 0.0,
                              "flops": 0.0, "us": count * sum(parts.values()), "parts_us": parts_us})
            return
        row = {"name": op.name, "family": op.family, "phase": op.phase, "count": count,
               "bytes": op.bytes + op.act_bytes, "flops": op.flops, "us": us, "parts_us": parts_us}
        if op.family == "grouped_gemm" and _scalar(op.ctas, op.bw_eff):  # the kernel's grid (ctas inf: none)
            share_bw, cta_bw = _moe_stream_limits(self.p, op)
            row["grid"] = {"ctas_live": op.ctas, "ctas_launched": op.ctas_launched, "rows_padded": op.rows_padded,
                           "stream_bytes_per_s": min(share_bw, cta_bw), "latency_bound": cta_bw < share_bw}
        self.rows.append(row)

    def _untally(self) -> None:
        """Linear mode: the count tallies into kernels, kernel_fixed (count x the family's floor) and launch (count x
        the node gap), as :meth:`add` would have summed them operator by operator."""
        t = self.t
        n_kernel, n_small, n_collective = (t.pop(_COUNTS[f]) for f in ("gemm", "elementwise", "collective"))
        self.kernels = n_kernel + n_small + n_collective
        t["kernel_fixed"] = t["kernel_fixed"] + n_kernel * self.kernel_floor + n_small * self.small_floor
        if np.ndim(n_collective) and not np.ndim(t["kernel_fixed"]):  # a collective's zero floor kept its shape
            t["kernel_fixed"] = t["kernel_fixed"] + np.zeros(np.shape(n_collective))
        t["launch"] = t["launch"] + self.kernels * self.node_us

    def _eager_wait(self):
        """The launch queue, on the eager share ``1 - graph``: the host issues every kernel in ``eager_launch_us +
        eager_dispatch_us`` while the GPU runs them (their time plus a node gap each), so the forward takes the longer
        of the two, as the p-norm ``(host^p + GPU^p)^(1/p)`` (:data:`EAGER_QUEUE_NORM`); what that adds to the GPU's
        time, us."""
        t = self.t
        gpu = sum(t[c] for c in COMPONENTS if c != "launch") + self.kernels * self.node_us
        host = self.kernels * self.eager_us
        if type(gpu) is float and type(host) is float and type(self.graph) is float:
            top = max(host, gpu)
            if not 0.0 < top < math.inf:  # nothing to run, or an infinite side (outside the schema's ranges)
                forever = host == math.inf and gpu < math.inf and self.graph < 1.0  # the host never catches up
                return math.inf if forever else 0.0
            return (1.0 - self.graph) * (top * _pnorm_of_ratios(host / top, gpu / top) - gpu)
        top = np.maximum(host, gpu)
        ok = (top > 0.0) & (top < np.inf)
        safe = np.where(ok, top, 1.0)
        wait = np.where(ok, safe * _pnorm_of_ratios(host / safe, gpu / safe) - gpu, 0.0)
        share = 1.0 - self.graph
        if not ok.all():  # an infinite host before a finite GPU on an eager share waits forever, not NaN
            forever = (host == np.inf) & (gpu < np.inf) & (share > 0.0)
            return np.where(forever, np.inf, share * wait)
        return share * wait

    def finish(self) -> dict:
        if self.linear:
            self._untally()
        if not (self.all_graph or (self.linear and one_launch_flag(self.graph) == 1.0)):  # no eager share: no queue
            self.eager_wait_us = self._eager_wait()
            self.t["launch"] = self.t["launch"] + self.eager_wait_us
            if self.rows is not None:
                self.rows.append({"name": "eager_launch_wait", "family": "launch", "phase": "misc", "count": 0.0,
                                  "bytes": 0.0, "flops": 0.0, "us": self.eager_wait_us,
                                  "parts_us": {"launch": self.eager_wait_us}})
        self.t["launch"] = self.t["launch"] + self.graph * self.p["graph_fixed_us"]
        if self.floats and type(self.t["launch"]) is float:  # one scenario: the same numbers as numpy scalars
            f64 = np.float64
            out = {c: f64(v / 1e3) for c, v in self.t.items()}  # us -> ms
            out["total"] = f64(sum(v / 1e3 for v in self.t.values()))
            out["kernels"] = f64(self.kernels)
            return out
        out = {c: np.asarray(v, dtype=float) / 1e3 for c, v in self.t.items()}  # us -> ms
        out["total"] = sum(out[c] for c in COMPONENTS)
        out["kernels"] = np.asarray(self.kernels, dtype=float)
        return out

    def skip(self, op: Op, n: int):
        """An operator whose count is an all-zero (n,) array: it adds exact zeros, but of shape (n,)."""
        comps = _TOUCHES[op.family]
        if self.linear and op.family != "fixed":  # the tallies stand for kernels, kernel_fixed and launch
            comps = comps[:-2] + (_COUNTS[op.family],)
        elif op.family != "fixed":
            self.kernels = self.kernels + np.zeros(n) if np.ndim(self.kernels) == 0 else self.kernels
        for c in comps:
            if np.ndim(self.t[c]) == 0:
                self.t[c] = self.t[c] + np.zeros(n)


def _pnorm_of_ratios(a, b):
    """``(a^p + b^p)^(1/p)`` for ratios in [0, 1], p = :data:`EAGER_QUEUE_NORM` (8: three squarings and three square
    roots, several times faster than ``**`` on arrays)."""
    if EAGER_QUEUE_NORM != 8.0:
        q = EAGER_QUEUE_NORM
        return (a**q + b**q) ** (1.0 / q)
    a, b = a * a, b * b
    a, b = a * a, b * b
    if type(a) is float and type(b) is float:
        return math.sqrt(math.sqrt(math.sqrt(a * a + b * b)))
    return np.sqrt(np.sqrt(np.sqrt(a * a + b * b)))


def _sum(parts: dict):
    """``sum(parts.values())`` without its leading ``0 +`` (a copy of the first array; the sum only
    ever feeds ``+ floor``, where a -0.0 and a 0.0 give the same)."""
    vals = iter(parts.values())
    total = next(vals)
    for v in vals:
        total = total + v
    return total


def _op_parts(p: Params, op: Op) -> dict:
    """Per-kernel time (us) of one operator by component, from its family's model."""
    bw = p["hbm_bytes_per_s"]
    if op.family == "gemm":
        mem, excess = gemm_us(p, op.m, op.n_cols, op.k_dim, op.bytes, op.act_bytes, op.bw_eff, op.flop_rate)
        return {"weights": mem, "compute": excess}
    if op.family == "grouped_gemm":
        return _grouped_gemm_parts(p, op)
    if op.family == "attention":
        if _scalar(bw, op.bytes, op.bw_eff, op.flops, op.flop_rate, op.fixed_us):
            return {"attention": _attention_float_us(bw, op.bytes, op.bw_eff, op.flops, op.flop_rate, op.fixed_us)}
        mem = op.bytes * _us_per_byte(bw, op.bw_eff)
        cmp_ = op.flops * memo("us_per_flop", lambda: 1e6 / op.flop_rate, op.flop_rate)  # flop_rate: the attention kernels' achieved peak
        return {"attention": (max(mem, cmp_) if _scalar(mem, cmp_) else np.maximum(mem, cmp_)) + op.fixed_us}
    if op.family == "elementwise":
        return {"activations": op.act_bytes * _us_per_byte(bw, p["elementwise_mem_efficiency"])}
    if op.family == "collective":
        return {"allreduce": op.fixed_us}
    if op.family == "fixed":
        return {"kernel_fixed": op.fixed_us}
    raise ValueError(f"unknown kernel family {op.family!r}")


def _moe_stream_limits(p: Params, op: Op):
    """(the tiles' bandwidth share x HBM, live CTAs x one CTA's stream rate), bytes/s: the fused-MoE kernel's
    weights stream at the lower of the two."""
    return p["hbm_bytes_per_s"] * op.bw_eff, op.ctas * p["moe_cta_bytes_per_s"]


def _grouped_gemm_parts(p: Params, op: Op) -> dict:
    """Routed experts (fused kernel): the distinct experts' weights stream at the kernel's bandwidth, or at
    ``live CTAs x moe_cta_bytes_per_s`` where the grid has too few CTAs to reach it; every launched CTA costs
    ``moe_cta_exit_us`` and every live one ``moe_cta_tile_us`` per 64 x 128 tile of SM time (over the SMs),
    booked as ``compute`` with the MMAs over the padded rows beyond the weight stream. Without a grid
    (``ctas`` inf, no launched CTAs or tiles) only the bandwidth share applies."""
    bw, cta_bw = _moe_stream_limits(p, op)
    stream = (min(bw, cta_bw) if _scalar(bw, cta_bw) else np.minimum(bw, cta_bw))
    mem = (op.bytes + op.act_bytes) / stream * 1e6
    grid_us = (op.ctas_launched * p["moe_cta_exit_us"] + op.tile_units * p["moe_cta_tile_us"]) / p["sm_count"]
    cmp_ = 2.0 * op.rows_padded * op.n_cols * op.k_dim / (op.flop_rate * p["gemm_peak_efficiency"]) * 1e6
    excess = max(cmp_ - mem, 0.0) if _scalar(cmp_, mem) else np.maximum(cmp_ - mem, 0.0)
    return {"weights": mem, "compute": excess + grid_us}


#: the components (besides ``kernels``) each family's operators add to in :meth:`_Acc.add`
_TOUCHES = {
    "gemm": ("weights", "compute", "kernel_fixed", "launch"),
    "grouped_gemm": ("weights", "compute", "kernel_fixed", "launch"),
    "attention": ("attention", "kernel_fixed", "launch"),
    "elementwise": ("activations", "kernel_fixed", "launch"),
    "collective": ("allreduce", "kernel_fixed", "launch"),
    "fixed": ("kernel_fixed",),
}
#: linear mode's count tally per family (by the floor each kernel pays: the GPU's, the small kernels', none)
_COUNTS = {"gemm": "_n_kernel_floor", "grouped_gemm": "_n_kernel_floor", "attention": "_n_kernel_floor",
           "elementwise": "_n_small_floor", "collective": "_n_no_floor"}


class _FloatCosts:
    """:func:`_op_parts` and :meth:`_Acc.add` fused for one scenario's operators whose numbers are all plain floats:
    the same formulas in the same order (so the same sums, to the bit), without a dict of parts or numpy's dispatch
    per operator. :meth:`add` answers False for anything else (grouped GEMMs, an array field), which then takes the
    general path."""

    def __init__(self, p: Params, acc: _Acc):
        self.acc, self.t = acc, acc.t
        self.hbm, self.gpe, self.loss = p["hbm_bytes_per_s"], p["gemm_peak_efficiency"], p["gemm_stream_loss"]
        self.ew_us_per_byte = 1e6 / (p["hbm_bytes_per_s"] * p["elementwise_mem_efficiency"])
        self.ok = all(type(v) is float for v in (self.hbm, self.gpe, self.loss, self.ew_us_per_byte))

    def add(self, op: Op) -> bool:
        fam, count = op.family, op.count
        if type(count) is not float:
            return False
        acc, t = self.acc, self.t
        if fam == "gemm":
            m, n_cols, k_dim, w_b, a_b, bw_eff, rate = op.m, op.n_cols, op.k_dim, op.bytes, op.act_bytes, op.bw_eff, op.flop_rate
            if not (type(m) is float and type(n_cols) is float and type(k_dim) is float and type(w_b) is float
                    and type(a_b) is float and type(bw_eff) is float and type(rate) is float):
                return False
            mem, excess = _gemm_float_us(self.hbm, self.gpe, self.loss, m, n_cols, k_dim, w_b, a_b, bw_eff, rate)
            t["weights"] += count * mem
            t["compute"] += count * excess
            acc._float_kernels(count, acc.kernel_floor, mem + excess + acc.kernel_floor)
            return True
        if fam == "elementwise":
            if type(op.act_bytes) is not float:
                return False
            comp, us, floor = "activations", op.act_bytes * self.ew_us_per_byte, acc.small_floor
        elif fam == "attention":
            w_b, bw_eff, flops, rate, fixed = op.bytes, op.bw_eff, op.flops, op.flop_rate, op.fixed_us
            if not (type(w_b) is float and type(bw_eff) is float and type(flops) is float and type(rate) is float
                    and type(fixed) is float):
                return False
            comp, us, floor = "attention", _attention_float_us(self.hbm, w_b, bw_eff, flops, rate, fixed), acc.kernel_floor
        elif fam in ("collective", "fixed"):
            if type(op.fixed_us) is not float:
                return False
            if fam == "fixed":  # extra GPU time with no kernel of its own
                t["kernel_fixed"] += count * op.fixed_us
                return True
            comp, us, floor = "allreduce", op.fixed_us, 0.0
        else:
            return False
        t[comp] += count * us
        acc._float_kernels(count, floor, us + floor)
        return True


def evaluate_ops(p: Params, ops: list[Op], graph, keep_rows: bool = False) -> dict:
    """Sum a forward's operators into components (ms); ``rows`` holds the per-operator table."""
    acc = _Acc(p, graph, keep_rows)
    flat = 0 if keep_rows else FLAT.n
    fast = _FloatCosts(p, acc) if acc.floats and not keep_rows else None
    if fast is not None and not fast.ok:
        fast = None
    for op in ops:
        count = op.count
        if (count == 0.0) if type(count) is float else _is_zero(count):
            continue
        if fast is not None and acc.floats and fast.add(op):
            continue
        if flat and zero_array(count):  # all zero: adds exact zeros (only its (n,) shape is kept)
            acc.skip(op, flat)
            continue
        acc.add(op, _op_parts(p, op))
    out = acc.finish()
    if keep_rows:
        out["rows"] = acc.rows
    return out


def target_forward_ms(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, multi_token=None,
                      routed_tokens=None, keep_rows: bool = False, verify: bool = False, last_logits: bool = False,
                      independent_tokens=None) -> dict:
    """Target forward over batch x tokens_per_request new tokens on one TP rank, by component (ms).

    ``multi_token`` selects the verify/extend kernels (extra kernels per layer, logits for every
    row); by default it is on for tokens_per_request > 1, the 1-token decode path otherwise.
    ``routed_tokens`` (default: all of them) are the tokens that pick distinct experts: padding
    rows of a graph replay run the dense GEMMs but route to the same few experts; ``independent_tokens`` (default:
    ``routed_tokens``) is how many independent tokens their distinct experts are those of in a fused kernel (fewer
    where a request's tokens reuse experts: ``target.moe.routing_locality``). ``verify``: a speculative
    verify (an engine may batch-expand it); ``last_logits``: logits for each request's last token only (prefill).
    """
    graph = p["graph_verify"] if graph is None else graph
    return _forward(lambda: target_ops(p, tokens_per_request, batch, ctx, graph, multi_token, routed_tokens, verify,
                                       last_logits, independent_tokens), p, graph, keep_rows)


def draft_forward_ms(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, fuse=False,
                     keep_rows: bool = False, last_logits: bool = False, branches: bool = False) -> dict:
    """One EAGLE-3 head forward on one TP rank (ms by component); ``fuse`` adds the 3-state fc; ``last_logits``:
    its lm_head over each request's last token only (the draft extend of a prefill); ``branches``: a draft step,
    whose ``tokens_per_request`` rows are the tree's topk branches (see :func:`~.operators.draft_ops`)."""
    graph = p["graph_draft"] if graph is None else graph
    return _forward(lambda: draft_ops(p, tokens_per_request, batch, ctx, graph, fuse, last_logits, branches), p, graph,
                    keep_rows)


def _forward(build, p: Params, graph, keep_rows: bool) -> dict:
    """``evaluate_ops`` of the operators ``build()`` lists. In a flat block (see
    :data:`~specsim.physics.operators.FLAT`) a forward whose total is not finite everywhere is built
    and costed again by the general arithmetic: the block's shortcuts (all-zero operators skipped,
    launch = count x node gap) equal it only where every operator's time is finite."""
    out = evaluate_ops(p, build(), graph, keep_rows)
    if FLAT.n and not keep_rows and not np.isfinite(out["total"]).all():
        saved = FLAT.n, FLAT.cache
        FLAT.n, FLAT.cache = 0, None
        try:
            out = evaluate_ops(p, build(), graph, keep_rows)
        finally:
            FLAT.n, FLAT.cache = saved
    return out


def weight_bytes_per_rank(p: Params) -> float:
    """Target weight bytes resident per rank (all experts), for memory-fit checks and display (an array where
    ``p["tp"]`` is one)."""
    tp, h, L, Lm = p["tp"], p["hidden"], p["num_layers"], p["num_moe_layers"]
    total = 2 * p["vocab"] * h / tp * p["bytes_head"]
    if p["is_mla"]:
        hr = p["num_heads"] / tp
        qk = p["qk_nope_head_dim"] + p["qk_rope_head_dim"]
        ql, kvl = p["q_lora_rank"], p["kv_lora_rank"]
        att = h * ql + ql * hr * qk + h * (kvl + p["qk_rope_head_dim"]) + kvl * hr * (p["qk_nope_head_dim"] + p["v_head_dim"]) + hr * p["v_head_dim"] * h
    else:
        hr = p["num_heads"] / tp
        att = (h * (hr + 2 * np.maximum(p["num_kv_heads"] / tp, 1.0)) + hr * h) * p["head_dim"]
    total += L * att * p["bytes_attention"]
    total += (L - Lm) * 3 * h * p["intermediate"] / tp * p["bytes_dense"]
    total += Lm * 3 * h * p["expert_intermediate"] / tp * p["num_experts"] * p["bytes_routed"]
    total += Lm * 3 * h * p["num_shared_experts"] * p["shared_intermediate"] / tp * p["bytes_shared"]
    return total if np.ndim(total) else float(total)
