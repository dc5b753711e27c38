"""The vectorised CSV writer (specsim/io/csvfmt.py): every value parses back."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsim.io import csvfmt

_MAG = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
_FLOAT = st.one_of(_MAG, _MAG.map(lambda v: -v), st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf]))
_INT = st.integers(min_value=-(10**15), max_value=10**15)


def _check_float(text: str, want: float) -> None:
    got = float(text)
    assert " " not in text and "\0" not in text
    if math.isnan(want):
        assert text == "nan"
    elif math.isinf(want):
        assert text == ("inf" if want > 0 else "-inf")
    else:
        assert abs(got - want) <= 1e-6 * abs(want), (text, want)


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(min_value=1, max_value=300), ncols=st.integers(min_value=1, max_value=5),
       chunk=st.sampled_from([7, 64, 1000]))
def test_random_columns_parse_back(data, n, ncols, chunk):
    cols, header = [], []
    for i in range(ncols):
        kind = data.draw(st.sampled_from(["int", "float", "float_runs", "label"]))
        if kind == "int":
            cols.append(("int", np.array(data.draw(st.lists(_INT, min_size=n, max_size=n)), dtype=np.int64)))
        elif kind == "float":
            cols.append(("float", np.array(data.draw(st.lists(_FLOAT, min_size=n, max_size=n)), dtype=np.float64)))
        elif kind == "float_runs":  # few values in long runs: the format-once-and-repeat path
            vals = data.draw(st.lists(_FLOAT, min_size=1, max_size=3))
            cols.append(("float", np.repeat(np.array(vals, dtype=np.float64), -(-n // len(vals)))[:n]))
        else:
            cols.append(("label", np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))))
        header.append(f"c{i}")
    labels = {i: ["H100", "b200-x", "g"] for i, (k, _) in enumerate(cols) if k == "label"}
    text = b"".join(csvfmt.iter_csv(header, cols, labels, chunk_rows=chunk)).decode("ascii")
    rows = _rows(text)
    assert rows[0] == header and len(rows) == n + 1 and text.endswith("\n")
    for i, (kind, col) in enumerate(cols):
        for r, v in zip(rows[1:], col):
            if kind == "int":
                assert int(r[i]) == int(v)
            elif kind == "label":
                assert r[i] == labels[i][int(v)]
            else:
                _check_float(r[i], float(v))


@pytest.mark.parametrize("col", [
    np.array([1e-300, 1e300, -5e-324, 0.0]),  # scientific, 3-digit exponents, a subnormal
    np.array([9.9999996, 0.1, 99999.99999999]),  # rounding up to a new power of ten
    np.array([np.nan, np.nan]),
    np.array([0.0, 0.0]),
    np.zeros(0),
])
def test_edge_float_columns(col):
    text = csvfmt.columns_to_csv(["x"], [("float", col)])
    rows = _rows(text)
    assert rows[0] == ["x"] and len(rows) == col.size + 1
    for r, v in zip(rows[1:], col):
        _check_float(r[0], float(v))


def test_cli_sweep_csv_round_trips(run_cli, tmp_path):
    from specsim.analysis.sweep import COLUMNS, sweep

    out = tmp_path / "out.csv"
    code, _, err = run_cli("sweep", "--steps", "1-4", "--csv", str(out))
    assert code in (0, None), err
    res = sweep(None, steps=[1, 2, 3, 4])
    with out.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == COLUMNS and len(rows) == res.n + 1
    ints = ("steps", "topk", "draft_tokens", "tp", "batch", "ctx")
    for j, c in enumerate(COLUMNS):
        col = res.columns[c]
        for r, v in zip(rows[1:], col):
            if c == "gpu":
                assert r[j] == res.gpu_names[int(v)]
            elif c in ints:
                assert int(r[j]) == int(v)
            else:
                _check_float(r[j], float(v))


def test_integers_at_group_boundaries():
    edges = [0, 1, 9, 10, 9999, 10000, 99999, 100000, 99999999, 10**8, 10**12 - 1, 10**12, 10**15 - 1, 10**15,
             2**53 + 1, 2**63 - 1]
    col = np.array(edges + [-v for v in edges[1:]], dtype=np.int64)
    rows = _rows(csvfmt.columns_to_csv(["i"], [("int", col)]))
    assert [int(r[0]) for r in rows[1:]] == col.tolist()
    small = col[np.abs(col) < 10**15]  # the float64 quotient path
    rows = _rows(csvfmt.columns_to_csv(["i"], [("int", small)]))
    assert [int(r[0]) for r in rows[1:]] == small.tolist()
    fl = np.array([9999.9999999, 0.0001, 12345.678901, 99999.5], dtype=np.float64)
    for r, v in zip(_rows(csvfmt.columns_to_csv(["x"], [("float", fl)]))[1:], fl):
        _check_float(r[0], float(v))
