"""Real trainings for `holter demo --real`: a tiny character-level transformer on CPU.

Each scenario trains the same model on the same generated corpus with one thing changed, and
streams its vital signs into the service through the real client (`holter.torch.watch` for the
gradient and activation norms and the non-finite tripwire, `timed_step` for step time and
throughput, `holter.torch.watch_loader` for the time each step waits for its batch):

| scenario    | what is changed                                             | diagnosis                             |
|-------------|-------------------------------------------------------------|---------------------------------------|
| healthy     | nothing                                                     | healthy                               |
| lr_too_high | warm-up to a learning rate of 1.0, no clipping              | divergence                            |
| unshuffled  | the data loader serves the four domains in blocks, in order | sawtooth                              |
| leaky_mask  | the causal mask lets each position see the next token       | too good                              |
| frozen      | the optimizer holds a stale copy of the parameters          | plateau                               |
| rl_mismatch | a "rollout engine" whose cache slot index overflows         | mismatch spikes, every 12 steps       |
| nan_layer   | from 60% of the run, block 1's attention masks a whole row  | divergence; tripwire: `blocks.1.attn` |
| slow_loader | from 60% of the run, each batch takes 60 ms to arrive       | input pipeline stall                  |

The corpus is generated here: four "domains" (made-up languages over overlapping halves of the
alphabet), each a stream of sentences of random words from its own lexicon. Word choice is random, so the honest
loss cannot fall below about 0.8 nats per character; a model that reads the next character
falls to ~0.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

import holter
import holter.torch
from holter.rl import logprob_mismatch
from holter.throughput import rates

DOMAINS = ("abcdefghijkl", "ghijklmnopqr", "mnopqrstuvwx", "stuvwxabcdef")
ALPHABET = "abcdefghijklmnopqrstuvwx ."
CONTEXT = 48
BATCH = 16


# -- corpus ---------------------------------------------------------------------------------------
def domain_text(letters: str, chars: int, rng: random.Random) -> str:
    """Sentences of random words over `letters`: `chars` characters of one made-up language."""
    lexicon = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 6))) for _ in range(24)]
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(lexicon) for _ in range(rng.randint(3, 7))) + ". "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:chars]


def encode(text: str) -> torch.Tensor:
    index = {c: i for i, c in enumerate(ALPHABET)}
    return torch.tensor([index[c] for c in text], dtype=torch.long)


@dataclass
class Corpus:
    """One encoded token stream per domain; train and held-out parts."""

    train: list[torch.Tensor]
    held_out: list[torch.Tensor]

    @classmethod
    def generate(cls, seed: int = 0, chars_per_domain: int = 40_000) -> Corpus:
        rng = random.Random(seed)
        streams = [encode(domain_text(letters, chars_per_domain, rng)) for letters in DOMAINS]
        cut = int(chars_per_domain * 0.9)
        return cls(train=[s[:cut] for s in streams], held_out=[s[cut:] for s in streams])


def sample_batch(
    streams: list[torch.Tensor], domains: list[int], generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows from the given domains (one per row): inputs and next-character targets."""
    rows = []
    for domain in domains:
        stream = streams[domain]
        start = int(torch.randint(0, len(stream) - CONTEXT - 1, (1,), generator=generator))
        rows.append(stream[start : start + CONTEXT + 1])
    batch = torch.stack(rows)
    return batch[:, :-1], batch[:, 1:]


