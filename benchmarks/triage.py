"""Benchmark of incident triage: the snapshot ring's cost on the step time, and the incident flow.

1. Ring overhead at the default K (target <= 2%): three copies of the same GPT-2 (built from a
   config) train side by side in one process: plain, `watch` without replay_fn (no ring), and
   `watch(replay_fn=...)` (ring: batches, RNG and the clipping probe kept every step). Steps run
   interleaved (the order rotates every step); the ratio of median step times is the ring's
   per-step cost. The snapshot (every K steps) is timed directly and amortised over K; the sum is
   the ring's overhead.
2. Incident flow: NaN in one sample's input embeddings halfway between two snapshots; the flow's
   time split (replay, localisation = op tracing + bisection, batch-vs-state), the steps replayed,
   the peak memory it added (VmHWM after resetting it), and the ring's memory.
3. Op tracing: a traced forward+backward vs a plain one on the same batch (interleaved medians).

    python benchmarks/triage.py [--steps 300] [--rounds 5] [--layers 2] [--embd 64] [--vocab 10000]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def build(layers: int, embd: int, vocab: int, seq: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_layer=layers,
        n_embd=embd,
        n_head=max(1, embd // 32),
        vocab_size=vocab,
        n_positions=seq,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
    )
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


def make_batches(n: int, bs: int, seq: int, vocab: int, embd: int, wte: torch.Tensor):
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        ids = torch.randint(0, vocab, (bs, seq), generator=g)
        out.append({"inputs_embeds": wte[ids].detach().clone(), "labels": ids})
    return out


def loss_fn(model, batch):
    return model(**batch).loss


def train_step(model, opt, batch, mon=None):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if mon is not None:
        mon.step(loss, batch=batch)
    return loss


def vm(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def ring_overhead(args, base, batches, K: int) -> dict:
    """Per-step cost of the ring (batch copy, RNG state, clipping probe), measured step by step
    interleaved across the variants (robust to a machine whose load changes), plus the snapshot
    itself timed directly and amortised over K steps."""
    import lossdoctor

    tmp = Path(tempfile.mkdtemp(prefix="ld-bench-"))
    variants = {}
    for name in ("plain", "watch", "watch+ring"):
        m = copy.deepcopy(base)
        o = torch.optim.AdamW(m.parameters(), lr=1e-4)
        mon = None
        if name != "plain":
            mon = lossdoctor.watch(
                m,
                o,
                log_dir=tmp / name,
                alerts=False,
                snapshot_every=K,
                replay_fn=loss_fn if name == "watch+ring" else None,
            )
        variants[name] = (m, o, mon)
    for m, o, mon in variants.values():  # warm-up: optimizer state, caches
        for b in batches[:3]:
            train_step(m, o, b, mon)
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for i in range(args.steps):
        for name in names[i % 3 :] + names[: i % 3]:  # rotate the order every step
            m, o, mon = variants[name]
            t0 = time.perf_counter()
            train_step(m, o, batches[i % len(batches)], mon)
            times[name].append(time.perf_counter() - t0)
    ring = variants["watch+ring"][2].triage.ring
    held = {
        "snapshots": ring.snapshot_bytes(),
        "batches": ring.batch_bytes(),
        "snapshots_held": len(ring.snapshots),
        "batches_held": sum(1 for e in ring.entries.values() if e.kept),
    }
    snap_times = []
    for r in range(7):
        t0 = time.perf_counter()
        ring.snapshot(10**6 + r)
        snap_times.append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    per_step = med["watch+ring"] / med["watch"] - 1
    amortised = statistics.median(snap_times) / K / med["watch"]
    res = {
        "K": K,
        "steps_per_variant": args.steps,
        "median_step_s": {k: round(v, 5) for k, v in med.items()},
        "per_step_cost": round(per_step, 4),
        "snapshot_s": round(statistics.median(snap_times), 5),
        "snapshot_amortised": round(amortised, 4),
        "ring_total_overhead": round(per_step + amortised, 4),
        "watch_vs_plain": round(med["watch"] / med["plain"], 3),
        "ring_bytes": held,
    }
    for _, _, mon in variants.values():
        if mon is not None:
            mon.close()
    return res


def incident_flow(args, base, batches, K: int) -> dict:
    import lossdoctor

    tmp = Path(tempfile.mkdtemp(prefix="ld-bench-"))
    m = copy.deepcopy(base)
    o = torch.optim.AdamW(m.parameters(), lr=1e-4)
    mon = lossdoctor.watch(m, o, log_dir=tmp, alerts=False, snapshot_every=K, replay_fn=loss_fn)
    fault = K + K // 2  # halfway between the snapshots of steps K and 2K: K/2 steps to replay
    for i in range(fault):
        train_step(m, o, batches[i % len(batches)], mon)
    bad = copy.deepcopy(batches[fault % len(batches)])
    bad["inputs_embeds"][3, 5, 7] = float("nan")
    rss0 = vm("VmRSS")
    have_peak = reset_peak()
    t0 = time.perf_counter()
    train_step(m, o, bad, mon)  # mon.step runs the incident flow
    total = time.perf_counter() - t0
    peak = vm("VmHWM")
    rec = json.loads(next((tmp / "incidents").glob("*.json")).read_text())
    f = rec["findings"][0]
    loc = rec.get("localization", {})
    out = {
        "fault_step": fault,
        "steps_replayed": rec["replay"]["steps_replayed"],
        "reproducible": rec["reproducible"],
        "verdict": rec["batch_vs_state"]["verdict"],
        "finding": {k: f[k] for k in ("cause", "layer", "op", "samples")},
        "step_with_flow_s": round(total, 3),
        "flow_s": rec["seconds"],
        "timing_s": rec["timing"],
        "trace_s": loc.get("trace", {}).get("seconds"),
        "ops_traced": loc.get("trace", {}).get("ops"),
        "bisection_probes": (loc.get("sample_search") or {}).get("probes"),
        "peak_rss_added_mb": round((peak - rss0) / 2**20, 1) if have_peak and peak and rss0 else None,
    }
    mon.close()
    return out


def tracing_cost(args, base, batches) -> dict:
    from lossdoctor.triage.localize import trace_once

    m = copy.deepcopy(base)
    b = batches[0]
    plain, traced = [], []
    for r in range(args.rounds * 2):
        for kind in ("plain", "traced") if r % 2 == 0 else ("traced", "plain"):
            m.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            if kind == "plain":
                loss_fn(m, b).backward()
            else:
                trace_once(m, b, loss_fn)
            (plain if kind == "plain" else traced).append(time.perf_counter() - t0)
    return {
        "plain_fwd_bwd_s": round(statistics.median(plain), 4),
        "traced_fwd_bwd_s": round(statistics.median(traced), 4),
        "ratio": statistics.median(traced) / statistics.median(plain),
    }


def main() -> None:
    from lossdoctor.triage.incident import Triage  # noqa: F401  (import cost outside the timings)

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5, help="tracing: interleaved repetitions")
    ap.add_argument("--steps", type=int, default=300, help="ring: steps per variant, interleaved")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--K", type=int, default=50, help="snapshot_every (the monitor's default is 50)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    base = build(args.layers, args.embd, args.vocab, args.seq)
    n_params = sum(p.numel() for p in base.parameters())
    batches = make_batches(64, args.bs, args.seq, args.vocab, args.embd, base.transformer.wte.weight)
    print(f"GPT-2 {n_params / 1e6:.2f}M params, batch {args.bs}x{args.seq}, torch {torch.__version__}, 1 thread")
    print("tracing:", json.dumps(tracing_cost(args, base, batches)))
    print("ring:", json.dumps(ring_overhead(args, base, batches, args.K)))
    print("incident:", json.dumps(incident_flow(args, base, batches, args.K)))


if __name__ == "__main__":
    main()
