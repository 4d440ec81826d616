"""A pipeline-parallel worker for the PP tests, launched with torchrun (gloo on CPU, 2 ranks): a
small pre-norm transformer language model split torchtitan's way into 2 stages (stage 0: the token
and position embeddings and layers 0-1; stage 1: layers 2-3, the final norm and the output head; a
stage keeps the full model's module names), run by the schedule torch ships
(`torch.distributed.pipelining`: `ScheduleGPipe` or `Schedule1F1B`, 4 micro-batches a step, the
loss computed on the last stage by the schedule's `loss_fn`). Every rank calls
`lossdoctor.watch(stage, optimizer)` on its `PipelineStage`.

Arguments: OUT FAULT FAULT_STEP [SCHEDULE]
- FAULT `none`: a healthy run;
- `weight`: at FAULT_STEP, one weight of stage 0's `layers.1.mlp.up` is set to NaN (before the
  step's forward): the first bad layer is in stage 0, stage 1 receives NaN activations;
- `batch`: at FAULT_STEP, the activations stage 1 receives (its batch, from stage 0) get one NaN
  for one micro-batch (a forward pre-hook on stage 1's first layer): stage 0 stays finite in the
  forward, stage 1's `layers.2` is the first bad layer;
- `temper`: the last stage divides its logits by a per-sample temperature passed to its
  `schedule.step` (a keyword input of the stage, split into micro-batches with the rest), its own
  module `temper`; at FAULT_STEP sample `BAD_SAMPLE` (micro-batch 2) has a temperature of 0: the
  division makes Inf in the last stage's forward, from its inputs of that step;
- `input`: the first stage adds a projection (`feat_proj`) of per-token float features passed to
  its `schedule.step`; at FAULT_STEP sample `BAD_SAMPLE`'s features hold one NaN: stage 0's input
  batch is bad.
SCHEDULE: `gpipe` (default) or `1f1b`.

CONSOLE (optional 5th argument): what the ranks print to stdout each step, as the trainers print
it (the test launches torchrun with `--role rank --tee 3`, torchtitan's launcher flags, so each line
comes prefixed `[rankN]:`):
- `titan` (default): torchtitan's `[titan] ... - root - INFO - step: ...  loss: ...  grad_norm: ...
  memory: ...  tps: ...  tflops: ...  mfu: ...%` line on every rank, coloured, through `logging`
  with torchtitan's format; a rank without the last stage prints its placeholder loss -1.0, as
  torchtitan does; torchtitan's `Building 1-D device mesh with ['pp'], [2]` and `PP rank R is
  building stage_idx S ...` lines at start;
- `megatron`: Megatron-LM's arguments block on rank 0, each stage's `> number of parameters on
  (tensor, pipeline) model parallel rank (0, S)` line, and the iteration line (`training_log`'s
  format) on the last rank only (`print_rank_last`).
Steps are printed from 1 (both trainers count iterations from 1).
WATCHED (optional 6th argument): `stage` (default: `watch(stage, opt)`), `module`
(`watch(stage.submod, opt)`: the monitor finds the stage the module belongs to) or `none` (no
`watch`: the script as `lossdoctor run` starts it unedited).
REPLAY (optional 7th argument): `on` (default: a `replay_fn` is given, so each stage's micro-batches
are recorded and an incident is replayed on its stage alone) or `off` (no `replay_fn`).

Each rank writes rankN.json: the total gradient norm `clip_grad_norm_` computes across the stages
(each stage's norm squared, all-reduced over the pipeline group: torchtitan's way), the monitor's
warnings, and the torch.distributed all-reduces issued while training (the pipeline's own traffic
is point-to-point)."""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

STEPS = 12
VOCAB, DIM, HEADS, LAYERS, SEQ = 64, 32, 2, 4, 16
MICRO, BATCH = 4, 16
FEATS = 8
#: the sample of the step's batch the `temper` and `input` faults spoil: micro-batch 2, its sample 1
BAD_SAMPLE = 9


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential()
        self.mlp.add_module("up", nn.Linear(DIM, 4 * DIM))
        self.mlp.add_module("act", nn.GELU())
        self.mlp.add_module("down", nn.Linear(4 * DIM, DIM))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.ln1(h)
        causal = torch.triu(torch.full((h.shape[1], h.shape[1]), float("-inf")), diagonal=1)
        h = h + self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]
        return h + self.mlp(self.ln2(h))