# -- model ----------------------------------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, width: int, heads: int, leak: bool) -> None:
        super().__init__()
        self.heads = heads
        # the planted bug of the nan_layer scenario: a padding mask that covers a whole row, whose
        # softmax over nothing but -inf is NaN
        self.mask_everything = False
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        # diagonal=1 also admits position t+1: the token each position must predict
        self.register_buffer(
            "allowed", torch.ones(CONTEXT, CONTEXT).tril(diagonal=1 if leak else 0).bool(), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.heads)
        allowed = self.allowed[:length, :length] & (not self.mask_everything)
        scores = scores.masked_fill(~allowed, float("-inf"))
        mixed = scores.softmax(-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, leak: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads, leak)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    """A GPT-shaped character model: embeddings, `layers` blocks in a ModuleList, a head."""

    def __init__(self, *, width: int = 64, layers: int = 2, heads: int = 4, leak: bool = False) -> None:
        super().__init__()
        self.tokens = nn.Embedding(len(ALPHABET), width)
        self.positions = nn.Embedding(CONTEXT, width)
        self.blocks = nn.ModuleList([Block(width, heads, leak) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, len(ALPHABET))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Log-probability of each target token."""
    return logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


# -- scenarios -----------------------------------------------------------------------------------
@dataclass
class Scenario:
    """One training run of the demo and the diagnosis it should get."""

    name: str
    description: str
    expected: str
    steps: int
    # the series that shows the diagnosis
    metric: str = "loss"
    lr: float = 3e-3
    clip: float | None = 1.0
    warmup: int = 20
    leak: bool = False
    blocked: bool = False
    stale_optimizer: bool = False
    rollouts_num: int | None = None
    # from `PLANTED_FROM` of the run: the block whose attention masks everything (nan_layer), and
    # the seconds each batch then takes to arrive (slow_loader)
    nan_block: int | None = None
    loader_delay: float | None = None
    # the cross-signal event the service raises for this scenario (beside `expected` on `metric`)
    finding: str | None = None
    # the fewest steps that still show the diagnosis (the zig-zag check needs 512 points)
    min_steps: int = 100


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            "a tiny char transformer, shuffled data, AdamW 3e-3 with warm-up and clipping",
            "healthy",
            steps=600,
        ),
        Scenario(
            "lr_too_high",
            "warm-up to a learning rate of 1.0, 300x the healthy one, without clipping",
            "divergence",
            steps=300,
            lr=1.0,
            clip=None,
            warmup=60,
        ),
        Scenario(
            "unshuffled",
            "the loader serves the four domains in blocks of 16 steps, always in the same order",
            "sawtooth",
            steps=600,
            blocked=True,
            min_steps=520,
        ),
        Scenario(
            "leaky_mask",
            "the causal mask admits the next token (tril(diagonal=1))",
            "too_good",
            steps=300,
            leak=True,
            min_steps=200,
        ),
        Scenario(
            "frozen",
            "the optimizer was built over a copy of the parameters: the model's weights never change",
            "plateau",
            steps=200,
            stale_optimizer=True,
            min_steps=120,
        ),
        Scenario(
            "rl_mismatch",
            "the rollout engine's cache slot index overflows once per pass over its slots",
            "sawtooth",
            steps=200,
            rollouts_num=8,
            metric="logprob_mismatch/abs_diff_mean",
        ),
        Scenario(
            "nan_layer",
            "from 60% of the run, block 1's attention masks every position: its softmax makes a NaN",
            "divergence",
            steps=200,
            nan_block=1,
            finding="first_nonfinite",
        ),
        Scenario(
            "slow_loader",
            "from 60% of the run, each batch takes 60 ms to arrive (a throttled remote store)",
            "level_shift",
            steps=200,
            loader_delay=0.06,
            metric="holter/loader/wait_fraction",
            finding="input_stall",
        ),
    )
}
# where the nan_layer and slow_loader scenarios plant their problem, as a share of the run
PLANTED_FROM = 0.6

BLOCK_STEPS = 16
# The rollout engine of the rl_mismatch scenario: a cache of SLOTS sequence slots, filled in
# order by PROMPTS x rollouts_num sequences per step; slots from OVERFLOW_SLOT up are written
# elsewhere (the 32-bit index overflow of the source story), so their state reads as zeros.
PROMPTS = 2
SLOTS = 192
OVERFLOW_SLOT = 176


def corrupted_rows(step: int, rollouts_num: int) -> list[int]:
    """Rows of this step's rollout batch whose cache slot lies past the overflow."""
    per_step = PROMPTS * rollouts_num
    first = (step * per_step) % SLOTS
    return [row for row in range(per_step) if (first + row) % SLOTS >= OVERFLOW_SLOT]


def rollout_logprobs(
    model: CharTransformer, inputs: torch.Tensor, targets: torch.Tensor, corrupted: list[int]
) -> torch.Tensor:
    """The rollout engine's log-probs: the same weights, logits rounded to float16 as an inference
    engine returns them (the healthy ≈1e-3 gap), and the first block's output lost for the
    corrupted rows (the state written to the wrong cache slot)."""
    with torch.no_grad():
        x = model.tokens(inputs) + model.positions(torch.arange(inputs.shape[1]))
        x = model.blocks[0](x)
        if corrupted:
            x[corrupted] = model.tokens(inputs[corrupted])
        for block in model.blocks[1:]:
            x = block(x)
        return token_logprobs(model.head(model.ln_f(x)).half().float(), targets)


class Recorder:
    """Logs to the run and keeps each series, so the demo can name what it shows."""

    def __init__(self, run: holter.Run) -> None:
        self.run = run
        self.series: dict[str, tuple[list[int], list[float]]] = {}
        self.nonfinite: list[dict[str, Any]] = []

    def log(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Log to the run and keep the values."""
        self.run.log(metrics, step=step)
        for name, value in metrics.items():
            steps, values = self.series.setdefault(name, ([], []))
            steps.append(step if step is not None else len(steps))
            values.append(float(value))

    def report_nonfinite(
        self, step: int, *, forward: dict[str, Any] | None = None, gradient: dict[str, Any] | None = None
    ) -> None:
        """Pass the tripwire's report on to the run, keeping it."""
        self.nonfinite.append({"step": step, "forward": forward, "gradient": gradient})
        self.run.report_nonfinite(step, forward=forward, gradient=gradient)

    @contextmanager
    def timed_step(self, tokens: int, samples: int, step: int) -> Iterator[None]:
        """Time the block as one step, as `holter.Run.timed_step` does, keeping what it logs."""
        started = time.perf_counter()
        yield
        self.log(rates(time.perf_counter() - started, tokens, samples), step=step)


def train(scenario: Scenario, recorder: Recorder, *, seed: int = 0, corpus: Corpus | None = None) -> None:
    """Train `scenario` for its steps, logging every vital sign through `recorder`."""
    torch.manual_seed(seed)
    corpus = corpus or Corpus.generate(seed)
    generator = torch.Generator().manual_seed(seed)
    model = CharTransformer(leak=scenario.leak)
    trained = copy.deepcopy(model) if scenario.stale_optimizer else model
    optimizer = torch.optim.AdamW(trained.parameters(), lr=scenario.lr, weight_decay=0.01)
    watch = holter.torch.watch(model, recorder, every=5, nan_tripwire=True)
    rollouts = scenario.rollouts_num or 0
    planted_from = int(scenario.steps * PLANTED_FROM)

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for step in range(scenario.steps):
            rows = PROMPTS * rollouts if rollouts else BATCH
            if scenario.blocked:
                domains = [(step // BLOCK_STEPS) % len(DOMAINS)] * rows
            else:
                domains = [int(d) for d in torch.randint(0, len(DOMAINS), (rows,), generator=generator)]
            if scenario.loader_delay and step >= planted_from:
                time.sleep(scenario.loader_delay)
            yield sample_batch(corpus.train, domains, generator)

    try:
        for step, (inputs, targets) in enumerate(holter.torch.watch_loader(batches(), recorder)):
            if scenario.nan_block is not None:
                model.blocks[scenario.nan_block].attn.mask_everything = step >= planted_from
            for group in optimizer.param_groups:
                group["lr"] = scenario.lr * min(1.0, (step + 1) / scenario.warmup) if scenario.warmup else scenario.lr
            if rollouts:
                # the rollout engine scores its completions with the weights the trainer now holds
                rollout = rollout_logprobs(model, inputs, targets, corrupted_rows(step, rollouts))
            # the step time covers the update only; evaluation and the rollout check are extra work
            with recorder.timed_step(tokens=inputs.numel(), samples=len(inputs), step=step):
                logits = model(inputs)
                loss = F.cross_entropy(logits.reshape(-1, len(ALPHABET)), targets.reshape(-1))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if scenario.clip is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), scenario.clip)
                optimizer.step()
            if rollouts:
                # same weights, same tokens, before the update: the gap should be ≈0
                logprob_mismatch(rollout, token_logprobs(logits.detach(), targets), run=recorder, step=step)
            metrics = {"loss": loss.item(), "lr": optimizer.param_groups[0]["lr"]}
            if step % 25 == 0 or step == scenario.steps - 1:
                metrics["eval_loss"] = evaluate(model, corpus, generator)
            recorder.log(metrics, step=step)
    finally:
        watch.remove()


def evaluate(model: CharTransformer, corpus: Corpus, generator: torch.Generator) -> float:
    """Loss on one held-out batch covering every domain."""
    inputs, targets = sample_batch(corpus.held_out, [i % len(DOMAINS) for i in range(BATCH)], generator)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(inputs).reshape(-1, len(ALPHABET)), targets.reshape(-1)).item()
    model.train(was_training)
    return loss


def stream_scenario(
    scenario: Scenario, *, url: str, project: str, seed: int = 0, corpus: Corpus | None = None
) -> Recorder:
    """Create a run for `scenario`, train it while streaming, finish the run; return what was logged."""
    config = {
        "scenario": scenario.name,
        "expected": scenario.expected,
        "lr": scenario.lr,
        "clip": scenario.clip,
        "steps": scenario.steps,
        "context": CONTEXT,
        "batch_size": BATCH,
        "source": "holter demo --real",
    }
    if scenario.rollouts_num is not None:
        config["rollouts_num"] = scenario.rollouts_num
    run = holter.init(
        project=project,
        name=f"{scenario.name}-{time.strftime('%H%M%S')}",
        config=config,
        tags=["demo", "real", scenario.name],
        url=url,
        quiet=True,
    )
    recorder = Recorder(run)
    try:
        train(scenario, recorder, seed=seed, corpus=corpus)
    except BaseException:
        run.finish("crashed")
        raise
    run.finish()
    return recorder


def scenarios(names: list[str] | None = None, *, scale: float = 1.0) -> Iterator[Scenario]:
    """The named scenarios (default: all), their steps multiplied by `scale` down to `min_steps`."""
    for name in names or list(SCENARIOS):
        scenario = SCENARIOS[name]
        steps = min(scenario.steps, max(scenario.min_steps, int(scenario.steps * scale)))
        yield replace(scenario, steps=steps)
