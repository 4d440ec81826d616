"""Findings where people already look: the user's `on_finding` callback, and the run's own
TensorBoard, Weights & Biases and MLflow.

`lossdoctor.watch(..., on_finding=fn, sinks=True, tensorboard=writer)` (and the framework callbacks'
constructors, which pass their keywords on) attach one `FindingSinks` to the monitor. The monitor
tells it of each live alert (`alert(finding, step)`: the findings it announces on stderr, once per
incident) and, at close, of the final diagnosis (`final(report, step)`: every finding of the live
engine's last evaluation, info included).

- `on_finding(finding, step)` is called for each of them (`step`: the last step recorded when it
  was reported); a function with a `final` parameter is called `fn(finding, step, final=False)`
  for a live alert and `final=True` for a final finding. An exception in it is one note in the run's notes and the log, never raised into
  training; it keeps being called.
- TensorBoard, through the user's own `SummaryWriter` (`tensorboard=writer`, the HF
  `TensorBoardCallback`'s writer, a Lightning `TensorBoardLogger`'s): text under `lossdoctor/alerts`
  and `lossdoctor/findings`, scalars `lossdoctor/severity/<cause>` (0 info, 1 warning, 2 critical),
  `lossdoctor/status` (the same, 0 healthy, -1 inconclusive) and `lossdoctor/first_bad_step`.
- W&B, the active `wandb.run` (or the one active when watching started, or a Lightning
  `WandbLogger`'s): `wandb.alert` for each live alert (recorded in offline mode too, sent when the
  run syncs) and `run.summary["lossdoctor/..."]`.
- MLflow, the active run (or the one active when watching started, or a Lightning `MLFlowLogger`'s):
  tags `lossdoctor.status`, `lossdoctor.cause`, `lossdoctor.step`, `lossdoctor.severity`,
  `lossdoctor.causes`, `lossdoctor.findings`, and `lossdoctor.alert` / `lossdoctor.alert_step`.

wandb, mlflow and tensorboard are never imported here: a library is used only when the user's
process already imported it (`sys.modules`), and a writer only when the run already has one.
`sinks=False` turns the writing off (`on_finding` is still called). Whatever fails in a sink is one
note per sink; training goes on untouched.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from ..findings import Finding, Report
from ..live.diagnoser import alert_language, alert_line
from ..messages import Msg, safe_text

log = logging.getLogger("lossdoctor")

#: the scalar a severity (or the run's status) is charted as; inconclusive (too short to judge) below healthy
SEVERITY_LEVEL = {"info": 0, "warning": 1, "critical": 2, "healthy": 0, "inconclusive": -1}
#: MLflow's limit on a tag value (file and SQL stores)
MLFLOW_TAG_MAX = 5000


def _module(name: str) -> Any:
    """The library when the user's process already imported it, else None (never imported here)."""
    return sys.modules.get(name)


