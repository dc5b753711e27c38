"""Per-layer expert counts of a MoE router, as engines dump them.

Two formats, one reader (:func:`read_expert_counts`):

* SGLang's expert-distribution recorder (``/start_expert_distribution_record`` then
  ``/dump_expert_distribution_record``; ``expert_distribution_rank{R}_timestamp{T}.csv``): a header
  ``layer_id,expert_id,count`` and one row per (layer, expert) that routed at least one token.
* JSON: ``{"layers": [[count, ...], ...]}`` (one list per MoE layer, indexed by expert), or each layer as
  ``{"heat": [...]}`` (the public per-layer decode traces of ``calibration/datasets/moe-routing-skew.json``);
  optional ``num_experts`` (``n_expert_per_layer``) and ``experts_per_token`` (``k``).

Several files add up per layer (one dump per TP rank counts the same routing on each rank). Malformed CSV
rows are skipped and counted; reads are bounded (:mod:`specsim.io.safe_read`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SpecsimError
from .args import _INT_TOKEN_RE
from .checks import check_int
from .safe_read import LONG_LINE, MAX_JSON_BYTES, iter_lines, read_json_file

CSV_HEADER = ("layer_id", "expert_id", "count")
MAX_LAYERS = 4096  # MoE layers of one model (the largest today have ~100)
MAX_EXPERT_ID = 65_535  # target.moe.num_experts <= 65536
MAX_COUNT = 10**15  # tokens routed to one expert: beyond any real dump
MAX_FILES = 256
MAX_ENTRIES = 4_000_000  # (layer, expert) counts held (~100 layers x 512 experts today): memory stays bounded


@dataclass
class ExpertCounts:
    """Counts per MoE layer (layer id -> {expert id: count}), with what the files said about the router."""

    layers: dict[int, dict[int, int]] = field(default_factory=dict)
    num_experts: int | None = None  # stated by a JSON file
    experts_per_token: int | None = None
    files: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_skipped: int = 0

    entries: int = 0

    def add(self, layer: int, expert: int, count: int) -> None:
        per = self.layers.setdefault(layer, {})
        if expert not in per:
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                raise SpecsimError("expert counts", f"{self.entries} (layer, expert) entries",
                                   f"allowed: at most {MAX_ENTRIES:,}", show_value=False)
        per[expert] = per.get(expert, 0) + count
        if len(self.layers) > MAX_LAYERS:
            raise SpecsimError("expert counts", f"{len(self.layers)} layers", f"allowed: at most {MAX_LAYERS} MoE layers",
                               show_value=False)


def _int_in(text: str, lo: int, hi: int) -> int | None:
    t = text.strip()
    if len(t) > 20 or not _INT_TOKEN_RE.fullmatch(t):  # ASCII digits only ('²' is a digit to str.isdigit)
        return None
    v = int(t)
    return v if lo <= v <= hi else None


def _read_csv(path: str, out: ExpertCounts) -> None:
    header_seen = False
    for batch in iter_lines(path, "expert counts", allow_stdin=False):
        for line in batch:
            if line == LONG_LINE:
                out.rows_skipped += 1
                continue
            if not line.strip():
                continue
            parts = line.split(",")
            if not header_seen:
                parts[0] = parts[0].lstrip("\ufeff")  # a byte-order mark (a spreadsheet's save)
                if tuple(p.strip() for p in parts) != CSV_HEADER:
                    raise SpecsimError(f"expert counts {path}", line[:60], "allowed: SGLang's expert-distribution CSV "
                                       "(header layer_id,expert_id,count) or a JSON file of per-layer counts")
                header_seen = True
                continue
            vals = [_int_in(p, 0, hi) for p, hi in zip(parts, (MAX_LAYERS * 64, MAX_EXPERT_ID, MAX_COUNT))]
            if len(parts) != 3 or any(v is None for v in vals):
                out.rows_skipped += 1
                continue
            out.rows_read += 1
            out.add(*vals)  # type: ignore[arg-type]
    if not header_seen:
        raise SpecsimError(f"expert counts {path}", None, "is empty; allowed: SGLang's expert-distribution CSV "
                           "(header layer_id,expert_id,count) or a JSON file of per-layer counts", show_value=False)


def _count_list(v, where: str) -> list[int]:
    if not isinstance(v, list) or not v or len(v) > MAX_EXPERT_ID + 1:
        raise SpecsimError(where, None, f"allowed: a list of 1-{MAX_EXPERT_ID + 1} counts, one per expert", show_value=False)
    return [check_int(x, where, 0, MAX_COUNT) for x in v]


def _read_json(path: str, out: ExpertCounts) -> None:
    d = read_json_file(path, "expert counts", MAX_JSON_BYTES)
    f = f"expert counts {path}"
    if not isinstance(d, dict) or not isinstance(d.get("layers"), list) or not d["layers"]:
        raise SpecsimError(f, None, 'allowed: an object with "layers": a list of per-layer count lists (or of '
                           '{"heat": [...]})', show_value=False)
    for key, name in (("num_experts", "num_experts"), ("n_expert_per_layer", "num_experts"),
                      ("experts_per_token", "experts_per_token"), ("k", "experts_per_token")):
        if d.get(key) is not None:
            setattr(out, name, check_int(d[key], f"{f}: {key}", 1, MAX_EXPERT_ID + 1))
    if len(d["layers"]) > MAX_LAYERS:
        raise SpecsimError(f"{f}: layers", f"{len(d['layers'])} layers", f"allowed: at most {MAX_LAYERS}", show_value=False)
    for i, layer in enumerate(d["layers"]):
        counts = layer.get("heat") if isinstance(layer, dict) else layer
        lid = layer.get("layer", i) if isinstance(layer, dict) else i
        lid = lid if isinstance(lid, int) and not isinstance(lid, bool) and 0 <= lid <= MAX_LAYERS * 64 else i
        for e, c in enumerate(_count_list(counts, f"{f}: layers[{i}]")):
            if c:
                out.add(lid, e, c)
        out.layers.setdefault(lid, {})
        out.rows_read += 1


def read_expert_counts(paths: list[str]) -> ExpertCounts:
    """The counts of every file, added up per layer (see the module docstring for the formats)."""
    if not paths:
        raise SpecsimError("files", None, "give at least one expert-counts file", show_value=False)
    if len(paths) > MAX_FILES:
        raise SpecsimError("files", f"{len(paths)} files", f"allowed: at most {MAX_FILES}", show_value=False)
    out = ExpertCounts()
    for p in paths:
        p = str(p)
        is_json = p.lower().endswith(".json")
        (_read_json if is_json else _read_csv)(p, out)
        out.files.append(p)
        out.formats.append("json" if is_json else "sglang-csv")
    if not any(any(d.values()) for d in out.layers.values()):
        raise SpecsimError("expert counts", None, f"no routed token in {', '.join(out.files)[:200]}", show_value=False)
    return out
