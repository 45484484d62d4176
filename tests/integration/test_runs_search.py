"""Searching every run of a project, and the runs list on big configs, through the real server on
SQLite and Postgres: `q` and `config` look past the newest page, `config_keys` trims each run's
config to the columns shown, and the config keys offered as columns come from their own table."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import new_run_id


def _project() -> str:
    return f"search-{uuid.uuid4().hex[:8]}"


def _create(api: httpx.Client, project: str, **fields: object) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": project, **fields}).raise_for_status()
    return run_id


def _ids(answer: httpx.Response) -> list[str]:
    answer.raise_for_status()
    return [run["id"] for run in answer.json()["data"]]


def test_q_finds_a_run_older_than_the_page_by_its_exact_id(api: httpx.Client) -> None:
    project = _project()
    oldest = _create(api, project, name="first")
    for _ in range(4):
        _create(api, project, name="later")
    assert oldest not in _ids(api.get("/runs", params={"project": project, "limit": 2}))
    answer = api.get("/runs", params={"project": project, "limit": 2, "q": oldest})
    assert _ids(answer) == [oldest] and answer.json()["count"] == 1


def test_q_needs_every_word_somewhere_in_the_run_in_any_case(api: httpx.Client) -> None:
    project = _project()
    both = _create(api, project, name="Warmup-Sweep", tags=["ablation"])
    _create(api, project, name="warmup-sweep", tags=["baseline"])
    _create(api, project, name="other", config={"scheduler": "cosine"})
    assert _ids(api.get("/runs", params={"project": project, "q": "WARMUP Ablation"})) == [both]
    assert len(_ids(api.get("/runs", params={"project": project, "q": "cosine"}))) == 1


def test_a_key_value_word_matches_numbers_as_numbers(api: httpx.Client) -> None:
    project = _project()
    small = _create(api, project, config={"optimizer": {"lr": 0.0003, "name": "AdamW"}})
    _create(api, project, config={"optimizer": {"lr": 0.001, "name": "AdamW"}})
    _create(api, project, config={"lr": 0.0003})  # the same value at another key
    assert _ids(api.get("/runs", params={"project": project, "q": "optimizer.lr=3e-4"})) == [small]
    assert _ids(api.get("/runs", params={"project": project, "config": "optimizer.lr=0.0003"})) == [small]
    assert len(_ids(api.get("/runs", params={"project": project, "config": "optimizer.name=adamw"}))) == 2


def test_a_key_value_word_may_name_the_leaf_of_a_dotted_key(api: httpx.Client) -> None:
    project = _project()
    nested = _create(api, project, config={"optimizer": {"lr": 0.0003}})
    top = _create(api, project, config={"lr": 3e-4})
    _create(api, project, config={"scheduler": {"lr": 0.1}})
    assert _ids(api.get("/runs", params={"project": project, "q": "lr=0.0003"})) == [top, nested]


def test_a_key_value_search_counts_and_pages_every_match(api: httpx.Client) -> None:
    project = _project()
    matching = [_create(api, project, config={"seed": 7}) for _ in range(3)]
    _create(api, project, config={"seed": 8})
    first = api.get("/runs", params={"project": project, "q": "seed=7", "limit": 2})
    second = api.get("/runs", params={"project": project, "q": "seed=7", "limit": 2, "offset": 2})
    assert first.json()["count"] == 3
    assert _ids(first) + _ids(second) == matching[::-1]


def test_a_bare_config_key_finds_the_runs_that_have_it(api: httpx.Client) -> None:
    project = _project()
    with_key = _create(api, project, config={"model": {"depth": 12}})
    _create(api, project, config={"model": {"width": 512}})
    assert _ids(api.get("/runs", params={"project": project, "config": "model.depth"})) == [with_key]


def test_config_keys_trims_each_config_to_the_keys_asked_for(api: httpx.Client) -> None:
    project = _project()
    config = {f"k{i}": i for i in range(2_000)} | {"optimizer": {"lr": 0.1, "betas": [0.9, 0.95]}}
    run_id = _create(api, project, config=config)
    answer = api.get("/runs", params={"project": project, "config_keys": ["optimizer.lr", "k7", "absent"]})
    assert answer.json()["data"][0]["config"] == {"optimizer.lr": 0.1, "k7": 7}
    none = api.get("/runs", params={"project": project, "config_keys": ""})
    assert none.json()["data"][0]["config"] == {}
    assert api.get(f"/runs/{run_id}").json()["config"] == config  # the run itself is whole


def test_config_keys_are_offered_from_their_own_bounded_list(api: httpx.Client) -> None:
    project = _project()
    _create(api, project, config={f"layer{i}": {"dropout": 0.1, "width": 64} for i in range(300)})
    page = api.get("/config-keys", params={"project": project, "limit": 50}).json()
    assert page["count"] == 600 and len(page["keys"]) == 50 and page["keys"] == sorted(page["keys"])
    found = api.get("/config-keys", params={"project": project, "contains": "LAYER29.", "limit": 500}).json()
    assert found["keys"] == ["layer29.dropout", "layer29.width"]
    assert api.get("/config-keys", params={"project": project, "limit": 501}).status_code == 422


def test_a_resumed_run_adds_its_new_config_keys_once(api: httpx.Client) -> None:
    project = _project()
    run_id = _create(api, project, config={"lr": 0.1})
    api.post("/runs", json={"id": run_id, "project": project, "config": {"lr": 0.1, "warmup": 10}}).raise_for_status()
    _create(api, project, config={"lr": 0.2})
    assert api.get("/config-keys", params={"project": project}).json() == {"keys": ["lr", "warmup"], "count": 2}


def test_config_keys_of_one_project_are_not_another_s(api: httpx.Client) -> None:
    mine, theirs = _project(), _project()
    _create(api, mine, config={"mine": 1})
    _create(api, theirs, config={"theirs": 1})
    assert api.get("/config-keys", params={"project": mine}).json()["keys"] == ["mine"]


def test_projects_are_listed_with_their_runs_counted(api: httpx.Client) -> None:
    project = _project()
    _create(api, project)
    archived = _create(api, project)
    api.post(f"/runs/{archived}/archive").raise_for_status()
    listed = {p["name"]: p for p in api.get("/projects").json()}
    assert listed[project] == {"name": project, "runs": 2, "archived": 1}


def test_a_config_key_past_the_length_limit_is_a_422_naming_it(api: httpx.Client) -> None:
    answer = api.get("/runs", params={"config_keys": "k" * 513})
    assert answer.status_code == 422 and "config_keys" in answer.text
