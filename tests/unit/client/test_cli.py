"""The `holter` command's parser: --version, and place options before or after the subcommand."""

from __future__ import annotations

import sys

import pytest
from holter import __version__
from holter.cli import main, parse_args


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"holter {__version__}"


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "http://h:1", "report", "r1"],
        ["report", "r1", "--url", "http://h:1"],
        ["--url", "http://h:1", "alerts", "channels"],
        ["alerts", "--url", "http://h:1", "channels"],
        ["alerts", "channels", "--url", "http://h:1"],
        ["runs", "--url", "http://h:1"],
        ["--url", "http://h:1", "runs"],
    ],
)
def test_url_before_or_after_the_subcommand(argv: list[str]) -> None:
    assert parse_args(argv).url == "http://h:1"


@pytest.mark.parametrize(
    "argv",
    [
        ["--db", "sqlite:///x.db", "keys", "list"],
        ["keys", "--db", "sqlite:///x.db", "list"],
        ["keys", "list", "--db", "sqlite:///x.db"],
        ["db", "upgrade", "--db", "sqlite:///x.db"],
        ["--db", "sqlite:///x.db", "serve"],
    ],
)
def test_db_before_or_after_the_subcommand(argv: list[str]) -> None:
    assert parse_args(argv).database_url == "sqlite:///x.db"


def test_unset_place_options_are_none() -> None:
    args = parse_args(["report", "r1"])
    assert args.url is None and args.database_url is None


def test_a_place_option_the_command_does_not_use_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--url", "http://h:1", "serve"])
    assert exit_info.value.code == 2 and "holter serve takes no --url" in capsys.readouterr().err


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="the service's own Python check (run by .ci/python39)")
def test_service_commands_on_an_older_python_say_what_they_need(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "the Holter service needs Python 3.11 or newer" in capsys.readouterr().err