class FindingSinks:
    """The monitor's listener (see the module docstring); `mon.sinks` holds it."""

    def __init__(
        self,
        mon: Any,
        on_finding: Callable[..., Any] | None = None,  # (f, step[, final=])
        enabled: bool = True,
        tensorboard: Any = None,
    ) -> None:
        self.mon = mon
        self.on_finding = on_finding
        #: whether on_finding takes `final=` (False: a live alert, True: a final finding at close)
        self._says_final = _takes_final(on_finding)
        self.enabled = enabled
        #: [resolver, last writer it gave]: a writer can be dropped by its owner at train end
        self._tb: list[list[Any]] = []
        self._wandb: list[Any] = []
        self._mlflow: list[tuple[Any, str]] = []  # (client or None: the user's tracking URI, run id)
        self._failed: set[str] = set()
        self._alerted: set[str] = set()
        if tensorboard is not None:
            self.add_tensorboard(tensorboard)
        if enabled:
            self._remember_active_runs()

    # --- targets ----------------------------------------------------------------------------------
    def add_tensorboard(self, writer: Any) -> None:
        """A `SummaryWriter`, or a function returning the current one (None: none yet / any more)."""
        fn = writer if callable(writer) and not hasattr(writer, "add_text") else (lambda: writer)
        try:
            now = fn()  # kept: its owner may drop it before the final findings (HF at train end)
        except Exception as e:
            now = None
            self._fail("tensorboard", e)
        self._tb.append([fn, now])

    def add_wandb(self, run: Any) -> None:
        if run is not None and all(r is not run for r in self._wandb):
            self._wandb.append(run)

    def add_mlflow(self, client: Any, run_id: Any) -> None:
        if isinstance(run_id, str) and run_id and all(r != run_id for _, r in self._mlflow):
            self._mlflow.append((client, run_id))

    def _remember_active_runs(self) -> None:
        """The W&B / MLflow runs active now: written to even after their owner ended them (the HF
        callbacks end theirs before lossdoctor's final findings)."""
        try:
            wandb = _module("wandb")
            if wandb is not None:
                self.add_wandb(getattr(wandb, "run", None))
            mlflow = _module("mlflow")
            if mlflow is not None:
                active = mlflow.active_run()
                if active is not None:
                    self.add_mlflow(None, active.info.run_id)
        except Exception as e:
            self._fail("runs", e)

    # --- what the monitor calls -------------------------------------------------------------------
    def alert(self, f: Finding, step: int) -> None:
        """A live alert (the finding the monitor just announced)."""
        self._call(f, step, final=False)
        if not self.enabled:
            return
        self._alerted.add(f.cause)
        line = safe_text(alert_line(f, alert_language()), newlines=False)
        level = SEVERITY_LEVEL.get(f.severity, 0)
        at = f.step if f.step is not None else step
        self._each_writer(
            lambda w: (
                w.add_text("lossdoctor/alerts", line, global_step=step),
                w.add_scalar(f"lossdoctor/severity/{f.cause}", level, global_step=at),
            )
        )
        self._each_wandb(lambda run, wandb: _wandb_alert(run, wandb, f, line, step))
        self._each_mlflow(
            {"lossdoctor.alert": line, "lossdoctor.alert_step": str(step), "lossdoctor.alert_cause": f.cause}
        )

    def final(self, report: Report, step: int) -> None:
        """The final diagnosis, at close."""
        for f in report.findings:
            self._call(f, step, final=True)
        if not self.enabled:
            return
        lang = alert_language()
        lines = [safe_text(alert_line(f, lang), newlines=False) for f in report.findings]
        status = report.status
        bad = [f.step for f in report.findings if f.severity != "info" and f.step is not None]
        first_bad = min(bad) if bad else None

        def tb(w: Any) -> None:
            w.add_text("lossdoctor/findings", "\n\n".join(lines) or status, global_step=step)
            for f in report.findings:
                w.add_scalar(f"lossdoctor/severity/{f.cause}", SEVERITY_LEVEL.get(f.severity, 0), global_step=step)
            w.add_scalar("lossdoctor/status", SEVERITY_LEVEL.get(status, 0), global_step=step)
            if first_bad is not None:
                w.add_scalar("lossdoctor/first_bad_step", first_bad, global_step=step)

        self._each_writer(tb)
        primary = report.primary
        summary = {
            "lossdoctor/status": status,
            "lossdoctor/steps": report.steps,
            "lossdoctor/findings": [_brief(f) for f in report.findings],
        }
        if primary is not None:
            summary.update(
                {
                    "lossdoctor/cause": primary.cause,
                    "lossdoctor/symptom": primary.symptom,
                    "lossdoctor/severity": primary.severity,
                    "lossdoctor/step": primary.step,
                    "lossdoctor/layer": primary.layer,
                    "lossdoctor/summary": lines[0],
                }
            )
        if first_bad is not None:
            summary["lossdoctor/first_bad_step"] = first_bad
        self._each_wandb(lambda run, wandb: _wandb_final(run, wandb, summary, primary, lines, self._alerted))
        tags = {
            "lossdoctor.status": status,
            "lossdoctor.causes": ",".join(f.cause for f in report.findings),
            "lossdoctor.findings": "\n".join(lines),
        }
        if primary is not None:
            tags.update(
                {
                    "lossdoctor.cause": primary.cause,
                    "lossdoctor.severity": primary.severity,
                    "lossdoctor.step": "" if primary.step is None else str(primary.step),
                }
            )
        self._each_mlflow(tags)

    # --- internals --------------------------------------------------------------------------------
    def _call(self, f: Finding, step: int, final: bool) -> None:
        if self.on_finding is None:
            return
        try:
            if self._says_final:
                self.on_finding(f, step, final=final)
            else:
                self.on_finding(f, step)
        except Exception as e:  # the user's function: never raised into training
            self._fail("on_finding", e)

    def _fail(self, part: str, e: BaseException) -> None:
        """One note per part: in the log and in the run's notes (meta.json, the report's notes)."""
        if part in self._failed:
            return
        self._failed.add(part)
        note = Msg("integrations.sink_failed", part=part, error=f"{type(e).__name__}: {e}")
        log.warning("%s", note)
        notes = getattr(self.mon, "notes", None)
        if isinstance(notes, list):
            notes.append(note)

    def _each_writer(self, write: Callable[[Any], Any]) -> None:
        done: list[Any] = []  # one writer found two ways (given and the trainer's) is written once
        for slot in self._tb:
            try:
                w = slot[0]() or slot[1]
                if w is None or any(w is d for d in done):
                    continue
                slot[1] = w
                done.append(w)
                closed = getattr(w, "all_writers", False) is None  # torch's writer, closed by its owner
                write(w)
                w.flush()
                if closed:  # writing reopened it: close it again, as its owner left it
                    w.close()
            except Exception as e:
                self._fail("tensorboard", e)

    def _each_wandb(self, write: Callable[[Any, Any], Any]) -> None:
        wandb = _module("wandb")
        if wandb is None:
            return
        runs = list(self._wandb)
        current = getattr(wandb, "run", None)
        if current is not None and all(r is not current for r in runs):
            runs.append(current)
        for run in runs:
            try:
                write(run, wandb)
            except Exception as e:
                self._fail("wandb", e)

    def _each_mlflow(self, tags: dict[str, str]) -> None:
        mlflow = _module("mlflow")
        if mlflow is None:
            return
        targets = list(self._mlflow)
        try:
            active = mlflow.active_run()
            if active is not None and all(r != active.info.run_id for _, r in targets):
                targets.append((None, active.info.run_id))
        except Exception as e:
            self._fail("mlflow", e)
        clean = {k: str(v)[:MLFLOW_TAG_MAX] for k, v in tags.items()}
        for client, run_id in targets:
            try:
                client = client if client is not None else mlflow.tracking.MlflowClient()
                for k, v in clean.items():
                    client.set_tag(run_id, k, v)
            except Exception as e:
                self._fail("mlflow", e)


