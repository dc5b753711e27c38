"""Atomic file writes: a failed run never leaves a half-written output.

Rules for an output path (``--out``, ``--csv``, ``scenario dump -o``):

* ``-`` writes to standard output;
* the parent directory must exist (it is not created silently); a directory as the target is
  refused with a clear error, before anything is computed if the command calls
  :func:`check_output` early; so is a file the command itself reads (its scenario, model config,
  profile or log), whatever name it is given by;
* a symlink is written through: the file it points to is replaced, the link stays;
* an existing file keeps its permission bits; a new file gets ``0666 & ~umask``;
* the data goes to a temporary file beside the target, which is renamed into place; the
  temporary file is removed on any exit: exceptions, SIGINT / SIGTERM / SIGHUP during the
  write, interpreter exit; temporary files left by a killed (SIGKILL) earlier run on the same
  target are removed by the next write.

Error messages name the target, never the temporary file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path

_TMP_MARK = ".specsim-tmp"
_live_temps: set[str] = set()
_lock = threading.Lock()


def _cleanup_all() -> None:
    for tmp in list(_live_temps):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _live_temps.discard(tmp)


atexit.register(_cleanup_all)


def _err(target: str, why: str):
    from ..errors import SpecsimError

    return SpecsimError("out", target, why)


def resolve_output(path: str | os.PathLike) -> Path:
    """The file that will really be written for ``path`` (symlinks followed), checked.

    Raises ``SpecsimError`` (field ``out``) for a directory, a missing or non-directory parent,
    an unwritable directory or a non-regular existing target (FIFO, device).
    """
    name = os.fspath(path)
    if name == "":
        raise _err(name, "an empty file name; give a file path or '-' for standard output")
    target = Path(os.path.realpath(name)) if os.path.islink(name) else Path(os.path.abspath(name))
    if target.is_dir():
        raise _err(name, "is a directory; give a file name inside it")
    if target.exists() and not target.is_file():
        raise _err(name, "exists and is not a regular file; refusing to replace it")
    parent = target.parent
    if not parent.exists():
        raise _err(name, f"the directory {str(parent)!r} does not exist; create it first")
    if not parent.is_dir():
        raise _err(name, f"{str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _err(name, f"the directory {str(parent)!r} is not writable")
    return target


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):  # missing, unreadable, or a name with a NUL: not an existing input
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output(path: str | os.PathLike | None, inputs=()) -> None:
    """Validate an output path before the work that produces its content (``-`` and None pass): the
    checks of :func:`resolve_output`; the path must not be one of the command's own ``inputs`` (files it
    reads: writing would replace them); then a probe file created and removed beside the target, since
    some directories pass every permission test and still refuse new files (``/proc``, read-only mounts)."""
    if path is None or os.fspath(path) == "-":
        return
    target = resolve_output(path)
    for src in inputs:
        if src is not None and os.fspath(src) not in ("", "-") and _same_file(str(target), os.fspath(src)):
            raise _err(os.fspath(path), f"is also an input of this command ({os.fspath(src)!r}); "
                                        "write the output to another file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.probe.", dir=target.parent)
    except OSError as exc:
        raise _err(os.fspath(path), f"cannot write there ({exc.strerror or exc})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _remove_stale(target: Path) -> None:
    """Remove temporaries of ``target`` left by runs that no longer exist (e.g. killed with -9)."""
    prefix = f".{target.name}."
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for n in names:
        if not (n.startswith(prefix) and n.endswith(_TMP_MARK)):
            continue
        pid_part = n[len(prefix):].split(".", 1)[0]
        if not pid_part.isdigit():
            continue
        pid = int(pid_part)
        alive = pid == os.getpid()
        if not alive:
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
        if not alive:
            with contextlib.suppress(OSError):
                os.unlink(target.parent / n)


@contextlib.contextmanager
def _signals_cleanup(tmp: str):
    """While writing ``tmp``: SIGINT/SIGTERM/SIGHUP remove it, then act as before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[int, object] = {}

    def handler(signum, frame):  # noqa: ARG001
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _live_temps.discard(tmp)
        prev = old.get(signum)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        raise SystemExit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, h in old.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, h)  # type: ignore[arg-type]


def write_atomic(path: str | os.PathLike, data) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring); ``-`` is stdout.

    ``data``: text, bytes, or an iterable of byte pieces written one after another (a large CSV is never
    held whole in memory)."""
    name = os.fspath(path)
    pieces = [data] if isinstance(data, (str, bytes, bytearray)) else data
    if name == "-":
        try:
            for part in pieces:
                if isinstance(part, str):
                    sys.stdout.write(part)
                else:
                    sys.stdout.flush()
                    sys.stdout.buffer.write(part)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader stopped early (`| head`): what it wanted was written; exit quietly
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
        return
    target = resolve_output(name)
    _remove_stale(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode) if target.exists() else None
    except OSError:
        mode = None
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=_TMP_MARK, dir=str(target.parent))
    except OSError as exc:
        raise _err(name, f"cannot write there ({exc.strerror or exc})") from None
    with _lock:
        _live_temps.add(tmp)
    try:
        with _signals_cleanup(tmp):
            try:
                with os.fdopen(fd, "wb") as fh:
                    for part in pieces:
                        fh.write(part.encode("utf-8") if isinstance(part, str) else part)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, mode)
                os.replace(tmp, target)
            except OSError as exc:
                raise _err(name, f"cannot write ({exc.strerror or type(exc).__name__}); the old file, if any, is unchanged") from None
    finally:
        with contextlib.suppress(OSError):
            if os.path.lexists(tmp):
                os.unlink(tmp)
        _live_temps.discard(tmp)
