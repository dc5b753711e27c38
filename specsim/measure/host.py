"""The ``host`` section of ``specsim measure gpu``: CPU work an engine does per request that the model
charges by the microsecond, timed on this machine with the tokenizer library installed here.

``stop_check``: SGLang's ``Req.check_finished`` (v0.4.4, ``python/sglang/srt/managers/schedule_batch.py``,
https://github.com/sgl-project/sglang/blob/v0.4.4/python/sglang/srt/managers/schedule_batch.py)
decodes the last ``stop_str_max_len + 1`` output ids with the HF tokenizer on every call when the
request carries stop strings, which SGLang's frontend always adds (its chat template's stop
string). The check runs once per committed token and once per request in every speculative
cycle, exposed when the overlap scheduler is off. The body is replayed over a byte-level BPE
``transformers.PreTrainedTokenizerFast`` (the class SGLang loads; no model files needed: decoding
two ids is the Python path of ``decode``, not the vocabulary). Its ``stop_string_decode_us`` is
what ``--profile`` puts in ``engine.stop_check_us``.

``sync``: one GPU->CPU round trip as engines make it between phases (``.item()`` of a device
scalar, ``.tolist()`` of a small index tensor) with the GPU idle, wall-clock per call: what
``--profile`` puts in ``engine.host_sync_us``.
"""

from __future__ import annotations

import platform
import time

from . import MeasureError

STOP_STRING = "<|eot_id|>"  # Llama-3's chat-template stop string, as SGLang's frontend appends it


def _tokenizer():
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        raise MeasureError("host: transformers and tokenizers are not installed (pip install transformers, the "
                           "release your engine runs), or leave host out of --sections") from None
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["The quick brown fox jumps over the lazy dog. " * 20, "Speculative decoding verifies draft tokens. " * 20]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=[STOP_STRING]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=STOP_STRING)


class _Req:
    """The fields ``check_finished`` reads, as in SGLang v0.4.4."""

    def __init__(self, tokenizer, stop_strs: list[str]):
        self.tokenizer = tokenizer
        self.output_ids = list(range(5, 400))
        self.stop_strs = stop_strs
        self.stop_str_max_len = max((len(tokenizer.encode(s, add_special_tokens=False)) for s in stop_strs), default=0)
        self.eos_token_ids = {tokenizer.eos_token_id}
        self.max_new_tokens = 2048
        self.decoded_text = ""
        self.finished_reason = None

    def check_finished(self):  # the v0.4.4 body, less its abort and logprob branches
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


def _fastest_us(fn, calls: int, repeats: int, before=None) -> float:
    """us per ``fn()`` call, the fastest of ``repeats`` runs of ``calls`` calls (``before()`` ahead of each run)."""
    best = float("inf")
    for _ in range(repeats):  # the machine's other load only ever adds time: keep the fastest run
        if before is not None:
            before()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure_stop_check(calls: int = 20_000, repeats: int = 7) -> dict:
    """One ``check_finished`` call with and without a stop string (us, fastest of ``repeats`` runs)."""
    tok = _tokenizer()  # MeasureError (one line) when transformers is not installed
    import transformers
    with_stop = _fastest_us(_Req(tok, [STOP_STRING]).check_finished, calls, repeats)
    without = _fastest_us(_Req(tok, []).check_finished, calls, repeats)
    return {"check_finished_with_stop_string_us": round(with_stop, 3), "check_finished_no_stop_string_us": round(without, 3),
            "stop_string_decode_us": round(max(with_stop - without, 0.0), 3),
            "method": f"SGLang v0.4.4 Req.check_finished replayed over transformers.PreTrainedTokenizerFast; fastest of "
                      f"{repeats} x {calls} calls",
            "cpu": cpu_model(), "python": platform.python_version(), "transformers": transformers.__version__}


def measure_sync(torch, device: str, calls: int = 2_000, repeats: int = 7) -> dict:
    """Wall time (us, fastest of ``repeats`` runs) of ``x.item()`` on a device scalar and of ``.tolist()`` on
    64 device ints, the GPU idle: the round trip an engine pays at each sync between phases."""
    x = torch.zeros(1, dtype=torch.int32, device=device)
    idx = torch.arange(64, dtype=torch.int32, device=device)
    idle = torch.cuda.synchronize if device == "cuda" else None

    def best(fn) -> float:
        fn()  # warm
        return _fastest_us(fn, calls, repeats, before=idle)

    return {"item_idle_us": round(best(x.item), 3), "tolist_64_idle_us": round(best(idx.tolist), 3),
            "method": f"wall clock, fastest of {repeats} x {calls} calls, nothing else queued", "device": device,
            "cpu": cpu_model(), "torch": torch.__version__}


def run_host(c) -> dict:
    """The ``host`` section (``c``: the measurement context; quick runs time fewer calls)."""
    c.progress.log("host: a GPU->CPU sync round trip; SGLang finish check with and without a stop string")
    sync = measure_sync(c.torch, c.device, calls=200 if c.quick else 2_000, repeats=3 if c.quick else 7)
    return {"sync": sync, "stop_check": measure_stop_check(calls=2_000 if c.quick else 20_000, repeats=3 if c.quick else 7)}
