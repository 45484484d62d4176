"""The runs search's grammar and how a config value is matched (analysis/configs.py)."""

from __future__ import annotations

from holter_server.analysis.configs import RunSearch, parse_search, value_matches


def test_words_and_key_value_words_are_told_apart() -> None:
    assert parse_search("warmup optimizer.lr=3e-4 =x") == RunSearch(
        words=("warmup", "=x"), values=(("optimizer.lr", "3e-4"),)
    )


def test_the_config_filter_is_a_value_or_a_key_that_must_be_there() -> None:
    assert parse_search(None, " model.depth = 12 ") == RunSearch(values=(("model.depth", "12"),))
    assert parse_search("", "model.depth") == RunSearch(keys=("model.depth",))
    assert parse_search("  ", "  ") == RunSearch()


def test_numbers_match_as_numbers_whatever_their_spelling() -> None:
    assert value_matches(0.0003, "3e-4") and value_matches(3, "3.0") and not value_matches(0.001, "3e-4")
    assert not value_matches(3, "three")


def test_booleans_match_true_and_false_not_one_and_zero() -> None:
    assert value_matches(True, "TRUE") and not value_matches(True, "1") and not value_matches(False, "true")


def test_text_matches_whole_in_any_case_and_lists_by_their_json() -> None:
    assert value_matches("AdamW", "adamw") and not value_matches("AdamW", "adam")
    assert value_matches([0.9, 0.95], "[0.9, 0.95]")
