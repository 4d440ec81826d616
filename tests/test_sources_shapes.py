"""Print shapes many trainers share, each written here the way such a script writes it, read by the
text readers (`sources/`): a value printed as a one-item list, ..."""

from __future__ import annotations

import math

import torch

from lossdoctor.sources import load_path


def _read(tmp_path, text: str, name: str = "train.log"):
    p = tmp_path / name
    p.write_text(text)
    runs = load_path(p)
    assert len(runs) == 1
    return runs[0]


def _at(run, col: str) -> dict[int, float]:
    return {int(s): float(v) for s, v, ok in zip(run.steps, run.col(col), run.logged(col)) if ok}


def test_an_lr_printed_as_the_schedulers_list_is_read(tmp_path):
    """`lr: {scheduler.get_last_lr()}` prints a list, one value per parameter group: the first is read."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lines, want = [], {}
    for it in range(100, 900, 100):
        loss = model(torch.ones(1, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        lr = sched.get_last_lr()
        want[it] = lr[0]
        lines.append(f"Epoch: 1/30, Iter: {it}/8007, loss: {loss.item():.4f}, lr: {lr}, time_avg: 0.52")
    run = _read(tmp_path, "\n".join(lines) + "\n")
    got = _at(run, "lr")
    assert sorted(got) == sorted(want)
    assert all(math.isclose(got[s], want[s], rel_tol=1e-9) for s in want)
    assert set(_at(run, "loss")) == set(want)


def _logged(lines_of) -> str:
    """Lines as Python's `logging` writes them with the common `%(asctime)s - %(levelname)s - %(message)s`."""
    import io
    import logging

    buf = io.StringIO()
    log = logging.getLogger(f"shapes{id(buf)}")
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    lines_of(log)
    return buf.getvalue()


def test_a_checkpoint_message_of_a_change_is_no_row_of_the_series_it_names(tmp_path):
    """`Val loss decrease from A to B, saving to ...` between epoch lines repeats a best value: the epoch
    lines' training metric stays the series read, and A, B are no loss points."""
    train = [1.964, 1.9654, 1.9693, 1.9701, 1.9712]
    val = [2.7854, 2.7894, 2.7856, 2.7837, 2.7901]

    def lines(log):
        best = 2.7869
        for k, (t, v) in enumerate(zip(train, val), start=22):
            log.info("Epoch [%d/100] (%d) train_mae: %.4f, val_mae: %.4f lr:%.6f %.1fs", k, k * 375, t, v, 1e-3, 362.1)
            if v < best:
                log.info("Val loss decrease from %.4f to %.4f, saving to models/epoch%d.pt", best, v, k)
                best = v

    run = _read(tmp_path, _logged(lines))
    assert list(_at(run, "loss").values()) == train
    assert list(_at(run, "eval_loss").values()) == val


def test_a_bar_whose_only_loss_is_its_running_average_is_read_at_its_last_refresh(tmp_path):
    """kohya's sd-scripts and musubi-tuner print only `avr_loss=` on their bar, set after `update(1)`:
    each step's bar is drawn twice, first with the average before the step; the last drawing is the step's."""
    import io

    from tqdm import tqdm

    buf = io.StringIO()
    averages, total = [], 0.0
    bar = tqdm(total=12, desc="steps", file=buf, mininterval=0, ascii=False, dynamic_ncols=False, ncols=100)
    for step in range(1, 13):
        total += 0.08 + 0.01 * ((step * 7) % 5)
        bar.update(1)
        averages.append(round(total / step, 4))
        bar.set_postfix(avr_loss=averages[-1])
    bar.close()
    text = buf.getvalue().replace("\r", "\n")
    run = _read(tmp_path, text)
    got = _at(run, "loss")
    assert sorted(got) == list(range(1, 13))
    assert [got[s] for s in range(1, 13)] == [float(tqdm.format_num(a)) for a in averages]  # as the bar prints it


