"""The run page's Run details, from a run as `GET /runs/{id}` answers: pre-flight order and badge,
the code version, cuDNN's version as a person reads it."""

from __future__ import annotations

from holter_dashboard.pages.run.details import code_stat, cudnn_text, preflight_badge, preflight_checks

CHECKS = {
    "overfit_one_batch": {"passed": True, "summary": "fell to 0.003"},
    "cached_vs_full": {"passed": True, "summary": "matched"},
    "causal_mask": {"passed": False, "summary": "position 0 moved by 0.3"},
}


def text_of(component) -> str:  # type: ignore[no-untyped-def]
    """The text a component shows, its children's included."""
    children = getattr(component, "children", component)
    if isinstance(children, (list, tuple)):
        return "".join(text_of(c) for c in children)
    return str(children) if not hasattr(children, "children") else text_of(children)


def test_failed_checks_come_first_then_in_the_order_preflight_runs_them() -> None:
    assert [name for name, _ in preflight_checks({"preflight": {"checks": CHECKS}})] == [
        "causal_mask",
        "overfit_one_batch",
        "cached_vs_full",
    ]


def test_the_header_badge_names_each_failed_check_and_is_absent_without_checks() -> None:
    assert text_of(preflight_badge({"preflight": {"checks": CHECKS}})) == "pre-flight failed: causal-mask leakage"
    passed = {name: {**check, "passed": True} for name, check in CHECKS.items()}
    assert text_of(preflight_badge({"preflight": {"checks": passed}})) == "pre-flight passed (3)"
    assert preflight_badge({"preflight": None}) is None


def test_the_header_shows_the_short_commit_with_a_marker_for_local_changes() -> None:
    dirty = {"provenance": {"code": {"commit": "9f3c2a17be04", "dirty": True, "diff_hash": "5e1d"}}}
    assert text_of(code_stat(dirty)) == "9f3c2a1 + local changes"
    assert text_of(code_stat({"provenance": {"code": {"commit": "9f3c2a17be04", "dirty": False}}})) == "9f3c2a1"
    assert text_of(code_stat({"provenance": {"code": {"script": "/jobs/train.py"}}})) == "train.py"
    assert text_of(code_stat({})) == "—"


def test_cudnn_s_version_number_is_read_as_its_release() -> None:
    assert (cudnn_text(90100), cudnn_text("8907"), cudnn_text("n/a")) == ("9.1.0", "8.9.7", "n/a")