class Temper(nn.Module):
    """Logits divided by a per-sample temperature (distillation's way)."""

    def forward(self, logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
        return logits / temperature


class Transformer(nn.Module):
    """torchtitan's shape: optional embeddings, a ModuleDict of layers, optional norm and output, so
    that a pipeline stage is the full model with the other stages' parts deleted. `feat_proj` and
    `temper` exist only on the stage a fault needs them (the `input` and `temper` faults)."""

    def __init__(self) -> None:
        super().__init__()
        self.tok_embeddings: nn.Module | None = nn.Embedding(VOCAB, DIM)
        self.pos_embeddings: nn.Module | None = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleDict({str(i): Block() for i in range(LAYERS)})
        self.norm: nn.Module | None = nn.LayerNorm(DIM)
        self.output: nn.Module | None = nn.Linear(DIM, VOCAB)
        self.feat_proj: nn.Module | None = None
        self.temper: nn.Module | None = None

    def forward(
        self, h: torch.Tensor, feats: torch.Tensor | None = None, temperature: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.tok_embeddings is not None:
            h = self.tok_embeddings(h) + self.pos_embeddings(torch.arange(h.shape[1]))
            if feats is not None and self.feat_proj is not None:
                h = h + self.feat_proj(feats)
        for layer in self.layers.values():
            h = layer(h)
        if self.norm is not None:
            h = self.output(self.norm(h))
            if temperature is not None and self.temper is not None:
                h = self.temper(h, temperature)
        return h


def stage_model(stage: int, n_stages: int, fault: str = "none") -> Transformer:
    torch.manual_seed(0)  # the same full model on every rank, before it is cut
    model = Transformer()
    per = LAYERS // n_stages
    for i in range(LAYERS):
        if not stage * per <= i < (stage + 1) * per:
            del model.layers[str(i)]
    if stage != 0:
        model.tok_embeddings = model.pos_embeddings = None
    if stage != n_stages - 1:
        model.norm = model.output = None
    if fault == "input" and stage == 0:
        model.feat_proj = nn.Linear(FEATS, DIM)
    if fault == "temper" and stage == n_stages - 1:
        model.temper = Temper()
    return model


def stage_inputs(fault: str, first: bool, last: bool, step: int, fault_step: int) -> dict[str, torch.Tensor]:
    """The keyword inputs of this rank's `schedule.step` (split into micro-batches like the batch):
    the first stage's features (`input`), the last stage's temperatures (`temper`); one sample of
    them spoilt at the fault step."""
    g = torch.Generator().manual_seed(1000 + step)
    out: dict[str, torch.Tensor] = {}
    if fault == "input" and first:
        feats = torch.randn(BATCH, SEQ, FEATS, generator=g)
        if step == fault_step:
            feats[BAD_SAMPLE, 3, 2] = float("nan")
        out["feats"] = feats
    if fault == "temper" and last:
        temperature = 1.0 + torch.rand(BATCH, 1, 1, generator=g)
        if step == fault_step:
            temperature[BAD_SAMPLE] = 0.0
        out["temperature"] = temperature
    return out


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))


