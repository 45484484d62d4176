"""The non-finite tripwire (`watch(..., nan_tripwire=True)`) on tiny CPU models with a planted NaN."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from holter import nonfinite
from holter.torch import watch
from torch import nn


class Attention(nn.Module):
    """Self-attention whose mask can cover whole rows: the softmax of a row of -inf is NaN, made by
    this module's own code, although `out` is the first module to return it."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.mask_everything = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        if self.mask_everything:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool), float("-inf"))
        return self.out(scores.softmax(-1) @ v)


class _NaNGradient(torch.autograd.Function):
    """Identity forward, NaN backward: a backward pass that goes wrong while the forward is finite."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        return grad * float("nan")


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = Attention(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
        self.poison_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm(x))
        update = self.mlp(x)
        return x + (_NaNGradient.apply(update) if self.poison_backward else update)


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 11, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList([Block(width) for _ in range(3)])
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class ReportingRun:
    def __init__(self) -> None:
        self.reports: list[tuple[int, dict | None, dict | None]] = []

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        pass

    def report_nonfinite(self, step, *, forward=None, gradient=None) -> None:  # type: ignore[no-untyped-def]
        self.reports.append((step, forward, gradient))


@pytest.fixture
def model() -> TinyTransformer:
    torch.manual_seed(0)
    return TinyTransformer()


def batch(seed: int) -> torch.Tensor:
    return torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(seed))


def train_step(model: nn.Module, seed: int, loss_fn=None) -> torch.Tensor:  # type: ignore[no-untyped-def]
    model.zero_grad(set_to_none=True)
    tokens = batch(seed)
    logits = model(tokens)
    loss = (loss_fn or (lambda lg: nn.functional.cross_entropy(lg.reshape(-1, 11), tokens.reshape(-1))))(logits)
    loss.backward()
    return loss


def test_a_healthy_run_reports_nothing(model: TinyTransformer) -> None:
    run = ReportingRun()
    handle = watch(model, run, every=1, nan_tripwire=True)
    for seed in range(3):
        train_step(model, seed)
    handle.remove()
    assert run.reports == [] and handle.nonfinite is None


def test_the_module_whose_own_code_made_the_nan_is_named_not_its_child_that_returned_it(model: TinyTransformer) -> None:
    run = ReportingRun()
    handle = watch(model, run, every=1, nan_tripwire=True)
    train_step(model, 0)
    model.layers[1].attn.mask_everything = True
    train_step(model, 1)
    handle.remove()
    ((step, forward, gradient),) = run.reports
    assert step == 1
    assert forward == {"name": "layers.1.attn", "value": "NaN"}  # not layers.1.attn.out, the first to return it
    assert gradient is not None and gradient["value"] == "NaN"


def test_an_overflowing_leaf_module_is_named(model: TinyTransformer) -> None:
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    with torch.no_grad():
        model.layers[2].mlp[0].weight.fill_(3e38)  # finite weights, an output that overflows float32
    train_step(model, 0)
    assert run.reports[0][1]["name"] == "layers.2.mlp.0"
    assert run.reports[0][1]["value"] in ("Infinity", "-Infinity", "NaN")


def test_the_first_gradient_is_the_first_the_backward_pass_completed(model: TinyTransformer) -> None:
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    model.layers[1].poison_backward = True
    train_step(model, 0)
    ((_, forward, gradient),) = run.reports
    assert forward is None  # every output was finite
    # backward reaches block 1's MLP before block 0 and the embedding, which come first in
    # registration order and are NaN as well
    assert gradient is not None and gradient["name"].startswith("layers.1.mlp.2.")


def test_a_nan_in_a_float_batch_is_named_where_it_entered_as_received() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    features = torch.randn(3, 4)
    features[1, 2] = float("nan")
    model(features).sum().backward()
    ((_, forward, _),) = run.reports
    assert forward == {"name": "0", "value": "NaN", "inputs_finite": False}


def test_one_report_per_episode_of_non_finite_steps(model: TinyTransformer) -> None:
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    attention = model.layers[0].attn
    for step in range(9):
        attention.mask_everything = step in (3, 4, 5, 8)  # the weights stay finite: no optimizer step
        train_step(model, step)
    assert [step for step, _, _ in run.reports] == [3, 8]


def test_evaluation_without_gradients_is_not_checked(model: TinyTransformer) -> None:
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    model.layers[0].attn.mask_everything = True
    with torch.no_grad():
        model(batch(0))
    model.layers[0].attn.mask_everything = False
    train_step(model, 1)
    assert run.reports == []


def test_the_step_is_the_one_the_step_function_gave_at_its_first_forward(model: TinyTransformer) -> None:
    run = ReportingRun()
    optimizer_step = 0
    watch(model, run, every=10, step=lambda: optimizer_step, nan_tripwire=True)
    for optimizer_step in range(3):
        model.layers[2].attn.mask_everything = optimizer_step == 2
        for micro in range(2):
            train_step(model, 10 * optimizer_step + micro)
    assert [step for step, _, _ in run.reports] == [2]


def test_remove_takes_the_tripwire_hooks_off(model: TinyTransformer) -> None:
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True).remove()
    model.layers[0].attn.mask_everything = True
    train_step(model, 0)
    assert run.reports == []
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert not any(p._post_accumulate_grad_hooks for p in model.parameters())


def test_a_run_that_cannot_report_is_refused(model: TinyTransformer) -> None:
    class LogOnly:
        def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError, match="nan_tripwire"):
        watch(model, LogOnly(), nan_tripwire=True)


def test_forward_passes_never_followed_by_backward_do_not_pile_up_checks(
    model: TinyTransformer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nonfinite, "MAX_CHECKS_PER_STEP", 50)
    run = ReportingRun()
    handle = watch(model, run, every=1, nan_tripwire=True)
    for seed in range(20):
        model(batch(seed))  # gradients recorded, no backward: generation without torch.no_grad()
    assert len(handle._tripwire._sums) <= 50 + 60  # one forward's checks past the limit at most


def test_finite_half_precision_gradients_too_large_for_a_half_precision_norm_are_not_reported() -> None:
    torch.manual_seed(0)
    model = nn.Linear(1000, 100).half()
    run = ReportingRun()
    watch(model, run, every=1, nan_tripwire=True)
    (model(torch.ones(8, 1000, dtype=torch.half)) * 1000).sum().backward()
    assert torch.isfinite(model.weight.grad).all() and torch.linalg.vector_norm(model.weight.grad.float()) > 65504
    assert run.reports == []