def _faster_rcnn_log(iters: int, nan_from: int) -> tuple[str, list[dict[str, float]]]:
    """jwyang's faster-rcnn.pytorch trainval_net.py prints, every `disp_interval` iterations:
    `print("[session %d][epoch %2d][iter %4d/%4d] loss: %.4f, lr: %.2e" % ...)`, then
    `print("\\t\\t\\tfg/bg=(%d/%d), time cost: %f" % ...)` and
    `print("\\t\\t\\trpn_cls: %.4f, rpn_box: %.4f, rcnn_cls: %.4f, rcnn_box %.4f" % ...)`."""
    lines, terms = ["Loading pretrained weights from data/pretrained_model/resnet101_caffe.pth"], []
    for k, it in enumerate(range(0, iters, 100)):
        t = {
            "rpn_cls": 0.7 / (1 + k),
            "rpn_box": 0.3 + 0.01 * (k % 3),
            "rcnn_cls": 1.2 / (1 + 0.5 * k),
            "rcnn_box": 0.05,
        }
        t = {n: round(v, 4) for n, v in t.items()}
        if it >= nan_from:
            t["rpn_box"] = math.nan
        terms.append(t)
        loss = sum(t.values())
        lines.append("[session 1][epoch %2d][iter %4d/%4d] loss: %.4f, lr: %.2e" % (1, it, iters, loss, 1e-3))
        lines.append("\t\t\tfg/bg=(%d/%d), time cost: %f" % (13 + k % 7, 115 - k % 7, 40.3 + k))
        lines.append("\t\t\trpn_cls: %.4f, rpn_box: %.4f, rcnn_cls: %.4f, rcnn_box %.4f" % tuple(t.values()))
    return "\n".join(lines) + "\n", terms


def test_per_term_lines_indented_under_a_step_line_are_that_steps_loss_terms(tmp_path):
    """The indented per-term line belongs to the step line above it; the NaN-term differential then
    sees which term went NaN while the others stayed finite."""
    from lossdoctor.detectors.engine import diagnose_runs
    from msgs import has

    text, terms = _faster_rcnn_log(3000, nan_from=1500)
    run = _read(tmp_path, text)
    comps = run.events["loss_components"]
    assert sorted(comps) == list(range(0, 3000, 100))
    for k, step in enumerate(sorted(comps)):
        for name, v in terms[k].items():
            assert comps[step][name] == v or (math.isnan(v) and math.isnan(comps[step][name]))
    report = diagnose_runs([run])
    assert has(report.findings[0].evidence, "diff.ev.one_term", bad=["rpn_box"], n=3)


def test_an_indented_line_of_numbers_that_never_sums_to_the_loss_is_no_term_line(tmp_path):
    """`fg/bg=(13/115), time cost: 40.3` under the step line is read as nothing; so is a line of named
    numbers whose sum is never the step's loss."""
    text = "".join(
        f"[iter {it:4d}] loss: {2.0 - it / 1000:.4f}, lr: 1.00e-03\n\t\t\tcount: {it}, tokens: {it * 7}\n"
        for it in range(0, 1000, 100)
    )
    run = _read(tmp_path, text)
    assert "loss_components" not in run.events or not run.events["loss_components"]
    assert len(_at(run, "loss")) == 10


def _rsl_rl_block(it: int, total: int, losses: dict[str, float], reward: float) -> str:
    """RSL-RL 2.x's `OnPolicyRunner.log`: a centred header, then `f"{f'Mean {key} loss:':>{pad}} {value:.4f}\\n"`
    for each of its losses (`value_function`, `surrogate`, `entropy`), then the episode statistics."""
    width, pad = 80, 35
    s = "#" * width + "\n" + f" \033[1m Learning iteration {it}/{total} \033[0m ".center(width, " ") + "\n\n"
    s += f"{'Computation:':>{pad}} 57897 steps/s (collection: 1.551s, learning 0.147s)\n"
    s += f"{'Mean action noise std:':>{pad}} 0.53\n"
    for key, value in losses.items():
        s += f"{f'Mean {key} loss:':>{pad}} {value:.4f}\n"
    s += f"{'Mean reward:':>{pad}} {reward:.2f}\n{'Mean episode length:':>{pad}} 976.62\n"
    return s + "-" * width + "\n"


def test_a_part_printed_as_mean_x_loss_keeps_the_parts_own_name(tmp_path):
    """`Mean value_function loss` (RSL-RL 2.x) is the part 1.x printed as `Value function loss`: one key,
    `value_function_loss`, so the same part is followed whichever version printed it."""
    text = ""
    for it in range(100, 106):
        value = math.inf if it >= 104 else 0.5 / (it - 99)
        text += _rsl_rl_block(it, 1500, {"value_function": value, "surrogate": -0.01, "entropy": 21.97}, 16.13)
    run = _read(tmp_path, text)
    comps = run.events["loss_components"]
    assert sorted(comps) == list(range(100, 106))
    assert [comps[s]["value_function_loss"] for s in range(100, 106)] == [round(0.5 / k, 4) for k in range(1, 5)] + [
        math.inf,
        math.inf,
    ]
    assert all(set(c) == {"value_function_loss", "surrogate_loss", "entropy_loss"} for c in comps.values())


