"""Pre-flight checks on real tiny CPU models: a model that can fit one batch and one whose graph is
detached, a causal transformer and one that sees the future, a GPT-2 whose cache agrees with its
full forward and one whose cached decoding uses stale position ids."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import holter.torch
from holter.preflight import Check
from torch import nn

VOCAB, WIDTH, LENGTH = 40, 32, 16


class CharModel(nn.Module):
    """A two-layer character transformer; `causal=False` is the planted bug: no mask."""

    def __init__(self, causal: bool = True) -> None:
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(LENGTH, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, 4, 64, dropout=0.1, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[-1]
        x = self.embed(tokens) + self.position(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t) if self.causal else None
        return self.head(self.blocks(x, mask=mask, is_causal=self.causal))


def next_token_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    logits = model(batch[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))


def tokens(rows: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, LENGTH + 1), generator=torch.Generator().manual_seed(seed))


def tiny_gpt2() -> transformers.GPT2LMHeadModel:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=WIDTH, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config)


def test_a_model_that_can_learn_fits_one_batch_and_is_left_as_it_was() -> None:
    torch.manual_seed(0)
    model = CharModel()
    before = [p.detach().clone() for p in model.parameters()]
    check = holter.torch.overfit_one_batch(model, tokens(2), next_token_loss, steps=200, lr=1e-2)
    assert check.passed, check.summary
    assert check.details["final_loss"] <= 0.1 < math.log(VOCAB) - 0.5 < check.details["initial_loss"]
    assert check.summary.startswith(f"the loss on one batch fell from {check.details['initial_loss']:.4g} to ")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # a copy was trained


def test_a_detached_graph_cannot_fit_one_batch() -> None:
    torch.manual_seed(0)

    def detached(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        logits = model(batch[:, :-1]).detach()  # the planted bug
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))

    check = holter.torch.overfit_one_batch(CharModel(), tokens(), detached, steps=50)
    assert not check.passed and "the gradient does not flow as it should (a detached graph" in check.summary


def test_a_loss_that_starts_at_zero_shows_no_learning() -> None:
    def masked_out(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        per_token = nn.functional.cross_entropy(
            model(batch[:, :-1]).reshape(-1, VOCAB), batch[:, 1:].reshape(-1), reduction="none"
        )
        return (per_token * torch.zeros_like(per_token)).sum() / per_token.numel()  # a mask hiding every token

    check = holter.torch.overfit_one_batch(CharModel(), tokens(), masked_out, steps=20)
    assert not check.passed and "starts at 0" in check.summary


def test_a_causal_model_hides_the_future_and_one_without_its_mask_leaks() -> None:
    torch.manual_seed(0)
    ids = tokens(2)[:, :LENGTH]
    good = holter.torch.causal_mask_leak(CharModel(causal=True), ids)
    assert good.passed and good.details["positions"] == [8, 15], good.summary
    leaky = holter.torch.causal_mask_leak(CharModel(causal=False), ids)
    assert not leaky.passed and leaky.details["leaks"][0]["first_moved"] == 0
    assert leaky.summary.startswith("changing the token at position 8 moved the logits at position 0")


def test_a_bidirectional_hugging_face_model_leaks_and_gpt2_does_not() -> None:
    torch.manual_seed(0)
    ids = tokens(2)[:, :LENGTH]
    bert = transformers.BertForMaskedLM(
        transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
        )
    )
    assert not holter.torch.causal_mask_leak(bert, ids).passed
    assert holter.torch.causal_mask_leak(tiny_gpt2(), ids).passed


def test_gpt2_decoding_with_its_cache_matches_the_full_forward() -> None:
    check = holter.torch.cached_vs_full(tiny_gpt2(), tokens(2)[:, :LENGTH])
    assert check.passed and check.details["max_abs_diff"] < 1e-4, check.summary


class StalePositions(transformers.GPT2LMHeadModel):
    """The planted cache bug: every token decoded with the cache is given position 0."""

    def forward(self, input_ids=None, cache=None, **kwargs):  # type: ignore[no-untyped-def]
        cached = cache if cache is not None else kwargs.get("past_key_values")  # renamed in transformers 5
        if cached is not None and kwargs.get("position_ids") is None:
            kwargs["position_ids"] = torch.zeros_like(input_ids)
        if cache is not None:
            kwargs["cache"] = cache
        return super().forward(input_ids=input_ids, **kwargs)


def test_a_cache_with_stale_position_ids_parts_from_the_full_forward_where_it_starts() -> None:
    torch.manual_seed(0)
    model = StalePositions(tiny_gpt2().config)
    check = holter.torch.cached_vs_full(model, tokens(2)[:, :LENGTH])
    assert not check.passed and check.details["first_position"] == 1
    assert check.summary.startswith("decoding with the cache parts from the full forward at position 1")


def test_preflight_runs_what_its_arguments_allow_and_sends_the_results() -> None:
    sent: list[list[Check]] = []

    class Recorder:
        def report_preflight(self, checks: list[Check]) -> None:
            sent.append(checks)

    model = tiny_gpt2()
    ids = tokens(2)[:, :LENGTH]
    checks = holter.torch.preflight(
        model, run=Recorder(), batch=ids, loss_fn=lambda m, b: m(b, labels=b).loss, input_ids=ids, lr=1e-2
    )
    assert [c.name for c in checks] == ["overfit_one_batch", "causal_mask", "cached_vs_full"]
    assert all(c.passed for c in checks), [c.summary for c in checks]
    assert sent == [checks] and checks[0].to_json()["details"]["steps"] >= 1
    assert [c.name for c in holter.torch.preflight(CharModel(), input_ids=ids)] == ["causal_mask"]
    with pytest.raises(ValueError, match="nothing to check"):
        holter.torch.preflight(model)
