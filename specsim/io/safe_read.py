"""Bounded, non-blocking reads of user-named files.

Every file a user names (scenario, HF config, dataset, log) goes through here:

* only regular files are read; a FIFO, a device (``/dev/zero``), a socket or a directory is
  refused at once (the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` before a
  single byte is read, so a FIFO without a writer cannot block);
* JSON files are read only up to :data:`MAX_JSON_BYTES` and their nesting depth is checked
  before :func:`json.loads` sees them (no ``RecursionError``), and ``NaN`` / ``Infinity`` /
  numbers that overflow to infinity are refused;
* logs are streamed line by line (:func:`iter_lines`) with memory independent of their length;
  a line longer than :data:`MAX_LINE_BYTES` is cut off and reported as such;
* ``-`` means standard input where a reader accepts it.

Errors are :class:`~specsim.errors.SpecsimError` (one line, naming the field).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from typing import IO

from ..errors import SpecsimError, one_line

MAX_JSON_BYTES = 64 * 1024 * 1024  # scenario / config / dataset files
MAX_JSON_DEPTH = 64  # a scenario nests 4 levels; HF configs ~4
MAX_JSON_VALUES = 4_000_000  # commas + containers of one JSON text (bounds the parsed objects: ~0.5 GB)
MAX_LINE_BYTES = 1024 * 1024  # one log line (longer lines are counted as one skipped line)
CHUNK_BYTES = 4 * 1024 * 1024

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "TooManyValues",
    "check_json_depth",
    "iter_blocks",
    "iter_lines",
    "loads_bounded",
    "open_regular",
    "read_json_file",
    "read_text_file",
]


class TooManyValues(SpecsimError):
    """A JSON text that could hold more values than allowed: counted on the text (commas and containers), before the
    parser builds them. A caller with its own count of values (a profile's) words the limit its own way."""


def _mib(n: int) -> str:
    """A byte limit as a user reads it: MiB, or bytes under one MiB."""
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike, field: str, max_bytes: int | None = None) -> tuple[int, int]:
    """Open ``path`` read-only without blocking; return ``(fd, size)`` of a regular file.

    Refuses (``SpecsimError`` naming ``field``) a missing file, a directory, a FIFO, a device or
    socket, and a file larger than ``max_bytes``. The caller closes the descriptor.
    """
    name = os.fspath(path)
    if name == "":
        raise SpecsimError(field, name, "an empty file name is not a file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise SpecsimError(field, name, "no such file") from None
    except IsADirectoryError:
        raise SpecsimError(field, name, "is a directory; give a file") from None
    except OSError as exc:
        raise SpecsimError(field, name, f"cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SpecsimError(field, name, f"is {_kind(st.st_mode)}; only regular files are read")
        if max_bytes is not None and st.st_size > max_bytes:
            raise SpecsimError(field, name, f"is {st.st_size:,} bytes; files up to {_mib(max_bytes)} are read")
        try:  # back to blocking reads for the regular file (O_NONBLOCK has no effect there anyway)
            os.set_blocking(fd, True)
        except OSError:
            pass
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_fd(fd: int, limit: int, field: str, name: str) -> bytes:
    """Read at most ``limit`` bytes; a file that grew past the limit while read is refused."""
    parts: list[bytes] = []
    got = 0
    while True:
        b = os.read(fd, min(CHUNK_BYTES, limit + 1 - got))
        if not b:
            break
        parts.append(b)
        got += len(b)
        if got > limit:
            raise SpecsimError(field, name, f"is larger than {_mib(limit)}; files up to {_mib(limit)} are read")
    return b"".join(parts)


def read_text_file(path: str | os.PathLike, field: str, max_bytes: int = MAX_JSON_BYTES, *,
                   allow_stdin: bool = False) -> str:
    """The text of a regular file of at most ``max_bytes`` (UTF-8; ``-`` is stdin if allowed)."""
    name = os.fspath(path)
    if allow_stdin and name == "-":
        data = _read_stream(sys.stdin.buffer, max_bytes, field)
    else:
        fd, _ = open_regular(name, field, max_bytes)
        try:
            data = _read_fd(fd, max_bytes, field, name)
        except OSError as exc:
            raise SpecsimError(field, name, f"is not readable ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecsimError(field, name, f"is not UTF-8 text (byte {exc.start})") from None


def _read_stream(fh: IO[bytes], limit: int, field: str) -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise SpecsimError(field, "-", f"standard input is larger than {_mib(limit)}")
    return data


def check_json_depth(text: str, field: str, name: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``max_depth`` before the recursive parser sees it.

    Strings are skipped whole (brackets inside them do not count). A text with fewer opening
    brackets than the limit cannot be too deep and is not scanned.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return
    import numpy as np

    body = _STRING_RE.sub("", text) if '"' in text else text  # brackets inside strings do not count
    arr = np.frombuffer(body.encode("utf-8", errors="replace"), dtype=np.uint8)
    pos = np.flatnonzero((arr == 0x5B) | (arr == 0x7B) | (arr == 0x5D) | (arr == 0x7D))
    if pos.size == 0:
        return
    sel = arr[pos]
    step = np.where((sel == 0x5B) | (sel == 0x7B), 1, -1).astype(np.int32)
    if int(np.cumsum(step, dtype=np.int32).max()) > max_depth:
        raise SpecsimError(field, name, f"JSON nested deeper than {max_depth} levels; allowed depth <= {max_depth}")


_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _first_nonfinite(obj, path: list[str], budget: list[int]):
    """The path and value of the first NaN/inf number in a parsed JSON value, or None."""
    if isinstance(obj, float):
        return (path, obj) if not math.isfinite(obj) else None
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list, float)):
                hit = _first_nonfinite(v, [*path, str(k)], budget)
                if hit:
                    return hit
    elif isinstance(obj, list):
        if obj and all(type(x) is int for x in obj[:64]) and all(type(x) is int for x in obj):
            return None
        for i, v in enumerate(obj):
            if isinstance(v, (dict, list, float)):
                hit = _first_nonfinite(v, [*path, str(i)], budget)
                if hit:
                    return hit
    return None


class DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key[:60]


def unique_keys(pairs: list) -> dict:
    """``object_pairs_hook`` of the JSON reads: an object that names a key twice is refused (:class:`DuplicateKey`)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def json_problem(exc: ValueError) -> str:
    """What the JSON parser refused, in one short line (CPython's integer-digits limit said as what it means)."""
    msg = one_line(exc)
    if "integer string conversion" in msg:
        limit = sys.get_int_max_str_digits()
        return f"an integer of more than {limit} digits; allowed: a number of at most {limit} digits"
    return msg[:200]


def loads_bounded(text: str, field: str, name: str, max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES):
    """``json.loads`` with a depth and a size limit; a NaN / Infinity / overflowing number is refused naming
    its path (``field: a.b.0: got inf; allowed: a finite number``)."""
    if text.count(",") + text.count("[") + text.count("{") > max_values:  # before the parser builds them
        raise TooManyValues(field, name, f"more than {max_values:,} JSON values; allowed at most {max_values:,}")
    check_json_depth(text, field, name, max_depth)
    try:
        obj = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise SpecsimError(field, name, f"the key {exc.key!r} appears twice in one object; allowed: each key once "
                                        "(JSON readers disagree on which one wins)") from None
    except RecursionError:
        raise SpecsimError(field, name, f"JSON nested too deeply; allowed depth <= {max_depth}") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise SpecsimError(field, name, f"not valid JSON ({json_problem(exc)})") from None
    if "N" in text or "I" in text or "e" in text or "E" in text:  # NaN, Infinity, 1e999
        hit = _first_nonfinite(obj, [], [0])
        if hit:
            path, value = hit
            where = ".".join(path) or "value"
            exc = SpecsimError(f"{field} {os.path.basename(name) or name}: {where}", value, "allowed: a finite number")
            exc.json_path = where  # for a caller that names the file its own way
            raise exc
    return obj


def read_json_file(path: str | os.PathLike, field: str, max_bytes: int = MAX_JSON_BYTES, *,
                   allow_stdin: bool = False, max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES):
    """Parse a bounded regular JSON file (see :func:`read_text_file` and :func:`loads_bounded`)."""
    name = os.fspath(path)
    return loads_bounded(read_text_file(name, field, max_bytes, allow_stdin=allow_stdin), field, name,
                         max_depth, max_values)


def _runs_of_lines(path: str | os.PathLike, field: str, allow_stdin: bool, max_line: int,
                   chunk: int) -> Iterator[bytes | None]:
    """The bytes of a log as runs of whole lines (``\\n``-joined, no final newline; the last run may be
    the unterminated final line), or ``None`` for each line longer than ``max_line`` bytes, which is
    never kept: memory is bounded by ``chunk + max_line``. ``-`` reads standard input."""
    name = os.fspath(path)
    if allow_stdin and name == "-":
        read = _stdin_reader(field)
        fd = None
    else:
        fd, _ = open_regular(name, field, max_bytes=MAX_LOG_BYTES)
        read = None
    tail = b""
    dropping = False  # inside an over-long line
    try:
        while True:
            try:
                block = os.read(fd, chunk) if fd is not None else read(chunk)  # type: ignore[misc]
            except OSError as exc:
                raise SpecsimError(field, name, f"is not readable ({exc.strerror or exc})") from None
            if not block:
                break
            cut = block.rfind(b"\n")
            if cut < 0:
                if dropping:
                    continue
                tail += block
                if len(tail) > max_line:
                    tail = b""
                    dropping = True
                    yield None
                continue
            head, rest = block[:cut], block[cut + 1:]
            if dropping:
                nl = head.find(b"\n")
                if nl < 0:  # the over-long line ends at ``cut``: nothing of it is kept
                    dropping = False
                    tail = rest
                    if len(tail) > max_line:
                        tail, dropping = b"", True
                        yield None
                    continue
                dropping = False
                data = head[nl + 1:]
            else:
                data = tail + head if tail else head
            tail = rest
            yield data
            if len(tail) > max_line:
                tail, dropping = b"", True
                yield None
        if tail and not dropping:
            yield tail
    finally:
        if fd is not None:
            os.close(fd)


def iter_lines(path: str | os.PathLike, field: str = "file", *, allow_stdin: bool = True,
               max_line: int = MAX_LINE_BYTES, chunk: int = CHUNK_BYTES) -> Iterator[list[str]]:
    """Yield the lines of a log in batches (lists of str, newline removed, ``\\r`` stripped).

    Memory is bounded by ``chunk + max_line`` whatever the file's length. Invalid UTF-8 becomes
    U+FFFD. A line longer than ``max_line`` bytes is yielded once as the marker
    :data:`LONG_LINE` (the caller counts it as skipped). ``-`` reads standard input.
    """
    for data in _runs_of_lines(path, field, allow_stdin, max_line, chunk):
        if data is None:
            yield [LONG_LINE]
            continue
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if "\r" in text:
            lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        if any(len(ln) > max_line for ln in lines):
            lines = [LONG_LINE if len(ln) > max_line else ln for ln in lines]
        yield lines


LONG_LINE = "\x00<over-long line>\x00"
MAX_STDIN_BYTES = 8 * 2**30  # a log piped on standard input: more than this is refused
MAX_LOG_BYTES = MAX_STDIN_BYTES  # a log file: a larger one is refused before it is read (ingest reads ~25-100 MB/s)


def _stdin_reader(field: str):
    """``read(n)`` of standard input that refuses, in one line, a stream longer than MAX_STDIN_BYTES
    (``/dev/zero`` piped in would otherwise be read for ever)."""
    total = 0

    def read(n: int) -> bytes:
        nonlocal total
        block = sys.stdin.buffer.read(n)
        total += len(block)
        if total > MAX_STDIN_BYTES:
            raise SpecsimError(field, "-", f"standard input gave more than {MAX_STDIN_BYTES // 2**30} GiB; "
                                           "give the log as a file instead")
        return block

    return read


def _split_long(text: str, max_line: int) -> Iterator[str | None]:
    """Split ``text`` (whole lines, ``\n``-separated) around lines longer than ``max_line``
    characters (a trailing ``\r`` not counted, as in :func:`iter_lines`): yields runs of whole
    lines and ``None`` for each over-long line."""
    n = len(text)
    if n <= max_line:
        yield text
        return
    start = pos = 0
    while n - pos > max_line:
        q = text.rfind("\n", pos, pos + max_line + 1)
        if q >= 0:  # every line from pos up to q fits; the next one starts at q + 1
            pos = q + 1
            continue
        end = pos + max_line  # max_line characters and a \r ending the line: fits
        if text.startswith("\r", end) and (end + 1 == n or text[end + 1] == "\n"):
            pos = end + 2
            continue
        if pos > start:
            yield text[start:pos - 1]
        yield None
        nl = text.find("\n", pos)
        if nl < 0:
            return
        start = pos = nl + 1
    yield text[start:]


def iter_blocks(path: str | os.PathLike, field: str = "file", *, allow_stdin: bool = True,
                max_line: int = MAX_LINE_BYTES, chunk: int = CHUNK_BYTES) -> Iterator[str]:
    """Like :func:`iter_lines`, but yield whole blocks of text: each item is either a run of
    complete lines joined by ``\\n`` (no final newline; a ``\\r`` before a newline is kept) or
    :data:`LONG_LINE` for a line longer than ``max_line`` bytes. Memory is bounded by
    ``chunk + max_line``; invalid UTF-8 becomes U+FFFD; ``-`` reads standard input."""
    for data in _runs_of_lines(path, field, allow_stdin, max_line, chunk):
        if data is None:
            yield LONG_LINE
            continue
        for part in _split_long(data.decode("utf-8", errors="replace"), max_line):
            yield LONG_LINE if part is None else part
