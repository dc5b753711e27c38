import json

import pytest

from specsim.cli import main


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process: returns (exit_code, stdout, stderr)."""

    def _run(*args):
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out = capsys.readouterr()
        return exc.value.code, out.out, out.err

    return _run


@pytest.fixture
def run_json(run_cli):
    def _run(*args):
        code, out, err = run_cli(*args, "--json")
        assert code == 0, err
        return json.loads(out)

    return _run
