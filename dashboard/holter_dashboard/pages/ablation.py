"""An ablation's verdict as the compare page shows it (`GET /api/v1/compare`): the headline
measure's verdict and sentence, its numbers each beside a line saying what the term means, what
these seeds could detect when nothing was, the measures drawn with their intervals, the other
measures (tested after the primary, Holm-corrected), bit-identical arms, the confounders and the
config diff.

Every number and word of the verdict is the service's (`analysis/verdicts.py`): the page lays it
out and explains the terms. It never says "noise": a difference not detected at these seeds is
said so, with what more seeds would find.
"""

from __future__ import annotations

import math
from typing import Any

import dash_mantine_components as dmc
from dash import dcc, html
from holter_charts.verdicts import verdict_interval_figure
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.components import UNCLIPPED

# One line for each term, shown where it appears.
TERMS = {
    "difference": "mean of arm B minus mean of arm A on this measure, from the values the runs logged",
    "interval": "the true differences these seeds are consistent with; when it leaves out 0, the difference is real",
    "effect size": "the difference in units of the seeds' standard deviation: how far apart the arms are, "
    "measured by how much seeds alone move the metric",
    "p-value": "how often a difference at least this large would turn up if the change did nothing; "
    "below 0.05 is called a real effect",
    "adjusted p": "a secondary measure's p-value after the primary's gate and Holm's correction over the "
    "secondary measures, so that reading several measures does not multiply false claims",
    "detectable": "the smallest difference a test at these seeds finds 80% of the time (its power): a smaller "
    "effect may be there and go unseen",
    "primary": "the measure chosen before anything was read (at matched tokens when every run counts them, "
    "else at the last step every run reached); the others count only after it",
    "stand-in": "with one run per arm nothing measures how far seeds scatter: a seed group's spread on the "
    "same metric is borrowed, and the verdict rests on it",
}
TESTS = {
    "paired t-test": "the arms ran the same seeds: each seed's difference is tested, so what the seed does cancels",
    "Welch's t-test": "two groups of seeds compared, each with its own spread",
    "t-test against the group's seeds": "one run's distance from a group's mean, in units of that group's spread",
    "t-test on a stand-in seed spread": "two single runs compared against a seed spread measured elsewhere",
}
IDENTICAL_TITLE = "Bit-identical arms: the change did nothing"


def suffixed(name: str, index: int) -> str:
    """The first metric's parts keep their ids (cmp-verdict, cmp-verdict-badge...); the others are numbered."""
    return name if index == 0 else f"{name}-{index}"


def signed(value: Any) -> str:
    """A difference as a person reads it: +0.0052, -0.031; a dash when there is none."""
    return f"{value:+.4g}" if isinstance(value, (int, float)) and math.isfinite(value) else "—"


def without_power(sentence: str, power: str | None) -> str:
    """The service's sentence without its power sentence, which the card shows on its own."""
    return sentence.replace(f": {power}", "", 1) if power else sentence


def verdict_badge(verdict: str, vocab: Vocabulary, **kwargs: Any) -> dmc.Badge:
    return dmc.Badge(
        verdict,
        color=vocab.verdict_badge(verdict),
        styles=UNCLIPPED,
        style={"flexShrink": 0},
        **kwargs,
    )


def term_row(term: str, value: Any, meaning: str) -> html.Tr:
    return html.Tr(
        [
            html.Td(
                term, style={"whiteSpace": "nowrap", "fontWeight": 600, "paddingRight": 12, "verticalAlign": "top"}
            ),
            html.Td(value, style={"whiteSpace": "nowrap", "fontFamily": "monospace", "paddingRight": 12}),
            html.Td(meaning, style={"color": "var(--mantine-color-dimmed)"}),
        ],
        className="cmp-term",
    )


def numbers_table(headline: dict[str, Any], index: int) -> html.Table:
    """The headline's numbers, each beside what it means."""
    where = headline.get("where") or ""
    rows = [term_row("B − A", f"{signed(headline.get('difference'))} {where}".strip(), TERMS["difference"])]
    if headline.get("ci_low") is not None and headline.get("ci_high") is not None:
        confidence = f"{float(headline.get('confidence') or 0.95):.0%}"
        rows.append(
            term_row(
                f"{confidence} confidence interval",
                f"{signed(headline['ci_low'])} to {signed(headline['ci_high'])}",
                TERMS["interval"],
            )
        )
    if headline.get("effect_size") is not None:
        rows.append(term_row("effect size", f"{abs(headline['effect_size']):.2g} seed SDs", TERMS["effect size"]))
    test = headline.get("test")
    if test:
        rows.append(term_row("test", test, TESTS.get(test, "")))
    if headline.get("p_value") is not None:
        rows.append(term_row("p-value", f"{headline['p_value']:.2g}", TERMS["p-value"]))
    if headline.get("detectable_difference") is not None:
        rows.append(
            term_row("detectable", f"±{headline['detectable_difference']:.3g}", TERMS["detectable"]),
        )
    rows.append(term_row("primary measure", headline.get("where") or headline.get("measure"), TERMS["primary"]))
    return html.Table(
        html.Tbody(rows), id=suffixed("cmp-verdict-numbers", index), style={"fontSize": 13, "borderSpacing": "0 3px"}
    )


