"""What a run's own configuration says about its optimizer, peak learning rate and task.

An LR of 3e-4 is ordinary for AdamW pre-training and 100x too small for SGD; 1e-3 is a usual
pre-training peak and high for fine-tuning a pretrained model. The scalars alone cannot say which,
the configuration next to them can: Lightning's `hparams.yaml` (next to `metrics.csv`),
LLaMA-Factory's `training_args.yaml` (next to `trainer_log.jsonl` / `trainer_state.json`), W&B's
config (the offline run file's config record, which the W&B reader keeps; or `files/config.yaml`
of a synced run, values stored as `{value: x}`), the Megatron arguments block (read by the console
reader) and MLflow params.

Files are parsed with PyYAML's SafeLoader (never a loader that builds objects), capped at 256 KiB,
100 aliases and 50,000 nodes (an alias bomb is refused in milliseconds), and
skipped with a note when unreadable; a missing PyYAML only skips them. What is found goes into
`run.meta` under the names the detectors read: `config_lr`, `optimizer` ({"class": name, "from":
where}) and `task_kind` ("pretrain" or "finetune"), never over what the reader itself found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..messages import Msg
from ..records import Run
from .registry import SourceError

#: the largest configuration file read beside a log (they are a few KiB)
MAX_BYTES = 256 << 10

_LR_KEYS = ("learning_rate", "lr", "max_lr", "peak_lr", "base_lr", "init_lr")
_OPT_KEYS = ("optim", "optimizer", "optimizer_name", "optimizer_type", "optimizer_class", "opt")
_FINETUNE_KEYS = (
    "finetuning_type",
    "lora_r",
    "lora_rank",
    "lora_target",
    "peft_config",
    "adapter_name_or_path",
    "pretrained_checkpoint",
)


def optimizer_family(name: Any) -> str | None:
    """'adam' (Adam, AdamW, fused/8-bit/paged variants, LAMB), 'sgd', 'lion', or None."""
    if not isinstance(name, str):
        return None
    n = name.lower()
    if "adafactor" in n:
        return None  # relative step sizes: its LR is not comparable
    if "adam" in n or "lamb" in n:
        return "adam"
    if "lion" in n:
        return "lion"
    if "sgd" in n or "momentum" in n or "nesterov" in n:
        return "sgd"
    return None


def flatten(cfg: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Keys of a config, one level of nesting joined with '.', W&B's `{value: x}` unwrapped."""
    out: dict[str, Any] = {}
    for k, v in list(cfg.items())[:2000]:
        if not isinstance(k, str):
            continue
        if isinstance(v, dict) and set(v) >= {"value"} and set(v) <= {"value", "desc"}:
            v = v["value"]
        if isinstance(v, dict) and depth < 1:
            for k2, v2 in flatten(v, depth + 1).items():
                out.setdefault(f"{k}.{k2}", v2)
                out.setdefault(k2, v2)  # hparams often nest the optimizer's own arguments
        else:
            out[k] = v
    return out


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v)  # YAML 1.1 reads "3e-4" (no dot) as a string
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) and 0 < v < 1e3 else None


def task_kind(cfg: dict[str, Any]) -> str | None:
    """'pretrain', 'finetune' or None, from the keys that say it."""
    stage = cfg.get("stage")
    if isinstance(stage, str):  # LLaMA-Factory: pt, sft, rm, ppo, dpo, kto
        return "pretrain" if stage.lower() == "pt" else "finetune"
    if cfg.get("finetune") is True or any(cfg.get(k) not in (None, "", False) for k in _FINETUNE_KEYS):
        return "finetune"
    return None