def _takes_final(fn: Any) -> bool:
    """`fn(finding, step, final=...)` is possible: a parameter named `final`, or `**kwargs`."""
    if fn is None:
        return False
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the plain call
        return False
    return any((p.name == "final" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD for p in params)


def _brief(f: Finding) -> dict[str, Any]:
    return {
        "cause": f.cause,
        "symptom": f.symptom,
        "severity": f.severity,
        "step": f.step,
        "layer": f.layer,
        "confidence": f.confidence,
    }


def _wandb_alert(run: Any, wandb: Any, f: Finding, line: str, step: int) -> None:
    run.summary["lossdoctor/alert"] = line
    run.summary["lossdoctor/alert_step"] = step
    run.summary["lossdoctor/alert_cause"] = f.cause
    _send_alert(run, wandb, f, line)


def _send_alert(run: Any, wandb: Any, f: Finding, line: str) -> None:
    levels = getattr(wandb, "AlertLevel", None)
    level = None
    if levels is not None:
        level = getattr(levels, "ERROR" if f.severity == "critical" else "WARN", None)
    alert = getattr(run, "alert", None)
    if callable(alert):
        alert(title=f"lossdoctor: {f.cause} ({f.severity})", text=line, level=level)


def _wandb_final(
    run: Any, wandb: Any, summary: dict[str, Any], primary: Finding | None, lines: list[str], alerted: set[str]
) -> None:
    for k, v in summary.items():
        run.summary[k] = v
    if primary is not None and primary.severity != "info" and primary.cause not in alerted:
        _send_alert(run, wandb, primary, lines[0])


def check_sink_options(on_finding: Any = None, sinks: Any = True, tensorboard: Any = None) -> None:
    """Refuse a bad value with one clear message, before anything is installed."""
    if on_finding is not None and not callable(on_finding):
        raise ValueError(f"on_finding must be a function (finding, step), not {type(on_finding).__name__}")
    if not isinstance(sinks, bool):
        raise ValueError(f"sinks must be True or False, not {sinks!r}")
    if tensorboard is not None and not callable(getattr(tensorboard, "add_text", None)):
        raise ValueError(f"tensorboard must be a SummaryWriter (with add_text), not {type(tensorboard).__name__}")


def attach_sinks(mon: Any, on_finding: Any = None, sinks: bool = True, tensorboard: Any = None) -> None:
    """Give `mon` its `FindingSinks` (the options already checked by `check_sink_options`)."""
    if on_finding is None and not sinks:
        return
    mon.sinks.append(FindingSinks(mon, on_finding, enabled=sinks, tensorboard=tensorboard))


def sinks_of(mon: Any) -> FindingSinks | None:
    """The monitor's `FindingSinks` (None with `sinks=False` and no `on_finding`)."""
    return next((s for s in getattr(mon, "sinks", []) if isinstance(s, FindingSinks)), None)


def add_hf_targets(mon: Any, trainer: Any) -> None:
    """The HF Trainer's own reporters (`report_to`): its `TensorBoardCallback`'s writer (looked up
    at each write: the callback makes it at train begin and drops it at train end). Its W&B and
    MLflow callbacks start their runs before lossdoctor's callback starts, so those are active."""
    sinks = sinks_of(mon)
    if sinks is None or not sinks.enabled or trainer is None:
        return
    try:
        handler = getattr(trainer, "callback_handler", None)
        for cb in getattr(handler, "callbacks", None) or []:
            if type(cb).__name__ == "TensorBoardCallback":
                sinks.add_tensorboard(lambda cb=cb: getattr(cb, "tb_writer", None))
    except Exception as e:  # the run is watched without them
        sinks._fail("trainer loggers", e)


def add_lightning_targets(mon: Any, trainer: Any) -> None:
    """A Lightning trainer's loggers: `TensorBoardLogger` (its `SummaryWriter`), `WandbLogger` (its
    run), `MLFlowLogger` (its client and run id). Known by class name: nothing imported."""
    sinks = sinks_of(mon)
    if sinks is None or not sinks.enabled:
        return
    try:
        for lg in getattr(trainer, "loggers", None) or []:
            kind = type(lg).__name__
            if kind == "TensorBoardLogger":
                sinks.add_tensorboard(lambda lg=lg: lg.experiment)
            elif kind == "WandbLogger":
                sinks.add_wandb(lg.experiment)
            elif kind == "MLFlowLogger":
                sinks.add_mlflow(lg.experiment, lg.run_id)
    except Exception as e:  # the run is watched without them
        sinks._fail("trainer loggers", e)
