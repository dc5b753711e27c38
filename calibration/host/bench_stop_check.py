"""Host cost of one SGLang ``Req.check_finished`` when the request carries a stop string.

SGLang v0.4.4 (``srt/managers/schedule_batch.py`` ``Req.check_finished``) decodes the last
``stop_str_max_len + 1`` output ids with the HF tokenizer on every call when stop strings are
set; its frontend (``lang/interpreter.py``: ``clone.stop += self.chat_template.stop_str``) adds
the chat template's stop string (``<|eot_id|>`` for Llama-3) to every ``sgl.gen``, which is how
``benchmark/mtbench/bench_sglang_eagle.py`` sends its requests. The timing itself is
``specsim.measure.host`` (also the ``host`` section of ``specsim measure gpu``); this script
writes it as a dataset.

    pip install "transformers==4.48.3"   # the release SGLang v0.4.4 pins (its pyproject.toml)
    python calibration/host/bench_stop_check.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specsim.measure import MeasureError  # noqa: E402
from specsim.measure.host import measure_stop_check  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        sc = measure_stop_check()
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    out = {"kind": "host_microbenchmark", "what": "SGLang v0.4.4 Req.check_finished, one call (us)",
           **{k: sc[k] for k in ("check_finished_with_stop_string_us", "check_finished_no_stop_string_us",
                                 "stop_string_decode_us")},
           "source": "the body of Req.check_finished in SGLang v0.4.4 (python/sglang/srt/managers/schedule_batch.py, "
                     "https://github.com/sgl-project/sglang/blob/v0.4.4/python/sglang/srt/managers/schedule_batch.py), "
                     f"replayed by specsim.measure.host: {sc['method']}",
           "machine": {"cpu": sc["cpu"], "python": sc["python"], "transformers": sc["transformers"]},
           "date": time.strftime("%Y-%m-%d"), "command": "python calibration/host/bench_stop_check.py"}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
