import pytest
from holter.cli import build_parser
from holter_server.commands import kinds
from holter_server.vocabulary.signals import SIGNAL_KIND_NAMES


def test_holter_kinds_lists_every_kind(capsys):
    assert kinds.run(build_parser().parse_args(["kinds"])) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in SIGNAL_KIND_NAMES) and "verl" in out


def test_kind_options_take_names_globs_and_a_bare_kind():
    assert kinds.parse_kind_options(["train/ce=loss", "eval/*=eval_loss", "statistic"]) == {
        "train/ce": "loss",
        "eval/*": "eval_loss",
        "*": "statistic",
    }


@pytest.mark.parametrize(("value", "problem"), [("x=temperature", "unknown kind 'temperature'"), ("=loss", "empty")])
def test_a_bad_kind_option_says_what_is_wrong(value, problem):
    with pytest.raises(ValueError, match=problem):
        kinds.parse_kind_options([value])
