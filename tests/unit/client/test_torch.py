"""`holter.torch.watch` on a tiny model: logged norms equal the ones computed directly."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from holter.torch import flops_per_token, layers_of, watch
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class TinyModel(nn.Module):
    """Embedding, two residual blocks in a ModuleList, a head: a transformer's shape without attention."""

    def __init__(self, vocab: int = 11, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([Block(width), Block(width)])
        self.head = nn.Linear(width, vocab)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x) * self.scale


class RecordingRun:
    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, float]]] = []

    def log(self, metrics, step=None) -> None:  # type: ignore[no-untyped-def]
        self.logged.append((step, dict(metrics)))

    def steps(self) -> list[int]:
        return [step for step, _ in self.logged]


@pytest.fixture
def model() -> TinyModel:
    torch.manual_seed(0)
    return TinyModel()


def tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(seed))


def train_step(model: nn.Module, seed: int) -> None:
    model.zero_grad(set_to_none=True)
    batch = tokens(seed)
    logits = model(batch)
    nn.functional.cross_entropy(logits.reshape(-1, 11), batch.reshape(-1)).backward()


def norm_of(parameters) -> float:  # type: ignore[no-untyped-def]
    return torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters if p.grad is not None])
    ).item()


def test_layers_are_container_elements_or_owning_modules(model: TinyModel) -> None:
    assert [layer.name for layer in layers_of(model)] == ["scale", "embed", "blocks.0", "blocks.1", "head"]


def test_total_gradient_norm_equals_the_norm_of_all_gradients(model: TinyModel) -> None:
    run = RecordingRun()
    watch(model, run, every=1)
    train_step(model, seed=1)
    ((_, logged),) = run.logged
    assert logged["holter/grad_norm"] == pytest.approx(norm_of(model.parameters()), rel=1e-5)
    assert logged["holter/grad_norm"] == pytest.approx(
        nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item(), rel=1e-5
    )


def test_layer_gradient_norms_equal_each_layers_own_norm(model: TinyModel) -> None:
    run = RecordingRun()
    watch(model, run, every=1)
    train_step(model, seed=1)
    logged = run.logged[0][1]
    assert logged["holter/grad_norm/blocks.0"] == pytest.approx(norm_of(model.blocks[0].parameters()), rel=1e-5)
    assert logged["holter/grad_norm/head"] == pytest.approx(norm_of(model.head.parameters()), rel=1e-5)
    assert logged["holter/grad_norm/scale"] == pytest.approx(abs(model.scale.grad.item()), rel=1e-5)


def test_activation_norms_are_the_rms_of_each_layers_output(model: TinyModel) -> None:
    run = RecordingRun()
    watch(model, run, every=1)
    train_step(model, seed=2)
    logged = run.logged[0][1]
    with torch.no_grad():
        x = model.embed(tokens(2))
        assert logged["holter/act_norm/embed"] == pytest.approx(x.pow(2).mean().sqrt().item(), rel=1e-5)
        for index, block in enumerate(model.blocks):
            x = block(x)
            assert logged[f"holter/act_norm/blocks.{index}"] == pytest.approx(x.pow(2).mean().sqrt().item(), rel=1e-5)
        assert logged["holter/act_norm/head"] == pytest.approx(model.head(x).pow(2).mean().sqrt().item(), rel=1e-5)
    assert "holter/act_norm/scale" not in logged


def test_only_every_nth_step_is_logged(model: TinyModel) -> None:
    run = RecordingRun()
    watch(model, run, every=3)
    for seed in range(7):
        train_step(model, seed)
    assert run.steps() == [0, 3, 6]


def test_no_grad_evaluation_is_ignored_and_does_not_count_as_a_step(model: TinyModel) -> None:
    run = RecordingRun()
    handle = watch(model, run, every=1)
    train_step(model, seed=0)
    model.eval()
    with torch.no_grad():
        model(tokens(5))
    with torch.inference_mode():
        model(tokens(6))
    model.train()
    train_step(model, seed=1)
    assert run.steps() == [0, 1] and handle.step == 2


def test_a_frozen_layer_logs_a_zero_gradient_norm(model: TinyModel) -> None:
    model.blocks[1].requires_grad_(False)
    run = RecordingRun()
    watch(model, run, every=1)
    train_step(model, seed=0)
    logged = run.logged[0][1]
    assert logged["holter/grad_norm/blocks.1"] == 0.0 and logged["holter/grad_norm/blocks.0"] > 0.0


def test_remove_takes_every_hook_off(model: TinyModel) -> None:
    run = RecordingRun()
    watch(model, run, every=1).remove()
    train_step(model, seed=0)
    assert run.logged == []
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_step_function_logs_the_gradients_accumulated_over_the_step(model: TinyModel) -> None:
    run = RecordingRun()
    optimizer_step = 0
    handle = watch(model, run, every=1, step=lambda: optimizer_step)
    for optimizer_step in range(2):
        model.zero_grad(set_to_none=True)
        for micro in range(3):
            batch = tokens(10 * optimizer_step + micro)
            nn.functional.cross_entropy(model(batch).reshape(-1, 11), batch.reshape(-1)).backward()
        accumulated = norm_of(model.parameters())
    handle.remove()
    assert run.steps() == [0, 1]
    assert run.logged[1][1]["holter/grad_norm"] == pytest.approx(accumulated, rel=1e-5)


