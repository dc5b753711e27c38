"""Host cost of one SGLang ``Req.check_finished`` when the request carries a stop string.

SGLang v0.4.4 (``srt/managers/schedule_batch.py`` ``Req.check_finished``) decodes the last
``stop_str_max_len + 1`` output ids with the HF tokenizer on every call when stop strings are
set; its frontend (``lang/interpreter.py``: ``clone.stop += self.chat_template.stop_str``) adds
the chat template's stop string (``<|eot_id|>`` for Llama-3) to every ``sgl.gen``, which is how
``benchmark/mtbench/bench_sglang_eagle.py`` sends its requests. This script times that call on
this machine's CPU with a byte-level BPE fast tokenizer (the Llama-3 tokenizer kind) wrapped in
``transformers.PreTrainedTokenizerFast``, the class SGLang loads. No model files are needed:
the decode cost of 2 ids is the Python path of ``decode``, not the vocabulary.

    pip install "transformers==4.48.3"   # the release current with SGLang v0.4.4 (March 2025)
    python calibration/host/bench_stop_check.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["The quick brown fox jumps over the lazy dog. " * 20, "Speculative decoding verifies draft tokens. " * 20]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|eot_id|>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|eot_id|>")


class _Req:
    """The fields ``check_finished`` reads, as in SGLang v0.4.4."""

    def __init__(self, tokenizer, stop_strs):
        self.tokenizer = tokenizer
        self.output_ids = list(range(5, 400))
        self.stop_strs = stop_strs
        self.stop_str_max_len = max((len(tokenizer.encode(s, add_special_tokens=False)) for s in stop_strs), default=0)
        self.eos_token_ids = {tokenizer.eos_token_id}
        self.max_new_tokens = 2048
        self.decoded_text = ""
        self.finished_reason = None

    def check_finished(self):  # the v0.4.4 body, minus abort/logprob branches
        if self.finished_reason is not None:
            return
        if len(self.output_ids) >= self.max_new_tokens:
            self.finished_reason = "length"
            return
        last = self.output_ids[-1]
        if last in self.eos_token_ids or last == self.tokenizer.eos_token_id:
            self.finished_reason = "eos"
            return
        if self.stop_strs:
            tail = self.tokenizer.decode(self.output_ids[-(self.stop_str_max_len + 1):])
            for s in self.stop_strs:
                if s in tail or s in self.decoded_text:
                    self.finished_reason = "stop"
                    return


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_us(req: _Req, n: int = 20000, repeats: int = 7) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            req.check_finished()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return min(runs)  # the machine's other load only ever adds time


def main() -> None:
    try:
        import transformers
    except ImportError:
        print("error: transformers: not installed; allowed: pip install 'transformers==4.48.3'", file=sys.stderr)
        raise SystemExit(2) from None

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tok = _tokenizer()
    with_stop = time_us(_Req(tok, ["<|eot_id|>"]))
    without = time_us(_Req(tok, []))
    out = {"kind": "host_microbenchmark", "what": "SGLang v0.4.4 Req.check_finished, one call (us)",
           "check_finished_with_stop_string_us": round(with_stop, 2), "check_finished_no_stop_string_us": round(without, 2),
           "stop_string_decode_us": round(with_stop - without, 2),
           "source": "the body of Req.check_finished in SGLang v0.4.4 (python/sglang/srt/managers/schedule_batch.py, "
                     "https://github.com/sgl-project/sglang/blob/v0.4.4/python/sglang/srt/managers/schedule_batch.py), "
                     "replayed over a transformers PreTrainedTokenizerFast; min of 7 x 20,000 calls",
           "machine": {"cpu": _cpu_model(), "python": platform.python_version(),
                       "transformers": transformers.__version__},
           "date": time.strftime("%Y-%m-%d"), "command": "python calibration/host/bench_stop_check.py"}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