def other_measures(others: list[dict[str, Any]], vocab: Vocabulary, index: int) -> list[Any]:
    """The measures tested after the primary: a row each, with its adjusted p-value and verdict."""
    header = html.Thead(
        html.Tr(
            [html.Th("measure"), html.Th("B − A"), html.Th("95% CI"), html.Th("p"), html.Th("adjusted p"), html.Th("")]
        )
    )
    body = html.Tbody(
        [
            html.Tr(
                [
                    html.Td(v.get("where") or v.get("measure"), title=v.get("sentence")),
                    html.Td(signed(v.get("difference")), style={"fontFamily": "monospace"}),
                    html.Td(
                        f"{signed(v.get('ci_low'))} to {signed(v.get('ci_high'))}"
                        if v.get("ci_low") is not None
                        else "—",
                        style={"fontFamily": "monospace"},
                    ),
                    html.Td(f"{v['p_value']:.2g}" if v.get("p_value") is not None else "—"),
                    html.Td(f"{v['p_adjusted']:.2g}" if v.get("p_adjusted") is not None else "—"),
                    html.Td(verdict_badge(v["verdict"], vocab, size="sm", variant="light")),
                ],
                className="cmp-other-verdict",
            )
            for v in others
        ]
    )
    return [
        dmc.Text("The other measures", size="sm", fw=600, mt=4),
        dmc.Table(
            [header, body], fz="sm", striped=True, withTableBorder=True, id=suffixed("cmp-other-verdicts", index)
        ),
        dmc.Text(f"adjusted p: {TERMS['adjusted p']}.", size="xs", c="dimmed", className="cmp-explain-adjusted"),
    ]


def config_diff(comparison: dict[str, Any], index: int) -> Any:
    changes = comparison.get("config_diff") or []
    if not changes:
        return dmc.Text("the arms' configs are the same apart from seeds", size="sm", c="dimmed")
    return dmc.Table(
        [
            html.Thead(html.Tr([html.Th("config key"), html.Th("A"), html.Th("B")])),
            html.Tbody([html.Tr([html.Td(c["key"]), html.Td(shown(c["a"])), html.Td(shown(c["b"]))]) for c in changes]),
        ],
        striped=True,
        withTableBorder=True,
        fz="sm",
        id=suffixed("cmp-config-diff", index),
    )


def shown(value: Any) -> str:
    return "absent" if value is None else str(value)


def verdict_card(comparison: dict[str, Any], vocab: Vocabulary, index: int = 0) -> dmc.Card:
    """What the service concluded about arm A against arm B, laid out for a reader (see the module doc)."""
    headline = comparison.get("headline")
    rows: list[Any] = [
        dmc.Text(f"A: {comparison['a']['label']}  ·  B: {comparison['b']['label']}", size="sm", c="dimmed")
    ]
    identical = comparison.get("identical")
    if identical:
        rows.append(
            dmc.Alert(
                identical["sentence"],
                title=IDENTICAL_TITLE if identical.get("all_identical") else "Some runs are bit-identical",
                color="red",
                variant="light",
                id=suffixed("cmp-identical", index),
            )
        )
    if headline:
        verdict = headline["verdict"]
        rows += [
            dmc.Group(
                [
                    verdict_badge(verdict, vocab, id=suffixed("cmp-verdict-badge", index), size="lg"),
                    dmc.Text(
                        without_power(headline["sentence"], headline.get("power_sentence")),
                        id=suffixed("cmp-verdict-sentence", index),
                        fw=600,
                    ),
                ],
                gap="sm",
                wrap="nowrap",
                align="flex-start",
            ),
            dmc.Text(
                f"{verdict}: {vocab.verdict_description(verdict)}",
                size="xs",
                c="dimmed",
                className="cmp-explain-verdict",
            ),
        ]
        if headline.get("power_sentence"):
            rows.append(
                dmc.Alert(
                    headline["power_sentence"],
                    title="Not detected at these seeds: what they could detect",
                    color="gray",
                    variant="light",
                    id=suffixed("cmp-power-sentence", index),
                )
            )
        if headline.get("stand_in"):
            rows.append(
                dmc.Text(
                    f"Stand-in seed spread: {headline['stand_in']}. {TERMS['stand-in'].capitalize()}.",
                    size="sm",
                    id=suffixed("cmp-stand-in", index),
                )
            )
        rows.append(numbers_table(headline, index))
    verdicts = comparison.get("verdicts") or []
    if verdicts:
        rows.append(
            dcc.Graph(
                id=suffixed("cmp-verdict-intervals", index),
                figure=verdict_interval_figure(comparison, vocab=vocab),
                config={"displaylogo": False, "displayModeBar": False},
            )
        )
    others = [v for v in verdicts if not headline or v["measure"] != headline["measure"]]
    if others:
        rows += other_measures(others, vocab, index)
    for warning in comparison.get("warnings") or []:
        rows.append(dmc.Alert(warning, color="orange", title="confounder", className="cmp-warning", p="xs"))
    rows.append(config_diff(comparison, index))
    return dmc.Card(
        dmc.Stack(rows, gap="xs"), withBorder=True, radius="md", p="sm", mb="md", id=suffixed("cmp-verdict", index)
    )
