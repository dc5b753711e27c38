"""What the schema's objects derive from their own fields (a GPU's peak for a dtype, an all-reduce's latency at a
TP size, an engine's running-requests cap), as mixins without pydantic: the schema's models and the start-up
path's records (:mod:`specsim.physics.record`) share them."""

from __future__ import annotations


class GPUMethods:
    def flops_for(self, weight_dtype: str) -> float:
        """Peak FLOP/s of the compute a weight dtype runs at (weight-only int4 computes in bf16)."""
        compute = {"fp8": "fp8", "int8": "int8", "fp4": "fp4"}.get(weight_dtype, "bf16")
        return self.peak_flops.get(compute, self.peak_flops["bf16"])


class AllReduceMethods:
    def alpha_at(self, tp: int) -> float:
        """Latency at a TP size: exact entry, else linear in log2(TP) between entries and beyond."""
        import numpy as np

        if tp <= 1:
            return 0.0
        if tp in self.alpha_us:
            return float(self.alpha_us[tp])
        sizes = np.array(sorted(k for k in self.alpha_us if k > 1), dtype=float)
        vals = np.array([self.alpha_us[int(k)] for k in sizes])
        if len(sizes) == 1:
            return float(vals[0])
        x = np.log2(tp)
        if x > np.log2(sizes[-1]):  # past the table: continue the last log-linear segment (more hops)
            slope = (vals[-1] - vals[-2]) / (np.log2(sizes[-1]) - np.log2(sizes[-2]))
            return float(vals[-1] + max(slope, 0.0) * (x - np.log2(sizes[-1])))
        return float(np.interp(x, np.log2(sizes), vals))

    def bus_at(self, tp: int) -> float:
        """Bus bandwidth at a TP size (bytes/s): its own entry, else linear in log2(TP) between the listed sizes
        (the nearest one's beyond them), else ``bus_bytes_per_s``."""
        import numpy as np

        table = self.bus_bytes_per_s_by_tp or {}
        if tp in table:
            return float(table[tp])
        if not table:
            return float(self.bus_bytes_per_s)
        sizes = sorted(table)
        return float(np.interp(np.log2(max(tp, 1)), np.log2(sizes), [table[t] for t in sizes]))

    def max_bytes_at(self, tp: int) -> float | None:
        """The largest message this implementation takes at a TP size (bytes; None: any size): its own entry,
        else that of the next listed size up (the custom all-reduce's rule: one-shot below 512 KiB at TP <= 4,
        below 256 KiB at TP <= 8), else the largest listed size's; ``max_message_bytes`` where none is listed."""
        table = self.max_message_bytes_by_tp or {}
        if not table:
            return self.max_message_bytes
        if tp in table:
            return float(table[tp])
        above = [t for t in table if t >= tp]
        return float(table[min(above)] if above else table[max(table)])


class EngineMethods:
    def running_cap(self, speculative: bool) -> int | None:
        """Requests the engine runs at once (None: no cap): the launch's cap, else, with speculation on, the
        engine's speculative default. The one place this rule lives."""
        return self.max_running_requests or (self.spec_max_running_requests if speculative else None)

    def running_at_once(self, batch: int, speculative: bool) -> int:
        """Of a batch of ``batch`` requests, the ones the engine runs at once (the rest wait in the queue)."""
        cap = self.running_cap(speculative)
        return batch if cap is None else min(batch, cap)
