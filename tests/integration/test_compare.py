"""Signal or noise through the real service, on SQLite and Postgres: seed groups, their bands, a
verdict per arm pair (real effect, no detectable difference, unknown) with its interval and test,
the stand-in spread of one run per arm, bit-identical arms, and the confounders of a careless
ablation."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from tests.seed_runs import OFFSETS, STEPS, post_run


@pytest.fixture(scope="module")
def project(server) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """A baseline group, a better group, a group that is the same within noise, a lone run, and a
    run that changed the learning rate and the batch size along with the architecture."""
    name = f"cmp-{uuid.uuid4().hex[:6]}"
    base = {"model": {"norm": "layer"}, "lr": 3e-4, "batch_size": 32}
    with server.api() as api:
        arms = {
            "base": [post_run(api, name, {**base, "seed": s}, 0.0, OFFSETS[s]) for s in range(3)],
            "better": [
                post_run(api, name, {**base, "model": {"norm": "rms"}, "seed": s}, -0.031, OFFSETS[s]) for s in range(3)
            ],
            "same": [
                post_run(api, name, {**base, "model": {"norm": "scale"}, "data_seed": s}, -0.002, OFFSETS[s])
                for s in range(3)
            ],
            "lone": [post_run(api, name, {**base, "model": {"norm": "none"}, "seed": 0}, -0.06, 0.0)],
            "careless": [
                post_run(
                    api,
                    name,
                    {**base, "model": {"norm": "rms"}, "lr": 6e-4, "batch_size": 64, "seed": 0},
                    -0.05,
                    0.0,
                    tokens_per_step=2000,
                )
            ],
        }
    return {"project": [name], **arms}


def compare(api: httpx.Client, a: str, b: str, **params) -> dict:  # type: ignore[no-untyped-def]
    response = api.get("/compare", params={"metric": "eval_loss", "a": a, "b": b, **params})
    assert response.status_code == 200, response.text
    return response.json()


def test_runs_that_differ_only_in_seeds_are_one_group(api: httpx.Client, project: dict[str, list[str]]) -> None:
    group = api.get(f"/runs/{project['base'][1]}/seed-group").json()
    assert sorted(group["run_ids"]) == sorted(project["base"]) and group["config"]["model.norm"] == "layer"
    groups = api.get(f"/projects/{project['project'][0]}/seed-groups").json()["data"]
    assert sorted(g["size"] for g in groups) == [1, 1, 3, 3, 3]


def test_a_group_is_drawn_as_its_median_with_min_max_and_a_robust_spread(
    api: httpx.Client, project: dict[str, list[str]]
) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"group:{project['better'][0]}")
    band = found["a"]["band"]
    assert len(band["steps"]) == len(STEPS) and set(band["seeds"]) == {3}
    assert all(lo <= m <= hi for lo, m, hi in zip(band["low"], band["median"], band["high"]))
    assert 0.010 < band["high"][-1] - band["low"][-1] < 0.016 and 0.0 < band["spread"][-1] < 0.012


def test_a_better_group_is_a_real_effect(api: httpx.Client, project: dict[str, list[str]]) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"group:{project['better'][0]}")
    headline = found["headline"]
    assert headline["measure"] == "at_tokens" and headline["primary"] and headline["verdict"] == "real effect"
    # The point noise differs per arm and seed, so the measured effect is -0.031 give or take a little.
    effect = re.match(r"eval_loss ([0-9.]+) lower at 5M tokens \(95% CI -0\.0", headline["sentence"])
    assert effect and 0.027 < float(effect.group(1)) < 0.035, headline["sentence"]
    assert headline["ci_low"] < headline["difference"] < headline["ci_high"] < 0 and headline["effect_size"] < -2
    # both groups ran seeds 0, 1 and 2: each seed is compared with itself
    assert headline["test"] == "paired t-test" and headline["paired"] and headline["b_runs"] != []
    assert [c["key"] for c in found["config_diff"]] == ["model.norm"] and found["warnings"] == []
    assert found["identical"] is None


def test_a_group_within_the_seed_spread_is_no_detectable_difference_with_what_more_seeds_would_find(
    api: httpx.Client, project: dict[str, list[str]]
) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"group:{project['same'][0]}")
    assert {v["verdict"] for v in found["verdicts"]} == {"no detectable difference"}
    headline = found["headline"]
    assert headline["test"] == "Welch's t-test"  # data_seed and seed: not the same seeds
    assert headline["power_sentence"].startswith("no detectable difference at 3 seeds per arm; a difference of ")
    assert headline["detectable_difference"] > abs(headline["difference"]) and headline["seeds_needed"] > 3


def test_one_run_per_arm_is_judged_on_the_spread_of_a_seed_group_of_its_config(
    api: httpx.Client, project: dict[str, list[str]]
) -> None:
    found = compare(api, f"run:{project['base'][0]}", f"run:{project['lone'][0]}")
    headline = found["headline"]
    assert headline["test"] == "t-test on a stand-in seed spread" and headline["verdict"] == "real effect"
    assert headline["stand_in"] == f"run {project['base'][0]}'s seed group (3 seeds)"
    assert sorted(found["stand_in"]["run_ids"]) == sorted(project["base"])
    assert 0.004 < headline["sigma"] < 0.008  # the base group's own spread: offsets 0.012 apart


def test_one_run_per_arm_with_no_seed_group_anywhere_cannot_be_judged(api: httpx.Client) -> None:
    name = f"cmp-{uuid.uuid4().hex[:6]}"
    a = post_run(api, name, {"width": 64, "seed": 0}, 0.0, 0.0)
    b = post_run(api, name, {"width": 128, "seed": 0}, -0.02, 0.0)
    found = compare(api, f"run:{a}", f"run:{b}")
    assert found["headline"]["verdict"] == "unknown" and found["headline"]["p_value"] is None
    assert "with one run per arm: it cannot be judged" in found["headline"]["sentence"] and found["stand_in"] is None


def test_arms_that_logged_bit_identical_values_are_called_out(api: httpx.Client) -> None:
    name = f"cmp-{uuid.uuid4().hex[:6]}"
    # the posted noise is fixed by (shift, seed offset): a "change" that changed nothing logs the same values
    base = [post_run(api, name, {"flag": False, "seed": s}, 0.0, OFFSETS[s]) for s in range(3)]
    noop = [post_run(api, name, {"flag": True, "seed": s}, 0.0, OFFSETS[s]) for s in range(3)]
    found = compare(api, f"group:{base[0]}", f"group:{noop[0]}")
    identical = found["identical"]
    assert identical["all_identical"] and identical["pairs"] == 3 and len(identical["identical"]) == 3
    assert identical["sentence"].startswith("every one of the 3 seed pairs logged bit-identical eval_loss")
    assert found["headline"]["difference"] == 0 and found["headline"]["verdict"] == "no detectable difference"


def test_the_primary_measure_is_chosen_by_the_caller(api: httpx.Client, project: dict[str, list[str]]) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"group:{project['better'][0]}", primary="auc")
    assert found["headline"]["measure"] == "auc" and [v["primary"] for v in found["verdicts"]].count(True) == 1
    refused = api.get(
        "/compare",
        params={
            "metric": "eval_loss",
            "a": f"run:{project['base'][0]}",
            "b": f"run:{project['lone'][0]}",
            "primary": "x",
        },
    )
    assert refused.status_code == 422


def test_a_run_against_a_group(api: httpx.Client, project: dict[str, list[str]]) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"run:{project['lone'][0]}")
    assert found["a"]["kind"] == "group" and found["b"]["run_ids"] == project["lone"]
    assert found["headline"]["verdict"] == "real effect"


def test_a_confounded_ablation_is_flagged(api: httpx.Client, project: dict[str, list[str]]) -> None:
    found = compare(api, f"group:{project['base'][0]}", f"run:{project['careless'][0]}")
    assert [c["key"] for c in found["config_diff"]] == ["batch_size", "lr", "model.norm"]
    warnings = " | ".join(found["warnings"])
    assert "this ablation changed batch_size, lr and model.norm" in warnings
    assert "the learning rate differs (lr 0.0003 → 0.0006) along with batch_size and model.norm" in warnings
    assert "different token counts (5M vs 10M)" in warnings


def test_an_ablation_of_the_learning_rate_alone_raises_no_warning(api: httpx.Client) -> None:
    name = f"cmp-{uuid.uuid4().hex[:6]}"
    a = post_run(api, name, {"lr": 3e-4, "seed": 0}, 0.0, 0.0)
    b = post_run(api, name, {"lr": 1e-3, "seed": 0}, -0.01, 0.0)
    found = compare(api, f"run:{a}", f"run:{b}")
    assert [c["key"] for c in found["config_diff"]] == ["lr"] and found["warnings"] == []


def test_a_declared_seed_key_joins_runs_into_one_group(api: httpx.Client, server) -> None:  # type: ignore[no-untyped-def]
    name = f"cmp-{uuid.uuid4().hex[:6]}"
    ids = [post_run(api, name, {"lr": 1e-3, "rng": s}, 0.0, 0.0) for s in range(2)]
    assert api.get(f"/runs/{ids[0]}/seed-group").json()["size"] == 1
    assert api.put(f"/projects/{name}/settings", json={"seed_keys": ["rng"]}).status_code == 200
    assert api.get(f"/projects/{name}/settings").json()["seed_keys"] == ["rng"]
    assert sorted(api.get(f"/runs/{ids[0]}/seed-group").json()["run_ids"]) == sorted(ids)


def test_a_malformed_arm_is_refused_naming_the_form(api: httpx.Client, project: dict[str, list[str]]) -> None:
    response = api.get(
        "/compare", params={"metric": "eval_loss", "a": project["base"][0], "b": f"run:{project['lone'][0]}"}
    )
    assert response.status_code == 422 and "run:<run id>" in response.json()["detail"]
    missing = api.get(
        "/compare", params={"metric": "nope", "a": f"run:{project['base'][0]}", "b": f"run:{project['lone'][0]}"}
    )
    assert missing.status_code == 404 and "'nope' is not logged" in missing.json()["detail"]
