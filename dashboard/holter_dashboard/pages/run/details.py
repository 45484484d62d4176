"""The run page's "Run details": where the run came from and whether it can be trusted to mean
what it says, as the service recorded and judged it.

* **code** — the git commit (and branch) the job ran, with a marker when the working tree had
  local changes (their diff's hash tells two such runs apart), or the script's hash outside git
  (`provenance.code` of `GET /runs/{id}`);
* **environment** — Python, torch with CUDA and cuDNN, the GPUs, the host, the packages that
  shape training (`provenance.environment`);
* **pre-flight** — the checks the job ran before training (`holter.torch.preflight`: overfit one
  batch, causal-mask leakage, cached vs full forward), each passed or failed with its summary; a
  failed one also shows in the page's header, at a glance (`preflight.checks`);
* **twins** — runs that read the same batches in the same order, each a link to its page
  (`GET /runs/{id}/twins`);
* **repeats** — runs with the same config and seeds, compared value for value: deterministic or
  not, and where they part (`GET /runs/{id}/repeats`).

Code, environment and pre-flight come with the run itself and are drawn with the page. Twins and
repeats are read after the page is drawn (repeats read other runs' curves), so they never delay
the charts.
"""

from __future__ import annotations

import json
from typing import Any

import dash_mantine_components as dmc
from dash import html

from holter_dashboard.components import UNCLIPPED, link

# The checks `holter.torch.preflight` runs, in its order, as a person names them.
CHECK_LABELS = {
    "overfit_one_batch": "overfit one batch",
    "causal_mask": "causal-mask leakage",
    "cached_vs_full": "cached vs full forward",
}
CHECK_MEANING = {
    "overfit_one_batch": "a model that cannot drive one batch's loss to ≈0 has a bug in its loss, data or optimiser",
    "causal_mask": "changing a later token must not move an earlier position's output: a leak makes the loss "
    "too good to be true",
    "cached_vs_full": "generating with the key/value cache must give the full forward pass's logits",
}
ENVIRONMENT_FIELDS = (
    ("python", "Python"),
    ("torch", "torch"),
    ("cuda", "CUDA"),
    ("cudnn", "cuDNN"),
    ("hostname", "host"),
    ("platform", "platform"),
)
MAX_DIFFERS = 3  # config keys listed per twin


def check_label(name: str) -> str:
    return CHECK_LABELS.get(name, name.replace("_", " "))