def config_meta(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """`config_lr`, `optimizer` and `task_kind` from one configuration mapping."""
    flat = flatten(cfg)
    meta: dict[str, Any] = {}
    lr = next((x for x in (_number(flat.get(k)) for k in _LR_KEYS) if x is not None), None)
    if lr is not None:
        meta["config_lr"] = lr
    for k in _OPT_KEYS:
        v = flat.get(k)
        if isinstance(v, dict):  # {class_path: torch.optim.AdamW, ...} (LightningCLI)
            v = v.get("class_path") or v.get("_target_") or v.get("name")
        if isinstance(v, str) and optimizer_family(v):
            meta["optimizer"] = {"class": v.rsplit(".", 1)[-1], "from": source}
            break
    kind = task_kind(flat)
    if kind:
        meta["task_kind"] = kind
    return meta


def _side_files(path: Path) -> list[Path]:
    """The configuration files next to a log: hparams.yaml / training_args.yaml in its folder or
    the folder above (a checkpoint-N/ inside the output dir), config.yaml only in a W&B run's
    files/ (elsewhere a file of that name may configure anything)."""
    d = path if path.is_dir() else path.parent
    places = [
        d / "hparams.yaml",
        d / "training_args.yaml",
        d / "files" / "config.yaml",
        d.parent / "hparams.yaml",
        d.parent / "training_args.yaml",
    ]
    out = []
    for f in places:
        try:
            if f.is_file() and f not in out:
                out.append(f)
        except OSError:
            continue
    return out


#: a YAML beside a log is refused past this many aliases (`*name`) or nodes: an alias bomb (a few
#: lines whose aliases multiply) or a megabyte of tiny nodes took 11-26 s in PyYAML's pure-Python
#: composer; the configs read here (hparams.yaml, training_args.yaml, W&B config.yaml) hold a few
#: hundred nodes and no aliases (measured: Lightning, LLaMA-Factory, W&B files in tests/)
MAX_YAML_ALIASES = 100
MAX_YAML_NODES = 50_000


class YamlTooBig(ValueError):
    """A YAML file over one of the caps: skipped with a note."""


def _capped_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader (plain data only, never an object built from a tag), counting the nodes
    and aliases it composes and stopping past the caps."""

    class CappedLoader(yaml.SafeLoader):
        nodes = 0
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise YamlTooBig(f"more than {MAX_YAML_ALIASES} aliases")
            self.nodes += 1
            if self.nodes > MAX_YAML_NODES:
                raise YamlTooBig(f"more than {MAX_YAML_NODES} nodes")
            return super().compose_node(parent, index)

    return CappedLoader


def read_yaml(f: Path, notes: list[str] | None = None) -> dict[str, Any] | None:
    """A YAML mapping read with a capped safe loader, or None (too large, over the alias or node
    cap (a note in `notes`), not a mapping, not YAML)."""
    try:
        import yaml
    except ImportError:
        return None
    from .files import open_regular

    try:
        with open_regular(f) as fh:
            if os.fstat(fh.fileno()).st_size > MAX_BYTES:
                raise YamlTooBig(f"more than {MAX_BYTES >> 10} KiB")
            data = yaml.load(fh.read(MAX_BYTES), Loader=_capped_loader(yaml))  # noqa: S506 - a SafeLoader
    except YamlTooBig as e:
        if notes is not None:
            notes.append(Msg("sources.settings_skipped", file=f.name, why=str(e)))
        return None
    except (OSError, ValueError, yaml.YAMLError, RecursionError, SourceError):
        return None
    return data if isinstance(data, dict) else None


#: the most plain settings (numbers, short strings) kept from a run's config files in
#: `meta["settings"]`, for comparing runs (an hparams.yaml holds tens; a generated one may hold more)
MAX_SETTINGS = 200


def side_meta(path: Path) -> tuple[dict[str, Any], list[str]]:
    """What the configuration files next to `path` say, and a note naming where it came from."""
    found: dict[str, Any] = {}
    used = []
    skipped: list[str] = []
    for f in _side_files(path):
        cfg = read_yaml(f, skipped)
        if cfg is None:
            continue
        meta = config_meta(cfg, f.name)
        for k, v in meta.items():
            found.setdefault(k, v)
        settings = found.setdefault("settings", {})
        for k, v in list(flatten(cfg).items())[:MAX_SETTINGS]:  # the runs compared name what differs
            if v is None or isinstance(v, (bool, int, float)) or isinstance(v, str) and len(v) <= 80:
                settings.setdefault(k, v)
        if meta:
            used.append(f.name)
    if not found.get("settings"):
        found.pop("settings", None)
    notes = [Msg("sources.settings_read", files=used)] if used else []
    return found, notes + skipped


def apply(run: Run, path: Path) -> None:
    """Fill the run's `config_lr`, `optimizer` and `task_kind` from its own configuration (what a
    reader already put in `meta` wins)."""
    cfg = run.meta.get("config")
    if isinstance(cfg, dict):  # W&B and MLflow readers keep the run's config
        for k, v in config_meta(cfg, "the run's config").items():
            run.meta.setdefault(k, v)
    found, notes = side_meta(path)
    for k, v in found.items():
        run.meta.setdefault(k, v)
    run.notes.extend(notes)