def test_a_loss_written_l_and_its_sets_short_name_is_that_sets_loss(tmp_path):
    """DeepMind graph_nets' demos print `"# {:05d}, T {:.1f}, Ltr {:.4f}, Lge {:.4f}, Ctr {:.4f}, Str {:.4f},
    Cge {:.4f}, Sge {:.4f}"`: `Ltr` is the training loss, `Lge` the generalisation (held-out) loss."""
    fmt = "# {:05d}, T {:.1f}, Ltr {:.4f}, Lge {:.4f}, Ctr {:.4f}, Str {:.4f}, Cge {:.4f}, Sge {:.4f}"
    train = [round(1.2 / (1 + k), 4) for k in range(8)]
    held = [round(1.4 / (1 + k), 4) for k in range(8)]
    text = "".join(
        fmt.format(it, 20.0 * k, train[k], held[k], 0.5 + 0.01 * k, 0.0, 0.52, 0.0) + "\n"
        for k, it in enumerate(range(1000, 9000, 1000))
    )
    run = _read(tmp_path, text)
    assert _at(run, "loss") == dict(zip(range(1000, 9000, 1000), train))
    assert list(_at(run, "eval_loss").values()) == held


def test_a_name_glued_to_its_value_by_an_underscore_keeps_the_values_sign(tmp_path):
    """`print("step_{}:\\tloss_{:.9f}".format(it, loss))` (a flow model's negative log-likelihood): the step is
    the printed one and a negative loss keeps its sign; `model_epoch_10.pth` names no epoch."""
    losses = [-4.065555573, -4.490265846, -4.454271317, 4191.68359375, -2.408614397, -2.908127546]
    text = "saving model_epoch_10.pth\n" + "".join(
        f"step_{78540 + 20 * k}:\tloss_{v:.9f}\n" for k, v in enumerate(losses)
    )
    run = _read(tmp_path, text)
    assert _at(run, "loss") == {78540 + 20 * k: v for k, v in enumerate(losses)}


def test_term_lines_under_plain_step_lines_are_read_on_every_step_of_a_long_log(tmp_path):
    """A step line with no brackets is a shape the console reader learns and reads in bulk; once its term
    line has summed to its loss, every later step line waits for its own term line."""
    lines, want = [], {}
    for it in range(0, 5000, 10):
        ce, aux = round(2.5 - it / 4000, 4), round(0.1 + (it % 30) / 1000, 4)
        if it >= 4000:
            aux = math.nan
        want[it] = (ce, aux)
        lines.append(f"iter {it}: loss {ce + aux:.4f}, time 12.31ms")
        lines.append(f"    ce: {ce:.4f}, aux: {aux:.4f}")
    run = _read(tmp_path, "\n".join(lines) + "\n")
    comps = run.events["loss_components"]
    assert sorted(comps) == sorted(want)
    assert all(comps[s]["ce"] == ce for s, (ce, _) in want.items())
    assert all(math.isnan(comps[s]["aux"]) == (s >= 4000) for s in want)


def test_a_single_pasted_line_takes_its_step_from_the_whole_number_opening_it(tmp_path):
    """One line pasted from such a print (`# 22253, T 14594.9, Ltr nan, Lge nan`): the whole number that
    opens it, the only number no word names, is its step; with more rows it must count up as well."""
    fmt = "> {:05d}, T {:.1f}, Ltr {:.4f}, Lge {:.4f},\n> Ctr {:.4f}, Str {:.4f}, Cge {:.4f}, Sge {:.4f}\n"
    run = _read(tmp_path, fmt.format(22253, 14594.9, math.nan, math.nan, 0.5287, 0.0, 0.5397, 0.0), "paste.md")
    assert list(_at(run, "loss")) == [22253] and math.isnan(_at(run, "loss")[22253])


def test_a_value_dated_by_its_counter_takes_the_subject_before_the_counter(tmp_path):
    """`Cost after iteration 100: 0.58` (the deep-learning course's gradient-descent loop),
    `Training loss for epoch 3 = 0.41`: only a separator stands between the counter and the value,
    whose name is the subject in front of the counter."""
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = (x > 0).float()
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = {}
    for it in range(0, 1000, 100):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses[it] = round(loss.item(), 6)
    for shape in ("Cost after iteration {i}: {v:f}", "Training loss for epoch {i} = {v:f}"):
        run = _read(tmp_path, "".join(shape.format(i=i, v=v) + "\n" for i, v in losses.items()))
        assert _at(run, "loss") == losses, shape
    run = _read(tmp_path, "".join(f"epoch {i}: {v:f}\n" for i, v in losses.items()))
    # no word names the value: it is taken for the loss as a bare counter's first value is, said as a guess
    assert _at(run, "loss") == losses and "text.loss_guessed" in [getattr(n, "key", None) for n in run.notes]
