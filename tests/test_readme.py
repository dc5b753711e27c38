"""Every command in README.md's code blocks runs as written and exits 0.

Commands are taken from the ```bash and ```python blocks, verbatim: continuation lines are
joined, comments dropped, and ``a ; b`` / ``a && b`` split into commands. ``specsim ...`` and
``python -m specsim ...`` run in-process (fast); other ``python`` scripts run as a subprocess.
They run in order in one temporary directory holding a copy of the repository's ``examples/``
and ``calibration/`` folders, so files one command writes (``my-box.json``) feed the next and
nothing in the checkout changes. Only the set-up lines are not run here: installing the package
(``pip install``) and running this very test suite (``pytest``) - CI does both.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETUP = ("pip install", "-m pytest")  # set-up commands: installing and testing are CI's job


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def bash_commands() -> list[str]:
    cmds: list[str] = []
    for block in _blocks("bash"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            cur: list[str] = []
            for w in words + [";"]:
                if w in (";", "&&"):
                    if cur:
                        cmds.append(shlex.join(cur))
                    cur = []
                elif w.endswith(";") and len(w) > 1:
                    cur.append(w[:-1])
                    cmds.append(shlex.join(cur))
                    cur = []
                else:
                    cur.append(w)
    return cmds


COMMANDS = bash_commands()


def test_readme_has_commands() -> None:
    assert len(COMMANDS) > 20
    assert any("--model llama-3.1-70b --gpu h100 --tp 4" in c for c in COMMANDS if c.startswith("specsim sweep"))
    assert _blocks("python")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "examples", d / "examples",
                    ignore=shutil.ignore_patterns("founding_case_plan.*", "__pycache__"))
    shutil.copytree(ROOT / "calibration", d / "calibration", ignore=shutil.ignore_patterns("__pycache__"))
    return d


def _run_specsim(argv: list[str], cwd: Path, capsys) -> tuple[int, str]:
    import os

    from specsim.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        with pytest.raises(SystemExit) as exc:
            main(argv)
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.err[-2000:]


def test_readme_commands_run(workdir, capsys) -> None:
    failures = []
    for cmd in COMMANDS:
        words = shlex.split(cmd)
        if any(s in cmd for s in SETUP):
            continue
        if words[0] == "specsim":
            code, err = _run_specsim(words[1:], workdir, capsys)
        elif words[:3] == ["python", "-m", "specsim"]:
            code, err = _run_specsim(words[3:], workdir, capsys)
        elif words[0] == "python":
            r = subprocess.run([sys.executable, *words[1:]], cwd=workdir, capture_output=True, text=True,
                               timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
            code, err = r.returncode, r.stderr[-2000:]
        else:
            code, err = 127, f"the README test does not know how to run {words[0]!r}"
        if code != 0:
            failures.append(f"{cmd}\n  exit {code}: {err.strip()}")
    assert not failures, "README commands that failed:\n" + "\n".join(failures)


def test_readme_python_blocks_run(workdir, capsys) -> None:
    import os

    old = os.getcwd()
    os.chdir(workdir)
    try:
        for block in _blocks("python"):
            exec(compile(block, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    finally:
        os.chdir(old)
