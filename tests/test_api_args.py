"""The Python API's arguments: a wrong type or an unknown name is one clear error naming the argument.

``specsim.predict(steps="2")`` used to end in ``'<' not supported between 'str' and 'int'`` deep in the range
checks, ``graph_max=1.5`` was silently used as 1.5, ``verify_ms("3")`` read the string's characters and
``predict(step=2)`` named ``build_scenario``. Each is now a :class:`~specsim.errors.SpecsimTypeError` (a
``ValueError`` and a ``TypeError``) or a ``SpecsimError`` whose line names the argument and what it takes.
"""

import math
from pathlib import Path

import numpy as np
import pytest

import specsim
from specsim.analysis.predict import operator_table
from specsim.errors import SpecsimError, SpecsimTypeError


@pytest.mark.parametrize("kw, field, allowed", [
    ({"steps": "2"}, "steps", "an integer"),
    ({"tp": "8"}, "tp", "an integer"),
    ({"batch": 2.5}, "batch", "an integer"),
    ({"batch": True}, "batch", "an integer"),
    ({"batch": math.nan}, "batch", "NaN"),
    ({"graph_max": 1.5}, "graph-max", "an integer"),
    ({"draft_tokens": "4"}, "draft-tokens", "an integer"),
    ({"accept": [1, 2]}, "accept", "a finite number"),
    ({"accept": "2"}, "accept", "a finite number"),
    ({"accept": math.inf}, "accept", "a finite number"),
    ({"accept_rates": 0.8}, "accept-rates", "a list"),
    ({"accept_rates": ["a"]}, "accept-rates", "a list"),
    ({"accept_rates": [math.nan]}, "accept-rates", "finite"),
    ({"model": 3}, "model", "a string"),
    ({"gpu": 3}, "gpu", "a string"),
    ({"engine": 3}, "engine", "a string"),
    ({"profile": 3}, "profile", "a string"),
    ({"stop_strings": "yes"}, "stop-strings", "True or False"),
])
def test_a_wrong_type_names_the_argument(kw, field, allowed):
    with pytest.raises(SpecsimTypeError) as exc:
        specsim.predict(**kw)
    msg = str(exc.value)  # named as the flag (draft-tokens), as the range errors name it
    assert msg.startswith(f"{field}: got ") and allowed in msg and "\n" not in msg
    assert isinstance(exc.value, TypeError) and isinstance(exc.value, ValueError)  # either except catches it


def test_an_unknown_argument_names_it_and_the_nearest_one():
    with pytest.raises(TypeError, match=r"^step: unknown argument \(did you mean 'steps'\?\); allowed: model, gpu"):
        specsim.predict(step=2)
    with pytest.raises(SpecsimTypeError, match="^bogus: unknown argument; allowed: "):
        specsim.verify_ms((1, 3), bogus=1)
    with pytest.raises(SpecsimTypeError, match="^stepz: unknown argument"):
        specsim.build_scenario(**{"stepz": 2})


@pytest.mark.parametrize("scenario", [3, 2.5, ["kimi-k2.5-seed"]])
def test_a_scenario_that_is_no_name_path_or_scenario_is_named(scenario):
    with pytest.raises(SpecsimTypeError, match="^scenario: got .*allowed: a built-in scenario name"):
        specsim.predict(scenario)
    with pytest.raises(SpecsimTypeError, match="^scenario: got "):
        specsim.load_scenario(scenario)


@pytest.mark.parametrize("tokens, field", [
    ("3", "tokens[0]"), ([2.5], "tokens[0]"), ([True], "tokens[0]"), ([math.nan], "tokens[0]"), ([math.inf], "tokens[0]"),
    ([10**12], "tokens[0]"), ([0], "tokens[0]"), ([], "tokens"), (range(1, 10**7), "tokens"), ({"a": 1}, "tokens"),
])
def test_verify_widths_are_integers_in_range_and_bounded(tokens, field):
    with pytest.raises(SpecsimError) as exc:
        specsim.verify_ms(tokens)
    assert str(exc.value).startswith(f"{field}: got ") and "allowed: an integer in [1, 65536]" in str(exc.value)


def test_operator_table_width_is_one_integer():
    with pytest.raises(SpecsimError, match=r"^tokens: got '3'"):
        operator_table("3")
    assert operator_table(3.0).tokens == 3


def test_integral_values_of_other_types_are_the_same_prediction():
    """2.0, numpy integers and a path object mean what they say: the same numbers as plain ints and strings."""
    plain = specsim.predict(batch=4, steps=2, accept=2.1)
    for kw in ({"batch": 4.0, "steps": np.int64(2), "accept": np.float32(2.1)},
               {"batch": np.int32(4), "steps": 2.0, "accept": 2.1}):
        other = specsim.predict(**kw)
        assert other.tok_s == pytest.approx(plain.tok_s, rel=1e-6) and other.batch == 4 and other.steps == 2
    assert specsim.verify_ms(3).tokens == [3] and specsim.verify_ms((1, np.int64(4))).tokens == [1, 4]
    fixture = Path(__file__).parent / "fixtures" / "hf" / "llama-3.1-8b-instruct"
    assert specsim.predict(model=fixture, tp=1).model == specsim.predict(model=str(fixture), tp=1).model


def test_the_cli_still_takes_its_flags(run_json):
    """The CLI passes typed values through the same checks: nothing it gives is refused."""
    d = run_json("predict", "--steps", "2", "--batch", "4", "--accept", "2.1", "--graph-max", "8", "--stop-strings")
    assert d["steps"] == 2 and d["batch"] == 4