def preflight_checks(run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The run's pre-flight checks by name, failed ones first, then in `holter.torch.preflight`'s order."""
    checks = dict(((run.get("preflight") or {}).get("checks")) or {})
    order = list(CHECK_LABELS)
    return sorted(
        checks.items(),
        key=lambda item: (
            bool(item[1].get("passed")),
            order.index(item[0]) if item[0] in order else len(order),
            item[0],
        ),
    )


def failed_checks(run: dict[str, Any]) -> list[str]:
    return [name for name, check in preflight_checks(run) if not check.get("passed")]


def preflight_badge(run: dict[str, Any]) -> dmc.Badge | None:
    """The header's pre-flight badge: red naming each failed check, green when all passed, none without checks."""
    checks = preflight_checks(run)
    if not checks:
        return None
    failed = failed_checks(run)
    if failed:
        text = "pre-flight failed: " + ", ".join(check_label(n) for n in failed)
        return dmc.Badge(text, color="red", variant="filled", id="run-preflight-badge", styles=UNCLIPPED)
    return dmc.Badge(
        f"pre-flight passed ({len(checks)})", color="green", variant="light", id="run-preflight-badge", styles=UNCLIPPED
    )


def code_of(run: dict[str, Any]) -> dict[str, Any]:
    return dict(((run.get("provenance") or {}).get("code")) or {})


def code_stat(run: dict[str, Any]) -> Any:
    """The header's code version: the short commit with a marker for local changes, the script
    outside git, or a dash when the run recorded none."""
    code = code_of(run)
    if code.get("commit"):
        parts: list[Any] = [str(code["commit"])[:7]]
        if code.get("dirty"):
            parts.append(html.Span(" + local changes", style={"color": "var(--mantine-color-orange-7)"}))
        return html.Span(parts, id="run-code")
    if code.get("script"):
        return html.Span(str(code["script"]).rsplit("/", 1)[-1], id="run-code")
    return html.Span("—", id="run-code")


def code_lines(run: dict[str, Any]) -> list[Any]:
    """The code version in full: commit and branch, local changes with their diff's hash, the script."""
    code = code_of(run)
    if not code:
        return [
            dmc.Text(
                "No code version recorded (holter.init records the git commit and its local changes).",
                size="xs",
                c="dimmed",
            )
        ]
    lines: list[Any] = []
    if code.get("commit"):
        branch = f" on {code['branch']}" if code.get("branch") else ""
        lines.append(dmc.Text([html.Code(str(code["commit"])[:12]), branch], size="xs", className="run-commit"))
        if code.get("dirty"):
            files = code.get("changed_files")
            changed = f"{files} file{'s' if files != 1 else ''} changed, " if isinstance(files, int) else ""
            truncated = " (hashed up to the client's limit)" if code.get("diff_truncated") else ""
            lines.append(
                dmc.Text(
                    f"local changes: {changed}diff {str(code.get('diff_hash') or '')[:12]}{truncated}",
                    size="xs",
                    c="orange.7",
                    className="run-dirty",
                )
            )
        elif code.get("dirty") is False:
            lines.append(dmc.Text("clean: no local changes", size="xs", c="dimmed"))
    if code.get("script"):
        digest = f" ({str(code['script_hash'])[:12]})" if code.get("script_hash") else ""
        lines.append(dmc.Text(f"script {code['script']}{digest}", size="xs", c="dimmed"))
    return lines


def environment_lines(run: dict[str, Any]) -> list[Any]:
    env = dict(((run.get("provenance") or {}).get("environment")) or {})
    if not env:
        return [dmc.Text("No environment recorded.", size="xs", c="dimmed")]
    pairs = [
        (label, cudnn_text(env[key]) if key == "cudnn" else env[key])
        for key, label in ENVIRONMENT_FIELDS
        if env.get(key)
    ]
    if env.get("gpus"):
        gpus = list(env["gpus"])
        pairs.append(("GPUs", f"{len(gpus)} × {gpus[0]}" if len(set(gpus)) == 1 else ", ".join(gpus)))
    rows = [
        html.Tr(
            [html.Td(label, style={"paddingRight": 8, "color": "var(--mantine-color-dimmed)"}), html.Td(str(value))]
        )
        for label, value in pairs
    ]
    parts: list[Any] = [html.Table(html.Tbody(rows), style={"fontSize": 11}, className="run-environment")]
    packages = dict(env.get("packages") or {})
    if packages:
        parts.append(
            html.Details(
                [
                    html.Summary(f"{len(packages)} packages", style={"fontSize": 11, "cursor": "pointer"}),
                    html.Div(
                        ", ".join(f"{k} {v}" for k, v in sorted(packages.items())),
                        style={"fontSize": 11, "fontFamily": "monospace"},
                    ),
                ]
            )
        )
    return parts


def cudnn_text(version: Any) -> str:
    """cuDNN's version as torch reports it (90100, 8907) read as a person does: 9.1.0, 8.9.7."""
    text = str(version)
    if not text.isdigit():
        return text
    n = int(text)
    major, minor, patch = (n // 10000, n // 100 % 100, n % 100) if n >= 10000 else (n // 1000, n // 100 % 10, n % 100)
    return f"{major}.{minor}.{patch}"


def preflight_lines(run: dict[str, Any]) -> list[Any]:
    checks = preflight_checks(run)
    if not checks:
        return [
            dmc.Text(
                "No pre-flight checks recorded (holter.torch.preflight: overfit one batch, causal-mask leakage, "
                "cached vs full forward).",
                size="xs",
                c="dimmed",
            )
        ]
    items = []
    for name, check in checks:
        passed = bool(check.get("passed"))
        items.append(
            dmc.Paper(
                [
                    dmc.Group(
                        [
                            dmc.Badge(
                                "passed" if passed else "failed",
                                color="green" if passed else "red",
                                variant="light" if passed else "filled",
                                size="xs",
                                styles=UNCLIPPED,
                            ),
                            dmc.Text(check_label(name), size="xs", fw=600),
                        ],
                        gap=6,
                        wrap="nowrap",
                    ),
                    dmc.Text(check.get("summary") or "", size="xs", mt=2, className="preflight-summary"),
                    dmc.Text(CHECK_MEANING.get(name, ""), size="xs", c="dimmed")
                    if not passed and name in CHECK_MEANING
                    else None,
                ],
                p=6,
                withBorder=True,
                radius="sm",
                className=f"preflight-check preflight-{'passed' if passed else 'failed'}",
                style=None if passed else {"borderColor": "var(--mantine-color-red-5)"},
            )
        )
    return [dmc.Stack(items, gap=4, id="run-preflight")]


def heading(text: str) -> dmc.Text:
    return dmc.Text(text, size="xs", fw=600, c="dimmed", tt="uppercase", mt=8, mb=2)


def details(run: dict[str, Any]) -> list[Any]:
    """Code version, environment and pre-flight: what came with the run."""
    return [
        heading("Code"),
        *code_lines(run),
        heading("Pre-flight"),
        *preflight_lines(run),
        heading("Environment"),
        *environment_lines(run),
    ]


def details_signature(run: dict[str, Any]) -> str:
    """What `details` shows: drawn again only when it changed."""
    return json.dumps([run.get("provenance"), run.get("preflight")], sort_keys=True, default=str)


def relations_pending() -> list[Any]:
    return [heading("Twins and repeats"), dmc.Text("reading…", size="xs", c="dimmed", className="relations-pending")]


def run_link(run_id: str, name: str | None, class_name: str) -> dmc.Anchor:
    return link(name or run_id, f"/runs/{run_id}", size="xs", className=class_name)


def change_text(change: dict[str, Any]) -> str:
    return f"{change['key']} {shown(change.get('a'))} → {shown(change.get('b'))}"


def shown(value: Any) -> str:
    return "absent" if value is None else str(value)


def twins_lines(twins: dict[str, Any] | None, problem: str | None) -> list[Any]:
    if twins is None:
        return [dmc.Text(problem or "Twins could not be read.", size="xs", c="red")]
    items: list[Any] = [dmc.Text(twins.get("sentence") or "", size="xs", id="run-twins-sentence")]
    for twin in twins.get("twins") or []:
        differs = twin.get("differs") or []
        more = f" and {len(differs) - MAX_DIFFERS} more" if len(differs) > MAX_DIFFERS else ""
        what = "; ".join(change_text(c) for c in differs[:MAX_DIFFERS]) + more if differs else "the same config"
        items.append(
            dmc.Group(
                [
                    run_link(twin["run_id"], twin.get("name"), "twin-link"),
                    dmc.Text(f"{twin.get('status') or ''} · {what}", size="xs", c="dimmed"),
                ],
                gap=6,
                className="twin-item",
            )
        )
    return items


def repeats_lines(repeats: dict[str, Any] | None, problem: str | None) -> list[Any]:
    if repeats is None:
        return [dmc.Text(problem or "Repeats could not be read.", size="xs", c="red")]
    items: list[Any] = [dmc.Text(repeats.get("sentence") or "", size="xs", id="run-repeats-sentence")]
    for repeat in repeats.get("repeats") or []:
        if repeat.get("identical"):
            badge = dmc.Badge("identical", color="green", variant="light", size="xs", styles=UNCLIPPED)
        elif repeat.get("same_code") is False:
            badge = dmc.Badge("other code", color="gray", variant="light", size="xs", styles=UNCLIPPED)
        elif repeat.get("first_difference"):
            badge = dmc.Badge("differs", color="red", variant="light", size="xs", styles=UNCLIPPED)
        else:
            badge = dmc.Badge("not compared", color="gray", variant="outline", size="xs", styles=UNCLIPPED)
        items.append(
            dmc.Stack(
                [
                    dmc.Group([badge, run_link(repeat["run_id"], repeat.get("name"), "repeat-link")], gap=6),
                    dmc.Text(repeat.get("sentence") or "", size="xs", c="dimmed"),
                ],
                gap=2,
                className="repeat-item",
            )
        )
    return items


def relations(
    twins: dict[str, Any] | None, repeats: dict[str, Any] | None, problems: tuple[str | None, str | None]
) -> list[Any]:
    """Twins (same data order) and repeats (same config and seeds), as the service found them."""
    return [
        heading("Twins (same data order)"),
        html.Div(twins_lines(twins, problems[0]), id="run-twins"),
        heading("Repeats (same config and seeds)"),
        html.Div(repeats_lines(repeats, problems[1]), id="run-repeats"),
    ]