def batch_at(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token rows and a learnable target (each position's label is its own token), the same
    on every rank."""
    g = torch.Generator().manual_seed(step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return tokens, tokens.clone()


_COLOR = {
    "red": "\033[31m",
    "green": "\033[32m",
    "orange": "\033[33m",
    "turquoise": "\033[36m",
    "blue": "\033[34m",
    "cyan": "\033[96m",
    "magenta": "\033[35m",
    "reset": "\033[39m",
}


class Console:
    """Prints what torchtitan or Megatron-LM print, in their formats."""

    def __init__(self, kind: str, rank: int, world: int) -> None:
        self.kind, self.rank, self.world = kind, rank, world
        self.log = logging.getLogger("root.console")
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        self.log.addHandler(handler)
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self.log.name = "root"

    def start(self) -> None:
        if self.kind == "titan":
            self.log.info(f"Building 1-D device mesh with ['pp'], [{self.world}]")
            self.log.info(
                f"PP rank {self.rank} is building stage_idx {self.rank} with start_layer "
                f"{None if self.rank == 0 else f'layers.{self.rank * LAYERS // self.world}'}, stop_layer "
                f"{None if self.rank == self.world - 1 else f'layers.{(self.rank + 1) * LAYERS // self.world}'}"
            )
        else:
            if self.rank == 0:
                print("------------------------ arguments ------------------------", flush=True)
                for name, value in (
                    ("clip_grad", 0.0),
                    ("log_interval", 1),
                    ("micro_batch_size", BATCH // MICRO),
                    ("pipeline_model_parallel_size", self.world),
                    ("tensor_model_parallel_size", 1),
                    ("train_iters", STEPS),
                ):
                    print(f"  {name} {'.' * (48 - len(name))} {value}", flush=True)
                print("-------------------- end of arguments ---------------------", flush=True)
            print(
                f" > number of parameters on (tensor, pipeline) model parallel rank (0, {self.rank}): 12345", flush=True
            )

    def step(self, step: int, loss: float | None, grad_norm: float) -> None:
        n = step + 1
        if self.kind == "titan":
            c = _COLOR
            shown = -1.0 if loss is None else loss  # torchtitan's placeholder on the other stages
            self.log.info(
                f"{c['red']}step: {n:2}  {c['green']}loss: {shown:7.4f}  "
                f"{c['orange']}grad_norm: {grad_norm:7.4f}  {c['turquoise']}memory:  0.00GiB(0.00%)  "
                f"{c['blue']}tps: {1234:,}  {c['cyan']}tflops: {0.01:,.2f}  {c['magenta']}mfu: {0.0:.2f}%{c['reset']}"
            )
        elif loss is not None:  # Megatron prints its iteration line on the last rank
            print(
                f" [2026-01-01 00:00:{n:02d}] iteration {n:8d}/{STEPS:8d} | consumed samples: {n * BATCH:12d} | "
                f"elapsed time per iteration (ms): 12.3 | learning rate: {3e-3:.6E} | global batch size: "
                f"{BATCH:5d} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {grad_norm:.3f} | "
                f"number of skipped iterations: {0:3d} | number of nan iterations: {int(not math.isfinite(loss)):3d} |",
                flush=True,
            )


def count_all_reduces() -> dict[str, int]:
    calls = {"all_reduce": 0}
    inner = dist.all_reduce

    def call(*args, **kwargs):
        calls["all_reduce"] += 1
        return inner(*args, **kwargs)

    dist.all_reduce = call
    return calls


def main() -> None:
    out, fault, fault_step = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    schedule_name = sys.argv[4] if len(sys.argv) > 4 else "gpipe"
    console_kind = sys.argv[5] if len(sys.argv) > 5 else "titan"
    watched = sys.argv[6] if len(sys.argv) > 6 else "stage"  # or `module`: watch(stage.submod, opt)
    replay = (sys.argv[7] if len(sys.argv) > 7 else "on") == "on"
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    import lossdoctor

    model = stage_model(rank, world, fault)
    stage = PipelineStage(model, rank, world, torch.device("cpu"))
    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule_name]
    schedule = kind(stage, n_microbatches=MICRO, loss_fn=loss_fn)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    state = {"step": -1, "poisoned": False}

    def poison_input(module: nn.Module, args: tuple) -> tuple | None:
        if fault == "batch" and rank == world - 1 and state["step"] == fault_step and not state["poisoned"]:
            state["poisoned"] = True  # one micro-batch of the step
            h = args[0].clone()
            h[1, 2, 3] = float("nan")
            return (h,)
        return None

    first = next(iter(model.layers.values()))
    first.register_forward_pre_hook(poison_input)
    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger("lossdoctor").addHandler(Keep())
    console = Console(console_kind, rank, world)
    console.start()
    calls = count_all_reduces()
    mon = (
        None
        if watched == "none"
        else lossdoctor.watch(
            stage if watched == "stage" else model,
            opt,
            log_dir=out / "ld",
            alerts=False,
            replay_fn=(lambda m, b: m(b["input_ids"]).float().square().mean()) if replay else None,
        )
    )
    ref, losses_seen = [], []
    group = stage.group
    for step in range(STEPS):
        state["step"] = step
        if fault == "weight" and rank == 0 and step == fault_step:
            with torch.no_grad():
                model.layers["1"].mlp.up.weight[5, 7] = float("nan")
        tokens, labels = batch_at(step)
        extra = stage_inputs(fault, stage.is_first, stage.is_last, step, fault_step)
        losses: list[torch.Tensor] = []
        if stage.is_first and stage.is_last:  # a 1-stage pipeline (one process)
            schedule.step(tokens, target=labels, losses=losses, **extra)
        elif stage.is_first:
            schedule.step(tokens, **extra)
        else:
            schedule.step(target=labels, losses=losses, **extra)
        # torchtitan's total norm over the stages: this stage's norm, squared, summed over the pp group
        local = nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        sq = (local.double() ** 2).reshape(1)
        _raw_all_reduce(sq, group)
        ref.append(math.sqrt(float(sq)))
        opt.step()
        opt.zero_grad()
        loss = torch.stack(losses).mean() if losses else None
        losses_seen.append(None if loss is None else float(loss.detach()))
        console.step(step, losses_seen[-1], ref[-1])
        if mon is not None:
            mon.step(loss, batch={"input_ids": tokens, **extra} if stage.is_first else {"labels": labels, **extra})
    if mon is not None:
        mon.close()
    (out / f"rank{rank}.json").write_text(
        json.dumps({"ref": ref, "warnings": warnings, "calls": calls, "losses": losses_seen})
    )
    dist.destroy_process_group()


_RAW_ALL_REDUCE = dist.all_reduce


def _raw_all_reduce(t: torch.Tensor, group) -> None:
    """The reference's own all-reduce, not counted among the monitor's."""
    _RAW_ALL_REDUCE(t, group=group)


if __name__ == "__main__":
    main()