def test_a_counted_step_can_be_set_to_follow_the_callers_step(model: TinyModel) -> None:
    run = RecordingRun()
    handle = watch(model, run, every=10)
    handle.step = 1000
    train_step(model, seed=0)
    assert run.steps() == [1000]


def test_two_outputs_backpropagated_together_count_as_one_step(model: TinyModel) -> None:
    run = RecordingRun()
    handle = watch(model, run, every=1)
    first, second = model(tokens(0)), model(tokens(1))
    (first.square().mean() + second.square().mean()).backward()
    assert run.steps() == [0] and handle.step == 1


def test_importing_holter_does_not_import_torch() -> None:
    code = (
        "import sys, holter, holter.rl, holter.throughput, holter.loader, holter.integrations; assert 'torch' not "
        "in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class GPTShaped(nn.Module):
    """Token and position tables, two layers of projections, an output layer tied to the token table
    or not, and a config with Hugging Face's names."""

    def __init__(self, *, tied: bool, head_dim: int | None = None) -> None:
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=2, hidden_size=16, num_attention_heads=4, head_dim=head_dim)
        self.wte = nn.Embedding(100, 16)
        self.wpe = nn.Embedding(32, 16)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(16, 48), nn.Linear(16, 16)) for _ in range(2))
        self.head = nn.Linear(16, 100, bias=not tied)
        if tied:
            self.head.weight = self.wte.weight


def test_flops_per_token_is_6n_plus_the_attention_term_by_hand() -> None:
    # N: the layers (16x48+48 + 16x16+16 = 1,088 each) and the token table, counted once as the
    # output layer's matmul; the position table costs nothing. 6 x 3,776 + 12 x 2 x 16 x 32 = 34,944
    assert flops_per_token(GPTShaped(tied=True), seq_len=32) == 6 * (2 * 1088 + 1600) + 12 * 2 * 16 * 32 == 34_944


def test_an_untied_token_table_is_a_lookup_and_the_output_layer_a_matmul() -> None:
    assert flops_per_token(GPTShaped(tied=False), seq_len=32) == 6 * (2 * 1088 + 1600 + 100) + 12 * 2 * 16 * 32


def test_the_attention_width_is_heads_times_head_dim_when_the_config_says_so() -> None:
    # Gemma-style: 4 heads of 8 attend over 32 dimensions of a 16-wide model
    assert flops_per_token(GPTShaped(tied=True, head_dim=8), seq_len=32) == 6 * 3776 + 12 * 2 * 32 * 32


def test_layers_and_width_come_from_multihead_attention_modules() -> None:
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    model = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
    parameters = sum(p.numel() for p in model.parameters())
    assert flops_per_token(model, seq_len=10) == 6 * parameters + 12 * 3 * 16 * 10


def test_a_model_of_unknown_shape_asks_for_layers_and_width(model: TinyModel) -> None:
    with pytest.raises(ValueError, match="n_layers= and attention_width="):
        flops_per_token(model, seq_len=6)
    assert flops_per_token(model, seq_len=6, n_layers=2, attention_width=8, parameters=1000) == 6000 + 12 * 2 * 8 * 6


def test_wandb_style_watch_logs_into_the_scripts_steps_every_log_freq_passes(model: TinyModel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # wandb's hooks log with commit=False from the log_freq-th backward pass on
    # (wandb/integration/torch/wandb_torch.py, log_track_update): nothing at the first pass, and
    # the script's own log() calls keep their steps
    import holter

    from tests.unit.client.test_wandb_surface import points

    run = holter.init(project="p", mode="offline", spool_dir=tmp_path)
    expected = {}
    try:
        holter.watch(model, log_freq=2)  # as a wandb script calls it
        for seed in range(5):
            train_step(model, seed)
            expected[seed] = norm_of(model.parameters())
            holter.log({"loss": float(seed)})
        assert run.step == 5
        logged = points(run, tmp_path)
    finally:
        holter.finish()
    assert logged["loss"] == {step: float(step) for step in range(5)}
    assert sorted(logged["holter/grad_norm"]) == [1, 3]  # the 2nd and 4th backward pass
    assert all(logged["holter/grad_norm"][step] == pytest.approx(expected[step], rel=1e-5) for step in (1, 3))


def test_unwatch_takes_the_hooks_off(model: TinyModel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import holter

    from tests.unit.client.test_wandb_surface import points

    run = holter.init(project="p", mode="offline", spool_dir=tmp_path)
    try:
        holter.watch(model, log_freq=1)
        train_step(model, 0)
        holter.log({"loss": 1.0})
        holter.unwatch(model)
        train_step(model, 1)
        holter.log({"loss": 0.5})
        logged = points(run, tmp_path)
    finally:
        holter.finish()
    assert sorted(logged["holter/grad_norm"]) == [0] and sorted(logged["loss"]) == [0, 1]


def test_wandb_style_watch_joins_a_script_logging_its_own_steps(model: TinyModel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import holter

    from tests.unit.client.test_wandb_surface import points

    run = holter.init(project="p", mode="offline", spool_dir=tmp_path)
    try:
        holter.watch(model, log_freq=1)
        for index, step in enumerate((0, 10, 20)):
            train_step(model, index)
            holter.log({"loss": float(step)}, step=step)
        logged = points(run, tmp_path)
    finally:
        holter.finish()
    assert sorted(logged["holter/grad_norm"]) == sorted(logged["loss"]) == [0, 10, 20]
