"""Symptoms judged against the log's own noise, at any length (the Cockpit idea again: compute the
observations once; the cause tables of `differential` read them).

A symptom is what the log shows, before any cause is named: the loss jumped far above the points
before it, it rose and stayed up, it sits at a chance level or at exactly zero, a value no loss of
its kind can take, the gradient norm jumped, the fp16 loss scale collapsed, steps were skipped, the
LR is 0. Each point is compared with robust statistics (median, MAD, in log space for the loss) of
the points before it, so a noisy healthy curve is judged by its own noise, and three points suffice
when the jump is large. Every threshold is a named field of `LIMITS` with its reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import Run
from .base import finest_print, print_resolution
from .learning_rate import zero_lr_explained
from .quantities import NOISE_DIFFS, Quantities, diff_noise, log_diff_noise
from .scalars import BAR_CADENCE, COMMON_K, bar_redraw, saturated_cost


@dataclass(frozen=True)
class SymptomLimits:
    #: robust sigmas (log space) a point must clear over the points before it: the long-log spike
    #: rule's threshold (loss_shape.is_spike, measured on the zoo's healthy controls)
    spike_z: float = 8.0
    #: and at least this many times their median (a 2x jump is where people call a loss "spiking")
    spike_ratio: float = 2.0
    #: with only 1-3 points before it the noise is unknown: the jump must be this large instead
    few_ratio: float = 3.0
    #: ... and this many times the largest of those points (a noisy first draw is not a baseline)
    few_over_max: float = 2.0
    #: ... unless the rest of the log measures its noise: with >= `trend_diffs` point-to-point differences
    #: of ln loss away from the point (the two that touch it left out), the jump's own difference must
    #: clear `spike_z` robust sigmas of theirs about their median (the log's trend); then a jump of
    #: `trend_ratio` suffices (an NMT cost averaged over 2,000 updates that falls 8-15% per print and
    #: rises 27% once is a spike; single-batch losses that swing x4 later in the log are noise)
    trend_diffs: int = 4
    trend_ratio: float = 1.2
    #: with 4 to `few_history` - 1 points before it, their MAD is no measure of the noise (one noisy
    #: batch of four sets it), so the jump must also clear their largest by `few_over_max`, or its
    #: step clear the rest of the log's steps (`trend_break`): a per-batch segmentation loss of
    #: 0.116, 0.122, 0.108, 0.212, then 0.338 is 11 sigmas of its four by MAD and no event
    few_history: int = 8
    #: ... in a log whose first logged step is past this one (the trainer's steps): a run's first
    #: steps rise and fall with its warm-up (a DINO loss climbs 7.7 -> 9.6 in its first epoch, then
    #: falls), with no trend yet to break
    trend_after: int = 100
    #: the least noise a difference is credited with (a perfectly smooth curve's spread is not 0)
    trend_floor: float = 0.02
    #: a jump that came back is noise when another step up elsewhere in the log is at least this share
    #: of its own (in ln loss): heavy-tailed single-batch losses swing x3-x5 and back more than once
    recur_share: float = 0.5
    #: from this many points on, a jump of `huge_jump` that came back is a spike even if the log swings
    #: that far again elsewhere
    long_log: int = 40
    #: from this many points on, a jump that came back and that the log does not make again is the
    #: long-log spike rule's to judge (loss_shape.loss_spike, tuned on the zoo's healthy controls:
    #: heavy-tailed small-batch losses jump 5x and come back), unless it is this many times its
    #: baseline. Below it that rule's block baseline (10 points, up to two blocks behind) lags a
    #: falling loss, and its "trained" test fails a run still in its first fall: a 40-point log with
    #: one x6 point between 2% noise was called healthy
    long_log_spike: int = 100
    huge_jump: float = 10.0
    #: points of history a point is judged against (the median/MAD of the 20 before it)
    history: int = 20
    #: a loss that reaches 0 or below is judged in its own units (`_signed_jump`): a point needs this
    #: many before it (with `huge_jump` x the loss's own size to clear, three measure its level) ...
    signed_before: int = 3
    #: ... their spread is taken as at least this share of their level (a printed constant has none)
    signed_floor: float = 0.01
    #: ... and the next point falling back under this share of the rise makes it one point out: a spike
    signed_back: float = 0.1
    #: a later point below this times the pre-jump median: the run came back (the corpus scorer's 1.25, rounded up)
    recovered: float = 1.3
    #: the end of the log sits this many times above the best (rolling median of 3): it diverged
    diverged: float = 1.5
    #: a log whose end is this few points (a fifth of it, at least 2): every one of them must be up,
    #: not their median (one heavy-tailed draw among the last two is not where the loss ended, and a
    #: last point alone is a jump's to judge)
    end_pair: int = 2
    #: with the gradient norm up this many times over the same stretch, a smaller rise suffices
    diverged_with_grad: float = 1.3
    grad_rise: float = 10.0
    #: and the rise (log of end over best) clears this many times the log's own point-to-point noise
    #: (`point_noise`: robust sigma of the log-differences, per point): a mid-run excerpt of a noisy
    #: loss (a detector's summed component losses swinging 0.33 -> 0.81 -> 0.52 between prints) has a
    #: lucky low draw for its "best" and an end 1.6x above it that is one more draw of the same noise
    #: (1.5 sigma on the dev split's healthy radiant excerpt); a real rise is a trend, whose steady
    #: log-differences have a small spread. Not asked when the gradient norm rose >= grad_rise x
    #: with it (a noisy LLM fine-tune whose loss climbs 1.45x while its grad norm goes 0.3 -> 20).
    #: The noise is measured from the best (or a climb's start) on: a descent before it would
    #: count its own trend as noise
    rise_z: float = 3.0
    #: a rise this many times the log's own point noise needs no `give_back`: that guard keeps a
    #: converged loss near 0 tripling in its noise from counting, but a loss whose prints scatter 2%
    #: and that climbs 1.9x over hundreds of points rose, however far it had fallen before (a long
    #: LLM log from ~10 down to 1.7, then slowly back up to 3: under a quarter of its fall)
    rise_clear_z: float = 8.0
    #: point-to-point differences needed to measure that noise (fewer: no bar, as before)
    noise_diffs: int = NOISE_DIFFS
    #: and it gave back at least this share of the fall before its best (a converged loss near 0
    #: that triples is noise around nothing, not a divergence); the same for a jump (the long-log
    #: spike rule's 20%, loss_shape.is_spike, rounded up)
    give_back: float = 0.25
    #: a cross-entropy above ln(256000) (the largest common vocabulary, ~12.45) is no softmax loss;
    #: 5% slack for a first step on a bad init that is still the model's (bad_init judges those)
    ce_max: float = math.log(256000) * 1.05
    #: the optimizer steps (0, 1, 2) at which a cross-entropy above ce_max is still the init's first
    #: forward (a large-logit init starts above ln V and falls under it within a few updates)
    ce_grace_steps: int = 2
    #: any loss this large is not a loss a healthy run prints (fp32 sums of squares included)
    absurd: float = 1e6
    #: an excerpt that opens on at most this many absurd points and then has >= `absurd_back_after`
    #: points in range, all `huge_jump` x below them, shows a spike it came back from (the points
    #: after it are its baseline), not a loss that was never sane: a mid-run excerpt's 3e14, 3.6e14,
    #: then 0.43 and falling
    absurd_back_points: int = 3
    absurd_back_after: int = 3
    #: a gradient norm jump this many times its prior median (and >= 1 in absolute terms: a
    #: converged model's norms near 1e-6 jump x10 from one batch to the next); 1000x when it came
    #: back (scalars.TRANSIENT_SURGE: small batches of a converged model jump x100 and recover),
    #: 50x when it stayed up (every later point >= 10x the median)
    grad_jump: float = 1000.0
    grad_jump_stayed: float = 50.0
    grad_jump_floor: float = 1.0
    #: a jump of `grad_jump_stayed` x or more that came back is still a jump when the points before it
    #: are calm: at least `grad_calm_points` of them, and the jump this many of their own noise
    #: sigmas (1.4826 x the MAD of ln g) out of them: a fine-tune's norms of 2.4-5.7 then 237 for one
    #: interval (z ~ 15) stands out of its log where a small-batch run's 0.001-9 scatter hides x100
    grad_calm_z: float = 10.0
    grad_calm_points: int = 5
    #: the least noise sigma (in ln g) a history is given: identical norms make no infinite z
    grad_calm_sigma_floor: float = 0.05
    #: "stayed up" must be a chance the log's own scatter gives at most this often: the points after
    #: the jump must be that many that the history's share of points >= 10x its median, raised to
    #: their number, is below it (a batch-of-4 run whose norms scatter 0.001-9 has a third of its
    #: points that high: two in a row are no evidence, five are; a quiet history needs only two)
    grad_stayed_chance: float = 0.01
    #: a median gradient norm above this, sustained over the log, is no healthy unclipped run's
    #: (pre-clip norms of healthy LLM runs are O(0.1-10); fp16 runs log them unscaled)
    grad_level: float = 1e3
    #: the loss scale fell this many times from its largest (4 halvings: backing off past the
    #: occasional overflow every fp16 run has), or below 1 (no dynamic scaler goes there healthy)
    scale_fall: float = 16.0
    #: logged rows within which that fall must happen
    scale_window: int = 10
    #: the first steps of a run, where a dynamic scaler halves its initial scale until it fits
    #: (DeepSpeed starts at 2^32: ~16 halvings; torch's GradScaler at 2^16)
    search_steps: int = 50
    #: ... and its fall has reached its lowest by this step (twice `search_steps`: a search that
    #: started late in those first steps still ends within as many again)
    search_fall_by: int = 100
    #: ... unless the scale held one value on this many logged rows before it fell: the search had
    #: found a scale that fits (16384 for 12 steps, then halving at every step to 32 with the loss NaN
    #: is a collapse, not the search)
    scale_held: int = 5
    #: share of steps skipped above which training visibly loses steps
    skip_rate: float = 0.2
    skip_min: int = 3
    #: an LR at most this at its largest over the log moves nothing in the steps shown
    lr_tiny: float = 1e-6
    #: ... and at the tail of a decay, the loss rose at least this much over the log
    tail_rise: float = 1.1
    #: a plateau at chance: every point within this share of ln K, and at least this many points
    chance_tol: float = 0.025
    chance_points: int = 6
    #: points exactly equal (to the digits printed), and printed with at most this relative step
    #: (three identical values are no batch noise: issue 25's "exactly constant")
    constant_points: int = 3
    constant_resolution: float = 0.01
    #: the log ends on this many (or more) losses exactly equal to the digits printed, after points that
    #: differed (a whole log of them is `constant_points`'s): the loss stopped changing at some point and
    #: never moved again; three is the bar of `constant_points` (batch noise or an epoch mean that
    #: learns changes the 4th-5th digit of every print), printed with at most `constant_resolution`
    stuck_points: int = 3
    #: ... and rounding alone makes that many equal prints of a moving loss with at most this chance
    #: (`_beyond_rounding`; rule of thumb: one in a thousand logs)
    stuck_chance: float = 1e-3
    #: values within this relative distance are one number computed in fp32 (~8 ulps of float32's
    #: 1.2e-7): a log printing 17 digits shows a collapsed loss as 25.600017, 25.600010, 25.600014
    f32_rel: float = 1e-6
    #: >= `constant_points` losses over >= `span_steps` trainer steps all within this share of their
    #: median move only in the 6th significant digit: a loss that learns, or even sees other batches,
    #: moves its 4th-5th (PaddleNLP's 1535.61987, 1535.61963, 1535.63367 over 100 steps)
    still_rel: float = 1e-5
    #: ... printed with a last digit at most this share of that band (coarser prints that agree are
    #: `identical`'s to judge)
    still_print: float = 0.1
    #: a block of this many consecutive, distinct values recurring exactly later in the log: the same
    #: batches give the same loss, so the weights did not change between the two passes
    repeat_block: int = 4
    #: single losses coming back exactly (not on the next print, which a duplicated line explains):
    #: at least this many such returns in a log of at least `recur_points` points, and more than the
    #: log's own spread and print resolution make likely (a Poisson tail under `stuck_chance`). A
    #: weight update changes every later loss in its 4th-5th digit; the same value again and again
    #: is the same few batches through unchanged weights
    recur_min: int = 3
    #: ... and the returns are at least this share of the prints: weights that do not change give most
    #: of the prints again once the data has cycled; a few ties in a long log are a noise's point masses
    #: (a clipped tail, a loss floor) or prints that happen to agree
    recur_returns_share: float = 0.2
    #: two identical losses at ln K (`_chance_pair`) must be printed to this relative step or finer
    #: (five significant digits: 11.0666): two coarse prints agree by chance
    pair_resolution: float = 1e-4
    pair_points: int = 2
    #: `_recurring` judges logs of `recur_points` to this many points (a dict of every print beyond it)
    recur_points: int = 8
    recur_max_points: int = 100000
    #: rows whose loss is their error rate x a clamp (`_saturated`): at least this many, and this share of
    #: the rows with an accuracy strictly between 0 and 1 (both printed to 4 digits: the identity shows in
    #: the digits, 7.4283 = 0.4609 x 16.1181; two rows could agree by chance)
    saturated_rows: int = 3
    saturated_share: float = 0.8
    #: a log of the run's start whose loss never fell: at least this many points, the start shown
    #: (first logged step at most `start_steps`), no point below (1 - no_fall_tol) x the first, and
    #: rising (Kendall's tau of loss against step >= rise_tau: P < 0.05 for 8 points of pure noise)
    #: or this long (`no_fall_long`: a healthy run's first 30 logged points fall); a real 8-step
    #: SGD start on batches of 16 stays within 2% of its first loss, so a short flat one is no symptom
    no_fall_points: int = 8
    start_steps: int = 5
    no_fall_tol: float = 0.02
    rise_tau: float = 0.5
    no_fall_long: int = 30
    #: a shorter log of the run's start (at least this many points, fewer than `no_fall_points`)
    #: whose loss rises strongly is a symptom already: rising at most pairs (Kendall's tau >=
    #: `rise_start_tau`: 9 of 10 pairs for 5 points) to `diverged` x its first loss at the end (a
    #: Qwen fine-tune's first five steps 1.28 -> 2.13 that went NaN at step 20); a warm-up that
    #: still climbs is too early to judge, as for `no_fall`
    rise_start_points: int = 5
    rise_start_tau: float = 0.6
    #: a start that steps up and stays (`_start_step_up`): the step in ln loss over the later points'
    #: own noise, and the least noise they are given (a loss printed to 4 digits, steady to the last)
    start_up_z: float = 8.0
    #: evaluations in a row at exactly one evaluation loss (`_eval_frozen`)
    eval_frozen_points: int = 3
    #: ... unless the evaluation loss is on at least this share of the training rows (a repeated
    #: display of the last validation: `_sticky_eval`), or the LR there is at most `frozen_lr_share`
    #: of the log's largest (`_lr_decayed`)
    sticky_eval_share: float = 0.8
    frozen_lr_share: float = 0.01
    frozen_lr_fall: float = 10.0
    start_up_noise_floor: float = 0.01
    #: a creep: a loss that rises steadily from its best to the end of the log, by less than `diverged`
    #: but at least `creep_min`, over >= `creep_points` points from its best (>= `creep_log` in the log),
    #: rising at most pairs (Kendall's tau >= `creep_tau`) and `rise_z` point-noise sigmas out of its own
    #: noise: epoch means (a Keras run's 1.084 -> 1.155 over nine epochs) carry little batch noise, so
    #: a few percent that keep coming are a trend; a per-batch log's noise hides a creep that small
    creep_min: float = 0.03
    creep_points: int = 5
    creep_log: int = 8
    creep_tau: float = 0.6
    #: a log shorter than `creep_log` rises when noise orders its points that way this rarely
    #: (`rise_p_value`; 1%: five points all rising, p = 1/120, or six with one pair out of order)
    short_rise_p: float = 0.01
    #: ... and without its largest point (one excursion near the end is no rise) the rest must still rise
    #: at `short_rise_p`, or at this p when the training accuracy falls with it (`short_rise_p`): a
    #: five-epoch climb whose top is its last (1.104 -> 1.140 -> 1.186 -> 1.214 -> 1.237, accuracy 0.629
    #: -> 0.595) keeps four points all rising (p = 1/24), which the 1% bar alone refused
    short_rise_p_rest: float = 0.05
    #: an LR this many times its first logged value by its last: a warm-up under way (`_warming`)
    warm_lr_climb: float = 1.5
    #: a log of this many steps or more shows more than a warm-up's first moments
    span_steps: int = 100
    #: a climb: consecutive rising intervals (at least this many) that multiply the loss by at least
    #: `climb_ratio` and never come back below `recovered` x where they began (issue 25: "x3 over two
    #: logged intervals"; a single interval is `jump_at`'s); with >= 4 points before it the rise must
    #: also clear `spike_z` robust sigmas of their noise (15%-noisy small batches rise x3 in no two steps)
    #: a loss that fell >= `rebound_fall` x (from the median of its first three points to its lowest)
    #: and then rose at each of the >= `rebound_points` logged points from its lowest to the end, to
    #: >= `diverged` x its lowest and giving back >= `rebound_share` of the fall (in log space), rose:
    #: the fall is the run's learning, larger than any noise the log shows, and a rise at every print
    #: is a trend (15.5 -> 1.43 in five prints, then 5.8, 7.1, 10.0). Any length: three rising
    #: points after a fall that large need no noise estimate
    rebound_fall: float = 3.0
    rebound_points: int = 3
    rebound_share: float = 0.5
    climb_intervals: int = 2
    climb_ratio: float = 3.0
    #: points before a climb from which their noise is measured (fewer: the climb alone must be large)
    climb_noise_points: int = 4
    #: the largest interval of a climb carries at most this share of its rise (in ln): a climb rises
    #: step after step (2.1 -> 4.0 -> 7.2: 52%); +25%, +5%, then x4 in one interval is a jump (84%)
    climb_step_share: float = 0.7
    #: a few points at ln K with no batch noise to speak of: every point within this share of ln K
    #: (a model guessing uniformly prints ln K to its third digit; a learning one leaves it by more),
    #: on at least `constant_points` points over >= span_steps steps or epochs (a healthy start
    #: sits at ln K for its first few steps only), or on `chance_points` when the steps are line numbers
    chance_tight: float = 0.005
    #: a model at its init guesses uniformly but not exactly: logits of variance s^2 give a mean
    #: cross-entropy of about ln K + s^2 / 2, so a run that never left its start sits at ln K or a
    #: little above it (ImageNet's 6.95-6.97 for ln 1000 = 6.908), never below; this share of ln K
    #: above it is still chance in a log that shows the run's start
    chance_above: float = 0.012
    #: a level is a common K's chance level when within this share of ln K (plus `chance_match_abs`
    #: for a level printed to four decimals): a uniform guess prints ln K to its third digit
    chance_match: float = 0.002
    chance_match_abs: float = 1e-4
    #: a rise whose loss had already been at >= this share of its end level after it first fell below
    #: half-way (in log space, between the best and the end) is one more crest of an oscillation (a
    #: GAN's losses by design), not a loss that rose and stayed
    rise_seen: float = 0.9
    #: before that first fall, a point this many times the first loss is a crest, not the descent's noise
    rise_over_first: float = 1.1
    #: ... judged on medians of blocks of this share of the log's points (1 point in a log under 100:
    #: as before; a 4,000-point LLM log's first descent throws single draws 10% above its first loss)
    crest_block_share: float = 0.01
    #: an epoch-level log (one point per pass over the data) that does not fall: at least this many
    #: epochs from the run's first, or `epoch_long` anywhere in the run, the last third's median no
    #: more than `epoch_fall` below the first third's, and no consistent fall (Kendall's tau above
    #: -`epoch_tau`): a healthy run's epoch means fall from one pass to the next, smoothly
    epoch_points: int = 5
    epoch_long: int = 10
    epoch_fall: float = 0.01
    epoch_tau: float = 0.5
    #: a log whose every row holds a training loss and a held-out loss (one row per evaluation period,
    #: the training loss that period's mean) from the run's first period, at least this many rows ...
    fit_points: int = 4
    #: ... whose training loss after the first period and held-out loss from the first period on fell
    #: by at most `epoch_fall`, with the training loss at least this share of the held-out one at the
    #: end: nothing fitted, not even the training data (a sound run, fine-tune or from scratch,
    #: lowers its training loss period after period, below its held-out loss as it fits; rule of
    #: thumb, untuned)
    fit_gap: float = 0.95
    #: a language model's token cross-entropy at or above this (nats; perplexity ~400) is no trained
    #: model's: trained LMs sit at 1.5-4.5 on natural text (GPT-2 ~3, Transformer-XL on WikiText-103
    #: ~3.0, BLOOM 2.2), and 6.5-7.7 is the entropy of a subword or word vocabulary's token
    #: frequencies (a unigram model), which an LM passes in its first few hundred steps
    lm_untrained: float = 6.0
    #: ... flat over at least this many prints, from at least `lm_after` steps on and over at least
    #: `lm_span` steps: long past where a learning LM leaves it
    lm_points: int = 8
    lm_after: int = 1000
    lm_span: int = 1000
    #: a rise is dated at the turn of a two-line fit (in log space) from where the loss first came
    #: within this factor of its best: a slow climb under heavy noise crosses its half-way level
    #: hundreds of rows after it turned (long generated logs: the half-way point sat 5-10% of the
    #: rows late; the turn of the fit within 1-2%)
    turn_near_best: float = 1.3
    #: candidate turns tried by that fit, and the most points it fits (longer: block means)
    turn_candidates: int = 256
    turn_points: int = 2048
    #: points (or blocks) a two-line fit needs before the half-way point: fewer, the half-way point stands
    turn_min_points: int = 4
    #: a level shift: the median of the `shift_window` points after a point sits >= `diverged` x
    #: the median of those before it and >= `shift_z` robust sigmas (of the noisier of the two
    #: windows) above it, and no later window's median comes back below `recovered` x the level
    #: before: a step up that stays, each point of it smaller than a jump (x1.5-2 under 3% noise is
    #: 13-23 sigma; a noisy fine-tune's 8% scatter does not fake 6). The window is a 40th of the
    #: log, within [shift_min_window, shift_max_window]; logs under `shift_min_windows` windows or over
    #: `shift_max_points` are not scanned (the jump and rise rules judge those)
    shift_z: float = 6.0
    #: and >= this many standard errors of the difference of two window medians under the log's own
    #: point noise (`point_noise`: 1.77 sigma / sqrt(w)): two 5-point windows of a batch-4 run whose
    #: losses scatter over decades (ln sigma ~3) differ by x400 by chance, where their own MADs say 0.9
    shift_se_z: float = 5.0
    #: windows before a step whose points give that noise (with the window after it)
    shift_noise_windows: int = 8
    shift_min_window: int = 5
    shift_max_window: int = 25
    shift_windows: int = 40
    shift_min_windows: int = 4
    shift_max_points: int = 200000
    #: up to this many points every window is scanned; beyond, windows start every n / this points
    #: (the cost of a 20,000-point log for any longer one)
    shift_dense_points: int = 20000
    #: an oscillation: from some block of the log on, the point-to-point swings of the log-loss
    #: (robust sigma of its differences, per block of a 20th of the log, >= osc_window points) are
    #: >= osc_ratio x their median over the blocks before, >= osc_min in size (swings of 22% from
    #: one print to the next), stay >= half that ratio to the end, and the loss does not fall over
    #: them (the last block's median >= osc_no_fall x the onset block's): the run went from its own
    #: batch noise into swinging. A GAN's losses swing from the start (no change of regime), and a
    #: run whose noise merely grows as its loss falls stays under osc_min; >= osc_points points
    osc_ratio: float = 4.0
    osc_min: float = 0.2
    osc_window: int = 10
    osc_blocks: int = 20
    osc_no_fall: float = 0.9
    osc_points: int = 60
    #: share of osc_ratio every later block keeps (the swinging goes on to the end)
    osc_persist: float = 0.5
    #: and the swinging blocks' median sits >= this many times the block's before the onset: a loss
    #: swinging up from its level, not a converged small-batch loss whose relative noise grows as it
    #: nears 0 (a healthy batch-4 SGD run's log-noise grows 5x there while its level falls)
    osc_level_up: float = 1.1
    #: ... and the swings go up from that level: their low decile (`osc_low_pct`) stays >= this share of it (a
    #: batch-4 run's per-batch losses scatter from 0.01 to 5 around 1: swings down towards 0)
    osc_floor: float = 0.7
    osc_low_pct: float = 10.0
    #: a loss exactly 0 from some row to the end: at least this share of the rows from the first
    #: zero on are 0 (a label mask that went empty mid-run, not only one empty from the start)
    zero_share: float = 0.9
    #: a loss exactly 0 on every point of a log of the run's first updates: two points suffice (a loss
    #: that no print of a learning model shows that early; the zero itself carries no batch noise)
    zero_start_points: int = 2
    #: a zero straight after a loss at least this large is a fall no four-decimal print rounds to 0 (a
    #: loss that converged towards 0 and printed 0.0 is the run done, not broken)
    zero_drop_from: float = 0.05
    #: a gradient norm at least this (median) on the rows where the loss is exactly 0: gradients flow,
    #: so the 0 is not the loss the weights are trained on (GRPO with beta = 0 logs 0 by construction
    #: while its norms are 0.03-0.5: TRL's maintainers call it expected); an empty label mask's
    #: gradient is 0, or ~1e-6 of bf16 rounding
    zero_grad_live: float = 1e-3
    #: ... and at most this on every zero row: no gradient flows, so one zero print after a sane loss
    #: is the symptom already (a Qwen2 SFT: 1.73, then 0.0 with grad norm 3.9e-6)
    zero_grad_dead: float = 1e-4
    #: a loss that falls from >= zero_drop_from to at most this share of itself in one optimizer step
    #: (`collapse_steps` apart) and ends on an exact 0: no update cuts a sane loss 10,000-fold; the
    #: loss lost its targets (or the model sees them): the zero's symptom with a near-zero print first
    collapse_rel: float = 1e-4
    collapse_steps: int = 1
    #: a label metric at its worst (`_metric_worst`): on at least this many points, printed at no fewer
    #: than `metric_cover` of the loss's points (it spans the log, not one evaluation)
    metric_points: int = 3
    metric_cover: float = 0.5
    #: an accuracy this close above 1/K (a share of 1) is still chance: batch noise and a majority
    #: class a little above 1/K (MNIST's commonest digit is 11% of it)
    acc_margin: float = 0.02
    #: an error rate (WER, CER) at or above this on every point: every output wrong
    error_worst: float = 0.99
    #: with no K named and no ln K fit, an accuracy at 0.5 is binary chance only when the loss sits
    #: between these shares of ln 2 (a binary cross-entropy at its start); a 10-class model at 50%
    #: prints a loss near 1.5
    binary_low: float = 0.95
    binary_high: float = 1.15
    #: two classes: the smallest class count a configuration can name, and the binary task's K
    binary_k: int = 2
    #: a label metric above 1 is printed as a percentage, of this whole; above it, it is no accuracy
    percent_whole: float = 100.0


LIMITS = SymptomLimits()

#: model names known to overflow in fp16 (trained in bf16; activations beyond 65504): T5 family,
#: Pegasus, Gemma, BLOOM (HF issues and model cards say so)
FP16_PRONE = ("t5", "pegasus", "gemma", "bloom", "switch")


@dataclass
class Symptom:
    """One observation: `kind` (see `find`), the row and step where it begins, its numbers."""

    kind: str
    row: int
    step: int
    data: dict[str, Any] = field(default_factory=dict)


def symptoms_of(q: Quantities) -> list[Symptom]:
    """The run's symptoms, computed once per Quantities."""
    cached = q.__dict__.get("_symptoms")
    if cached is None:
        cached = find(q.run, q)
        q.__dict__["_symptoms"] = cached
    return cached


def find(run: Run, q: Quantities) -> list[Symptom]:
    out: list[Symptom] = []
    for fn in (
        _nonfinite,
        _absurd,
        _jumps,
        _divergence,
        _rebound,
        _oscillation,
        _zero_or_constant,
        _eval_frozen,
        _chance_plateau,
        _chance_pair,
        _stuck_tail,
        _repeats,
        _recurring,
        _no_fall,
        _rising_start,
        _start_step_up,
        _creep,
        _epoch_flat,
        _saturated,
        _fit_flat,
        _lm_untrained,
        _metric_worst,
        _grad,
        _scale,
        _skips,
        _lr,
    ):
        with np.errstate(all="ignore"):
            out.extend(fn(run, q))
    if not any(s.kind in RISE_KINDS for s in out):
        with np.errstate(all="ignore"):
            out.extend(_short_creep(run, q))  # the last word on a rise: only where no rule above saw one
    if any(s.kind in FLAT_TRAIN_KINDS for s in out):
        out = [s for s in out if s.kind != "eval_constant"]  # the training loss's own flat symptom says more
    return out


#: symptoms of a training loss that stopped moving (an `eval_constant` beside one of them adds nothing)
FLAT_TRAIN_KINDS = ("constant", "stuck", "chance", "zero", "repeat", "recur", "saturated")


#: symptoms of a loss that went up and stayed up (`_short_creep` adds one only where none of these is found)
RISE_KINDS = ("jump_stayed", "rise", "rebound", "rising_start", "creep", "no_fall")


def _sym(q: Quantities, kind: str, row: int, **data: Any) -> Symptom:
    return Symptom(kind=kind, row=int(row), step=int(q.steps[row]), data=data)


#: text events that report a NaN/Inf loss (sources/text_events.py kinds): one printed after the
#: last logged row is the run's NaN, at the line's step
LATE_NAN_KINDS = ("nonfinite_loss", "anomaly_op", "nonfinite_warning")
#: of those, the ones that name the loss or an op going non-finite: anywhere in a log whose loss
#: column stays finite (`Loss is NaN. Skipping batch`, anomaly mode's op), they are the run's NaN
NAN_TEXT_KINDS = ("nonfinite_loss", "anomaly_op")


def _nonfinite(run: Run, q: Quantities) -> list[Symptom]:
    """A non-finite loss or gradient norm; or, where no logged value is, a component loss the log
    printed as NaN/Inf, or a NaN/Inf warning at or after the last logged step (the run stopped on
    it: `Loss is nan, stopping training`)."""
    i = q.first_bad
    if i is not None:
        told = text_events(run, "nonfinite_loss", int(q.steps[i]) - 1)
        if told and told[0] >= int(q.steps[0]):  # the text says a loss went non-finite before a NaN was printed
            row = min(int(np.searchsorted(q.steps, told[0])), i)
            sym = _sym(q, "nonfinite", row, told=True)
            sym.step = int(told[0])
            return [sym]
        return [_sym(q, "nonfinite", i)]
    if q.n == 0:
        return []
    dead = _scaler_gave_up(run, q)
    if dead is not None:
        return [_sym(q, "nonfinite", dead, source="scale")]
    outside = run.meta.get("outside_sum") or ()  # terms the reader proved never reached the weights
    for step, comps in sorted(run.event("loss_components").items()):
        bad = (
            [k for k, v in comps.items() if isinstance(v, (int, float)) and not math.isfinite(v) and k not in outside]
            if isinstance(comps, dict)
            else []
        )
        if bad:
            row = min(int(np.searchsorted(q.steps, int(step))), q.n - 1)
            return [_sym(q, "nonfinite", row, source="component", name=str(bad[0]))]
    last = int(q.steps[-1])
    told = sorted(s for kind in LATE_NAN_KINDS for s in text_events(run, kind) if kind in NAN_TEXT_KINDS or s >= last)
    if not told:
        return []
    # the row after the last one printed at or before the line: the NaN came after that row
    row = min(int(np.searchsorted(q.steps, told[0], side="right")), q.n - 1)
    sym = _sym(q, "nonfinite", row, source="text")
    sym.step = int(told[0])
    return [sym]


def _scaler_gave_up(run: Run, q: Quantities) -> int | None:
    """The first of the non-finite losses the log ends on, when the loss scale there is below 1: a
    NaN step is the scaler's business only while it backs off and the run comes back (`Quantities`
    files a NaN on a back-off step as skipped); a scale under 1 with no finite loss after it is a
    scaler that ran out of room, and the run is stuck at NaN."""
    if not run.has("scale"):
        return None
    rows = np.flatnonzero(q.loss_logged)
    fin = rows[np.isfinite(q.loss[rows])]
    tail = rows[rows > fin[-1]] if fin.size else rows
    s = run.col("scale")[tail]
    if tail.size == 0 or not (np.isfinite(s) & (s < 1)).any():
        return None
    return int(tail[0])


def _baseline(lx: np.ndarray, j: int, lim: SymptomLimits) -> tuple[float, float, float] | None:
    """(median, robust sigma, largest) of up to `history` log-losses before point j."""
    prev = lx[max(0, j - lim.history) : j]
    if prev.size == 0:
        return None
    med = float(np.median(prev))
    sigma = 1.4826 * float(np.median(np.abs(prev - med)))
    return med, max(sigma, 0.02), float(np.max(prev))


def jump_at(
    lx: np.ndarray, j: int, lim: SymptomLimits = LIMITS, trend: bool = False, seconded: bool = False
) -> float | None:
    """The ratio of point j over the median of the points before it when it stands out of their
    noise (>= spike_z robust sigmas and >= spike_ratio x with >= 4 points before it, or, above all of
    them, a step into it >= spike_z robust sigmas of the log's other steps: `trend_break`; >=
    few_ratio x the median and >= few_over_max x their largest with 1-3, or >= spike_ratio x the median
    when the evaluation loss jumped at the same point too: `seconded`); None when it does not."""
    b = _baseline(lx, j, lim)
    if b is None:
        return None
    med, sigma, top = b
    ratio = math.exp(lx[j] - med)
    k = min(j, lim.history)
    if k >= 4:
        ok = (lx[j] - med) / sigma >= lim.spike_z and ratio >= lim.spike_ratio
        if ok and k < lim.few_history and lx[j] - top < math.log(lim.few_over_max):
            z = trend_break(lx, j, lim)
            ok = z is None or z >= lim.spike_z  # (no other steps to judge by: the jump as the MAD says)
        if not ok and ratio >= lim.spike_ratio and lx[j] > top:
            # the spread of the points before it is the loss's own fall (a fast first descent), not
            # its noise: the step into it is judged against the log's other steps instead
            z = trend_break(lx, j, lim)
            ok = z is not None and z >= lim.spike_z
        if not ok and k < lim.few_history and ratio >= lim.huge_jump:
            # a few noisy points (YOLO's per-batch 5438, 12576, 2886, 6576, then 149794): a jump of
            # `huge_jump` x their median that clears their largest by more than they spread is out of them
            ok = lx[j] - top >= max(math.log(lim.few_over_max), _spread_before(lx, j, lim))
    else:
        # with 1-3 points before it, a jump large against them needs no trend; in a mid-run excerpt
        # the log's trend may also admit a smaller one (a trend never vetoes a x46 jump: 8.5, 5.3, 322)
        # one point before it is no baseline, unless it is the run's first and the next point stays as
        # high too (RecBole's train loss by epoch, 5.8 -> 22.2 -> 19.6: a loss rises from its start only
        # when training goes wrong); mid-run, two high single-batch losses after one low are its noise
        stays = not trend and j + 1 < lx.size and lx[j + 1] - med >= math.log(lim.few_ratio)
        extra = 1.0 if k == 1 and not stays else 0.0
        # (and above their largest by more than they spread among themselves: two single-batch losses of
        # 0.007 and 3.7e-5 before 0.019 show a log that swings x190 between prints, no jump)
        spread = _spread_before(lx, j, lim)
        ok = ratio >= lim.few_ratio + extra and lx[j] - top >= max(math.log(lim.few_over_max), spread)
        # the evaluation's loss jumping at the same point is a second measurement of one event: with
        # it, a jump of the usual size is no draw of the training loss's noise (nnU-Net's epoch means:
        # train 0.12 -> 0.60 while validation went 0.48 -> 3.64)
        ok = ok or (seconded and ratio >= lim.spike_ratio and lx[j] > top)
        if not ok and trend and (z := trend_break(lx, j, lim)) is not None:
            ok = z >= lim.spike_z and ratio >= lim.trend_ratio and lx[j] > top
    return ratio if ok else None


def _spread_before(lx: np.ndarray, j: int, lim: SymptomLimits) -> float:
    """The range of ln loss over the up to `history` points before point j."""
    prev = lx[max(0, j - lim.history) : j]
    return float(np.max(prev) - np.min(prev))


def _recurs(lx: np.ndarray, j: int, lim: SymptomLimits = LIMITS) -> bool:
    """Another step up of ln loss in the log, not touching point j, is at least `recur_share` of the
    step into j: the log swings that far again (single-batch losses of a sound run: 0.73 -> 2.99 ->
    0.66 -> 3.33 -> 0.56), so a jump that came back is its noise, not an event."""
    d = np.diff(lx)
    if j < 1 or d[j - 1] <= 0:
        return False
    others = np.delete(d, [j - 1, j] if j < d.size else [j - 1])
    return bool((others >= lim.recur_share * d[j - 1]).any())


def trend_break(lx: np.ndarray, j: int, lim: SymptomLimits = LIMITS) -> float | None:
    """How far the step into point j departs from the log's other steps: (its difference of ln loss
    - their median) over their robust sigma (at least `trend_floor`), from the differences that do
    not touch j; None with fewer than `trend_diffs` of them."""
    d = np.diff(lx)
    if j < 1:
        return None
    others = np.delete(d, [j - 1, j] if j < d.size else [j - 1])
    if others.size < lim.trend_diffs:
        return None
    med = float(np.median(others))
    sigma = max(1.4826 * float(np.median(np.abs(others - med))), lim.trend_floor)
    return (float(d[j - 1]) - med) / sigma


def _shift(a: np.ndarray, k: int) -> np.ndarray:
    """a moved k places later, inf where nothing came before."""
    out = np.full(a.size, np.inf)
    if k < a.size:
        out[k:] = a[: a.size - k]
    return out


def prior_min(v: np.ndarray, w: int) -> np.ndarray:
    """Per point, the smallest of the up to `w` points before it (inf for the first): by doubling
    (the minimum over 2k points is that of two overlapping k-point minima), O(n log w)."""
    m, span = _shift(v.astype(float), 1), 1  # m[i]: the minimum of the `span` points ending at i-1
    while span * 2 <= w:
        m = np.minimum(m, _shift(m, span))
        span *= 2
    if span < w:  # the other w - span (< span) points: the same minima, shifted
        m = np.minimum(m, _shift(m, w - span))
    return m


def _candidates(lv: np.ndarray, margin: float) -> np.ndarray:
    """Points (in log space) at least `margin` above the smallest of the `history` before them: a
    superset of those a jump rule can accept (a median is never below the minimum), so the exact
    rule runs on a few points of a million-step log instead of all of them."""
    w = 32  # >= history: a point's history lies in its own block and the one before
    n = lv.size
    if n <= 4096:
        return np.flatnonzero(lv >= prior_min(lv, LIMITS.history) + margin)
    nb = -(-n // w)
    blocks = np.full(nb * w, np.inf)
    blocks[:n] = lv
    bmin = blocks.reshape(nb, w).min(axis=1)
    both = np.minimum(bmin, np.concatenate([[np.inf], bmin[:-1]]))  # a lower bound of each history
    screen = np.flatnonzero(lv >= np.repeat(both, w)[:n] + margin)
    if screen.size == 0:
        return screen
    exact = np.array(
        [lv[j] >= float(np.min(lv[max(0, j - LIMITS.history) : j])) + margin if j else False for j in screen[:10000]],
        dtype=bool,
    )
    return screen[:10000][exact]


def _jumps(run: Run, q: Quantities) -> list[Symptom]:
    """The first loss point that jumps out of its history: `spike` when a later point comes back
    below `recovered` x the baseline or it is the last point, `jump_stayed` when it did not."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < 2 or (x == 0).any():
        return []  # exact zeros (a masked or by-design zero objective) have no level to jump from
    if (x < 0).any():
        return _signed_jump(q, lf, x)
    lx = np.log(x)
    start = float(np.median(x[:3]))
    shift = _level_shift(q, lf, lx)
    # a mid-run excerpt: with 1-3 points before it the rest of the log's trend judges a jump (`trend_ratio`)
    trend = steps_known(run) and int(q.steps[lf[0]]) > LIMITS.trend_after
    few = np.arange(1, min(4, x.size)) if trend else np.arange(0)
    seconded = _eval_jumped(run, lf)
    for j in np.union1d(few, _candidates(lx, math.log(LIMITS.spike_ratio))):
        ratio = jump_at(lx, int(j), trend=trend, seconded=bool(seconded[j]))
        if ratio is None:
            continue
        base = float(math.exp(lx[j]) / ratio)
        if x[j] - base < LIMITS.give_back * max(start - base, 0.0):
            continue  # heavy-tailed noise around a loss that fell far: 5x of little is little
        after = x[j + 1 :]
        back = bool((after < LIMITS.recovered * base).any()) if after.size else None
        if back is None and (_at_large_chance(run, float(x[j])) or seconded[j]):
            # the last point, at a large softmax's chance level (the weights were wrecked), or with the
            # evaluation's loss up as far at the same point (two measurements: no sign of a way back)
            back = False
        climb = back is None and j >= 2 and bool(x[j - 1] >= LIMITS.diverged * base)
        if climb:
            back = False  # the last point, the second of two rising intervals (x1.5, then beyond): a climb
        kind = "spike" if back is not False else "jump_stayed"
        if kind == "spike" and x.size >= LIMITS.long_log_spike and ratio < LIMITS.huge_jump:
            continue  # a long log's one-off that came back: the spike rule tuned for it judges
        if kind == "spike" and (x.size < LIMITS.long_log or ratio < LIMITS.huge_jump) and _recurs(lx, int(j)):
            continue  # a swing the log makes again elsewhere: its own (heavy-tailed) noise
        on = j - 1 if climb else j  # a climb begins at its first raised point
        if kind == "jump_stayed" and shift and shift[0].row < lf[on]:
            return shift  # a step up that stayed began before its first point past the jump bar
        return [
            _sym(
                q,
                kind,
                lf[on],
                loss=float(x[j]),
                base=base,
                ratio=ratio,
                recovered=back,
                before=int(min(j, LIMITS.history)),
                after=int(after.size),
                climb=climb,
            )
        ]
    return _climb(q, lf, x, lx, start) or shift


def _eval_jumped(run: Run, lf: np.ndarray, lim: SymptomLimits = LIMITS) -> np.ndarray:
    """For each of the rows `lf`: the evaluation loss logged there is >= `few_ratio` x the one logged
    before it (both finite and positive)."""
    if not run.has("eval_loss"):
        return np.zeros(lf.size, dtype=bool)
    ev = run.col("eval_loss")
    rows = np.flatnonzero(run.logged("eval_loss") & np.isfinite(ev))
    before, at = ev[rows[:-1]], ev[rows[1:]]
    return np.isin(lf, rows[1:][(before > 0) & (at >= lim.few_ratio * before)])


def _signed_jump(q: Quantities, lf: np.ndarray, x: np.ndarray, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """For a loss that goes below 0 (a flow's or a density's negative log-likelihood), where
    ratios mean nothing: the first point >= `signed_before` points in whose rise over the median of
    the points before it clears `spike_z` of their robust sigmas and `huge_jump` x their own size
    (the largest of |median|, that sigma and their widest swing from the median: a heavy-tailed
    objective that crosses 0, an RL policy loss, has swung that far before): a jump from -5.4 to
    40490 under 0.1 of noise. A `spike`
    when the next point falls back by >= 1 - `signed_back` of the rise (one point out; `recovered`
    says whether the loss then came back within `rise_z` sigmas of the level before, or None at the
    log's end), `jump_stayed` when it stays up."""
    for j in range(lim.signed_before, x.size):
        prev = x[max(0, j - lim.history) : j]
        bar = _signed_out(float(x[j]), prev, lim)
        if bar is None:
            continue
        med, sigma, rise, size = bar
        after = x[j + 1 :]
        one_point = bool(after.size == 0 or after[0] - med <= lim.signed_back * rise)
        back = None if after.size == 0 else bool((after - med <= lim.rise_z * sigma).any())
        return [
            _sym(
                q,
                "spike" if one_point else "jump_stayed",
                lf[j],
                loss=float(x[j]),
                base=med,
                ratio=rise / size,
                recovered=back,
                before=int(prev.size),
                after=int(after.size),
                climb=False,
                signed=True,
                sigmas=rise / sigma,
                level_after=float(np.median(after)) if after.size else None,
            )
        ]
    return _signed_one_out(q, lf, x, lim)


def _signed_out(v: float, ref: np.ndarray, lim: SymptomLimits) -> tuple[float, float, float, float] | None:
    """(median, robust sigma, rise, size) of a signed point `v` over the points `ref` it is judged against,
    when its rise clears `spike_z` sigmas and `huge_jump` x their own size (`_signed_jump`); else None."""
    med = float(np.median(ref))
    sigma = max(1.4826 * float(np.median(np.abs(ref - med))), lim.signed_floor * max(abs(med), 1e-12))
    rise = v - med
    size = max(abs(med), sigma, float(np.max(np.abs(ref - med))))
    return None if rise < lim.spike_z * sigma or rise < lim.huge_jump * size else (med, sigma, rise, size)


def _signed_one_out(q: Quantities, lf: np.ndarray, x: np.ndarray, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """With fewer than `signed_before` points before it, one point inside the log out of all the others
    (>= `signed_before` of them, before and after it) by the same bars: an excerpt of WaveGlow's negative
    log-likelihood, -4.32, 4191.68, -2.41, -2.91, shows a spike the run came back from with no history
    before it. Not the first point (a start above the rest is a run coming down) nor the last."""
    j = int(np.argmax(x))
    others = np.delete(x, j)
    if not 0 < j < x.size - 1 or others.size < lim.signed_before:
        return []
    bar = _signed_out(float(x[j]), others, lim)
    if bar is None:
        return []
    med, sigma, rise, size = bar
    after = x[j + 1 :]
    return [
        _sym(
            q,
            "spike",
            lf[j],
            loss=float(x[j]),
            base=med,
            ratio=rise / size,
            recovered=bool((after - med <= lim.rise_z * sigma).any()),
            before=int(j),
            after=int(after.size),
            climb=False,
            signed=True,
            sigmas=rise / sigma,
            level_after=float(np.median(after)),
            one_out=True,
            n=int(others.size),
        )
    ]


def _level_shift(q: Quantities, lf: np.ndarray, lx: np.ndarray, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """The first point where the loss steps up to a level it keeps: the median of the window after
    it >= `diverged` x and >= `shift_z` robust sigmas above the median of the window before, and
    no later window back below `recovered` x that level (a long log's step up of x1.5-2, no point
    of which is a jump). Dated at the first point of the step (the first of two points past half-way)."""
    n = lx.size
    w = int(min(lim.shift_max_window, max(lim.shift_min_window, n // lim.shift_windows)))
    if n < lim.shift_min_windows * w or n > lim.shift_max_points:
        return []
    # windows start every `stride` points (1 up to shift_dense_points: every point), w a multiple of it
    stride = max(1, -(-n // lim.shift_dense_points))
    w = max(stride, stride * (w // stride))
    win = np.lib.stride_tricks.sliding_window_view(lx, w)[::stride]
    med = np.median(win, axis=1)  # med[i]: the median of lx[i * stride:i * stride + w]
    sig = np.maximum(1.4826 * np.median(np.abs(win - med[:, None]), axis=1), 0.01)
    k = w // stride  # windows from one to the next that does not overlap it
    pre, post = med[:-k], med[k:]  # the windows before and after point j = i * stride + w
    rise = post - pre
    ok = (rise >= math.log(lim.diverged)) & (rise >= lim.shift_z * np.maximum(sig[:-k], sig[k:]))
    # no later window comes back near the level before
    later_low = np.minimum.accumulate(med[::-1])[::-1][k:]
    ok &= later_low >= pre + math.log(lim.recovered)
    hit = [i for i in map(int, np.flatnonzero(ok)) if _beyond_local_noise(lx, i * stride + w, w, float(rise[i]), lim)]
    if not hit:
        return []
    i = hit[0]
    j, base, level = i * stride + w, float(pre[i]), float(post[i])
    mid = 0.5 * (base + level)
    lo = max(1, j - w)
    above = lx[lo : j + w + 1] >= mid  # (the window after may end with the log: one point fewer)
    up = above[:-1] & above[1:]
    on = lo + int(np.argmax(up)) if up.any() else j
    return [
        _sym(
            q,
            "jump_stayed",
            lf[on],
            loss=float(math.exp(level)),
            base=float(math.exp(base)),
            ratio=float(math.exp(level - base)),
            recovered=False,
            before=w,
            after=int(n - on - 1),
            climb=False,
            shift=True,
        )
    ]


#: the standard error of the difference of two medians of w points, in point sigmas x sqrt(w):
#: sqrt(2) x 1.2533 (a median's efficiency against a mean under normal noise)
_MEDIAN_DIFF_SE = math.sqrt(2) * 1.2533


def _beyond_local_noise(lx: np.ndarray, j: int, w: int, rise: float, lim: SymptomLimits = LIMITS) -> bool:
    """The step up at point j (two window medians `rise` apart, in ln) is `shift_se_z` standard
    errors of such a difference under the point noise of the `shift_noise_windows` windows around it."""
    around = lx[max(0, j - lim.shift_noise_windows * w) : j + w]
    return rise >= lim.shift_se_z * _MEDIAN_DIFF_SE * _ln_point_noise(around) / math.sqrt(w)


def _ln_point_noise(lx: np.ndarray) -> float:
    """`point_noise` of a series already in log space."""
    return log_diff_noise(lx) / math.sqrt(2)


def _climb(
    q: Quantities, lf: np.ndarray, x: np.ndarray, lx: np.ndarray, start: float, lim: SymptomLimits = LIMITS
) -> list[Symptom]:
    """The first run of >= `climb_intervals` rising intervals that multiplies the loss by >=
    `climb_ratio` and stays up: the loss climbing point after point, which no single-point rule sees
    when each step of the climb is smaller than a jump (2.1 -> 4.0 -> 7.2)."""
    up = np.diff(lx) > 0
    a = 0
    while a < up.size:
        if not up[a]:
            a += 1
            continue
        b = a
        while b < up.size and up[b]:
            b += 1  # the run of rises is a..b: points a to b
        hit = _climb_end(lx, a, b, lim)
        if hit is not None and _climb_counts(x, lx, a, hit, start, lim):
            base = float(x[a])
            return [
                _sym(
                    q,
                    "jump_stayed",
                    lf[a + 1],
                    loss=float(x[hit]),
                    base=base,
                    ratio=float(x[hit] / base),
                    recovered=False,
                    before=int(min(a + 1, lim.history)),
                    after=int(x.size - hit - 1),
                    climb=True,
                )
            ]
        a = b
    return []


def _climb_end(lx: np.ndarray, a: int, b: int, lim: SymptomLimits) -> int | None:
    """The first point of the rise a..b at >= climb_ratio x point a, >= climb_intervals after it."""
    for e in range(a + lim.climb_intervals, b + 1):
        if lx[e] - lx[a] >= math.log(lim.climb_ratio):
            return e
    return None


def _climb_counts(x: np.ndarray, lx: np.ndarray, a: int, e: int, start: float, lim: SymptomLimits) -> bool:
    """A climb from a to e stands out of the noise before it (with fewer than `climb_noise_points`
    before it, of the log's point-to-point noise from the climb's start on), gives back a share of
    the fall before it, and never comes back below `recovered` x its start."""
    prev = lx[max(0, a + 1 - lim.history) : a + 1]
    if prev.size >= lim.climb_noise_points:
        med = float(np.median(prev))
        sigma = max(1.4826 * float(np.median(np.abs(prev - med))), 0.02)
        if (lx[e] - med) / sigma < lim.spike_z:
            return False
    elif lx[e] - lx[a] < lim.rise_z * diff_noise(x[a:]):
        return False  # too few points before it to measure their noise: the log's own noise, over two
        # single points (its start and its end), must not explain it (a mid-run excerpt's low first draw)
    if x[e] - x[a] < lim.give_back * max(start - float(x[a]), 0.0):
        return False  # noise around a loss that fell far
    if float(np.max(np.diff(lx[a : e + 1]))) > lim.climb_step_share * float(lx[e] - lx[a]):
        return False  # one interval carries the rise: a jump, which the jump rules judge
    return not bool((x[e + 1 :] < lim.recovered * x[a]).any())


def _at_large_chance(run: Run, v: float) -> bool:
    """v is within 2% of ln V for the run's vocabulary or a common one of >= 1000 tokens: an LLM's
    loss back at uniform guessing."""
    vocab = run.meta.get("vocab_size")
    ks = (
        [vocab]
        if isinstance(vocab, (int, float)) and not isinstance(vocab, bool) and vocab >= 2
        else [k for k in COMMON_K if k >= 1000]
    )
    return any(abs(v - math.log(k)) <= 0.02 * math.log(k) for k in ks)


def rolling_best(x: np.ndarray) -> tuple[float, int]:
    """The lowest median of w = max(3, n/10) consecutive points, and the index of its middle point
    (a window that wide is not fooled by one lucky batch)."""
    w = max(3, x.size // 10)
    if x.size < w:
        return float(np.min(x)), int(np.argmin(x))
    if x.size > 2000:  # a long log: non-overlapping windows (O(n), a million points in milliseconds)
        nb = x.size // w
        med = np.median(x[: nb * w].reshape(nb, w), axis=1)
        b = int(np.argmin(med))
        return float(med[b]), b * w + w // 2
    win = np.lib.stride_tricks.sliding_window_view(x, w)
    med = np.median(win, axis=1)
    b = int(np.argmin(med))
    return float(med[b]), b + w // 2


def _divergence(run: Run, q: Quantities) -> list[Symptom]:
    """The end of the log sits >= `diverged` x its best (rolling median of 3), rising: the last
    points' median above the middle's; with the gradient norm up >= grad_rise x, >= 1.3x suffices."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < 5 or (x <= 0).any():
        return []
    best, b = rolling_best(x)
    k = max(2, x.size // 5)
    if b >= x.size - k:
        return []
    end = float(np.median(x[-k:]))
    mid = float(np.median(x[b : x.size - k])) if x.size - k > b else best
    gn = q.grad_norm[lf]
    g_best = gn[max(0, b - 1) : b + 2]
    g_best = g_best[np.isfinite(g_best)]
    g_end = gn[-k:][np.isfinite(gn[-k:])]
    grad_x = (
        float(np.median(g_end) / np.median(g_best))
        if g_best.size and g_end.size and float(np.median(g_best)) > 0
        else None
    )
    need = LIMITS.diverged_with_grad if grad_x is not None and grad_x >= LIMITS.grad_rise else LIMITS.diverged
    start = float(np.median(x[: min(3, b + 1)]))
    pair_down = k <= LIMITS.end_pair and float(np.min(x[-k:])) < need * best
    if best <= 0 or end < need * best or end < mid or pair_down:
        return []
    noise = point_noise(x[b:])
    clear = noise > 0 and math.log(end / best) >= LIMITS.rise_clear_z * noise
    if end - best < LIMITS.give_back * max(start - best, 0.0) and not clear:
        return []
    if end < float(np.percentile(x[:-k], 75)):
        return []  # the end sits inside the run's own spread: noise, not a rise
    if need == LIMITS.diverged and math.log(end / best) < LIMITS.rise_z * noise:
        return []  # a rise no larger than the log's own swings from one print to the next, and no
        # gradient norm that rose with it (>= grad_rise x: evidence the swings cannot fake)
    # the first point after the best at or above halfway (in log space) to the end level
    half = math.sqrt(best * end)
    on = b + int(np.argmax(x[b:] >= half))
    if _been_there(x, on, half, end):
        return []  # a crest like those before it: an oscillation, not a loss that rose and stayed
    # dated where it turned, not where it crossed half-way; but a climb that left its best in one
    # print (the next point >= `diverged` x it) began right there: the knee of a fall that flattened
    # and then climbed can land rows before the climb
    back = b + int(np.flatnonzero(x[b:on] <= best)[-1]) if (x[b:on] <= best).any() else b
    abrupt = back + 1 <= on and x[back + 1] >= LIMITS.diverged * best
    on = back + 1 if abrupt else min(on, turn_of(x, best, on))
    return [
        _sym(
            q,
            "rise",
            lf[on],
            best=best,
            best_step=int(q.steps[lf[b]]),
            end=end,
            ratio=end / best,
            grad_ratio=grad_x,
            n=int(x.size),
        )
    ]


def _rebound(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A loss that fell far and then climbed back at every logged point to the end (`rebound_fall`,
    `rebound_points`, `rebound_share`): a divergence however short the log, dated at the first point
    of the climb. The `_divergence` rule measures the end against the log's spread and noise, both
    of which a fall of 10x inflates; this one needs neither."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < lim.rebound_points + 2 or (x <= 0).any():
        return []
    b = int(np.argmin(x))
    best, end = float(x[b]), float(x[-1])
    start = float(np.median(x[: min(3, b)])) if b else best
    if x.size - 1 - b < lim.rebound_points or not bool((np.diff(x[b:]) > 0).all()):
        return []
    fall = math.log(start / best)
    if (
        fall < math.log(lim.rebound_fall)
        or end < lim.diverged * best
        or math.log(end / best) < lim.rebound_share * fall
    ):
        return []
    gn = q.grad_norm[lf]
    g0, g1 = gn[b], gn[-1]
    grad_x = float(g1 / g0) if np.isfinite(g0) and np.isfinite(g1) and g0 > 0 else None
    return [
        _sym(
            q,
            "rise",
            lf[b + 1],
            best=best,
            best_step=int(q.steps[lf[b]]),
            end=end,
            ratio=end / best,
            grad_ratio=grad_x,
            n=int(x.size),
        )
    ]


def turn_of(x: np.ndarray, best: float, upto: int, lim: SymptomLimits = LIMITS) -> int:
    """The index where a rise began: the knee of a continuous two-line least-squares fit of ln x
    (a line, then a line with another slope) over the stretch from the loss's first point within
    `turn_near_best` x its best to where it first reached the level it ends at, the knee tried at up to `turn_candidates` points before
    `upto`. A slow climb under heavy-tailed noise is a trend no single point shows; the fit sees
    it from all the points at once. Long stretches are fit on block means (`turn_points`)."""
    s0 = int(np.argmax(x <= lim.turn_near_best * best))
    if upto - s0 < lim.turn_min_points:
        return upto
    # fit up to where it first reached the level it ends at: a loss that climbed and then stayed
    # there (x3 a print to 1e7, then flat) bends twice, and a two-line fit of it all puts its one
    # knee rows before the climb
    end = float(np.median(x[-max(2, x.size // 5) :]))
    top = upto + int(np.argmax(x[upto:] >= end)) if (x[upto:] >= end).any() else x.size - 1
    y = np.log(x[s0 : top + 1])
    blk = max(1, -(-y.size // lim.turn_points))
    m = y.size // blk
    yb = y[: m * blk].reshape(m, blk).mean(axis=1)
    t = np.arange(m, dtype=float)
    hi = min(m - 2, (upto - s0) // blk)
    cands = np.unique(np.linspace(1, max(1, hi), min(lim.turn_candidates, max(1, hi))).astype(int))
    ones = np.ones(m)
    err = [
        float(np.linalg.lstsq(np.stack([ones, t, np.maximum(t - c, 0.0)], 1), yb, rcond=None)[1].sum())
        if m >= lim.turn_min_points
        else np.inf
        for c in cands
    ]
    if not err or not np.isfinite(min(err)):
        return upto
    return s0 + int(cands[int(np.argmin(err))]) * blk + blk // 2


def _oscillation(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """The first block of the log from which the loss swings (see `osc_ratio`): its point-to-point
    noise far above the blocks' before, to the end, with no fall. Dated at the first swing of the
    new size in that block or the one before."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < lim.osc_points or (x <= 0).any():
        return []
    d = np.diff(np.log(x))
    w = max(lim.osc_window, d.size // lim.osc_blocks)
    nb = d.size // w
    blocks = d[: nb * w].reshape(nb, w)
    sig = 1.4826 * np.median(np.abs(blocks - np.median(blocks, axis=1)[:, None]), axis=1)
    for b in range(2, nb):
        base = float(np.median(sig[:b]))
        if sig[b] < lim.osc_min or sig[b] < lim.osc_ratio * base:
            continue
        if (sig[b:] < lim.osc_persist * lim.osc_ratio * base).any():
            return []
        if float(np.median(x[-w:])) < lim.osc_no_fall * float(np.median(x[b * w : (b + 1) * w + 1])):
            return []
        lo = (b - 1) * w
        level = float(np.median(x[lo : b * w + 1]))
        after = x[b * w :]
        if (
            float(np.median(after)) < lim.osc_level_up * level
            or float(np.percentile(after, lim.osc_low_pct)) < lim.osc_floor * level
        ):
            return []
        big = np.flatnonzero(np.abs(d[lo : (b + 1) * w]) >= max(lim.osc_min, lim.osc_ratio * base))
        on = lo + int(big[0]) + 1 if big.size else b * w + 1
        return [
            _sym(
                q,
                "oscillation",
                lf[on],
                swing=float(math.exp(sig[b])),
                base=float(math.exp(base)),
                noise_ratio=float(sig[b] / max(base, 1e-12)),
                n=int(x.size - on),
            )
        ]
    return []


def point_noise(x: np.ndarray) -> float:
    """The log's own noise per point, in log space: `diff_noise` over sqrt 2 (a difference carries
    two points' noise)."""
    return diff_noise(x) / math.sqrt(2)


def _been_there(x: np.ndarray, on: int, half: float, end: float) -> bool:
    """Whether the loss had already been at the end's level (>= rise_seen x it) after it first fell
    below half-way and before the rise: the end is one more crest of an oscillation."""
    below = np.flatnonzero(x[:on] < half)
    if below.size == 0:
        return False
    seen = x[1:on] >= LIMITS.rise_seen * end
    # before that first fall only a crest that rose over the first loss counts (noise in the run's
    # first descent does not); in a long log a crest is a stretch, not one heavy-tailed draw: the
    # points are judged by the median of their block of `crest_block_share` of the log
    pre = np.arange(1, on) < below[0]
    xs = block_median(x, max(1, int(x.size * LIMITS.crest_block_share)))[1:on]
    crest = (xs >= LIMITS.rise_over_first * x[0]) & (xs >= LIMITS.rise_seen * end)
    return bool((seen & ~pre).any() or (pre & crest).any())


def block_median(x: np.ndarray, w: int) -> np.ndarray:
    """Each point replaced by the median of its block of w consecutive points (w = 1: x)."""
    if w <= 1:
        return x
    nb = -(-x.size // w)
    pad = np.full(nb * w, np.nan)
    pad[: x.size] = x
    return np.repeat(np.nanmedian(pad.reshape(nb, w), axis=1), w)[: x.size]


def is_ce(run: Run) -> bool:
    """The loss is a softmax cross-entropy, as far as the log says (`ce_named`, or a language-model
    trainer whose loss is a token cross-entropy unless the task says otherwise)."""
    if _not_ce(run):
        return False
    return ce_named(run) or run.meta.get("framework") in LM_TRAINERS


def ce_named(run: Run) -> bool:
    """The log itself names the loss a cross-entropy (a task, a vocabulary or a class count in its
    configuration, a key named for it), not only its trainer's default: only then is a negative
    value absurd (a trainer's default is no proof: a signed objective printed in its format is not
    one)."""
    meta = run.meta
    if _not_ce(run):
        return False
    if meta.get("vocab_size") or meta.get("n_classes") or meta.get("ce_from"):
        return True  # `ce_from`: a perplexity or bpc printed beside the loss (sources.loss_kind)
    if (meta.get("task_hint") or meta.get("task")) in ("sft", "pretrain", "classification"):
        return True
    return bool(_CE_KEY.search(str(meta.get("loss_key") or "").lower()))


def _not_ce(run: Run) -> bool:
    """A regression's MSE, a preference loss (-log sigmoid of a margin): no softmax range."""
    task = run.meta.get("task_hint") or run.meta.get("task")
    return task in NOT_CE_TASKS or any(run.has(c) for c in PREFERENCE_SIGNS)


#: frameworks (the readers' `meta["framework"]`) whose training loss is a language model's token
#: cross-entropy by default (issue 25: "HF/Megatron/nanoGPT/TRL are LM CE by default"; TRL's SFT
#: logs are the HF Trainer's dicts)
LM_TRAINERS = ("megatron", "transformers", "nanoGPT", "litgpt", "mlx-lm", "torchtitan")
#: tasks whose loss is no softmax cross-entropy
NOT_CE_TASKS = ("regression", "dpo", "preference")
#: columns only a preference trainer logs (TRL's DPO/ORPO/KTO: rewards/chosen ...): its loss is not a CE
PREFERENCE_SIGNS = ("rewards_chosen", "rewards_margins")


#: a series named for a softmax cross-entropy: lm_loss, loss_ce, xent, nll, mlm, cross_entropy
_CE_KEY = re.compile(r"(^|[_\W])(ce|xent|nll|lm|mlm)([_\W]|$)|cross.?entropy")


def _absurd(run: Run, q: Quantities) -> list[Symptom]:
    """A loss no run of its kind prints: >= 1e6, or a cross-entropy (`is_ce`) above what any
    vocabulary allows after its first `ce_grace_steps` steps (the symptom then begins at the first
    point when every point before was out of range too; a stretch out of range between in-range
    points, the last one among them, is a spike for the jump rules), or one the log names a CE
    (`ce_named`) below 0."""
    lf = q.finite_loss
    x = q.loss[lf]
    if x.size == 0:
        return _absurd_component(run, q)
    # a print at a cross-entropy's clamp ceiling (Caffe's 87.3365) says the loss is a cross-entropy
    ce = is_ce(run) or _at_a_clamp(x).any()
    bad = np.abs(x) >= LIMITS.absurd
    if ce:
        # above any vocabulary's range after the first forward passes (before them an init's large
        # logits may still sit there: bad_init judges those)
        settled = q.steps[lf] > LIMITS.ce_grace_steps
        bad |= (x > LIMITS.ce_max) & settled
    if ce_named(run):
        bad |= x < -1e-6  # below 0 at any step: only where the log itself says it is a CE
    if not bad.any():
        return []
    j = int(np.argmax(bad))
    huge = bad & ((np.abs(x) >= LIMITS.absurd) | (x < -1e-6))
    if not huge.any() and 0 < j and x[-1] <= LIMITS.ce_max and x[j - 1] <= LIMITS.ce_max:
        return []  # a cross-entropy that left its range after in-range points and came back into it: the
        # jump rules' spike (a batch at 28 nats between prints at 3.2), not a loss of another kind
    if ce and bool((x[:j] > LIMITS.ce_max).all()):
        j = 0  # out of range from the first forward on (the grace steps included): it begins there
    if _absurd_between(x, bad, j):
        return []  # the jump rules' spike: 0.2586, 3.2e14, 0.2525
    came_back = _absurd_came_back(q, lf, x, bad, j)
    if came_back is not None:
        return came_back
    return [
        _sym(
            q,
            "absurd",
            lf[j],
            loss=float(x[j]),
            ce=ce,
            at_start=bool(j == 0),
            negative=bool(x[j] < 0),
            first=float(x[0]),
        )
    ]


def _absurd_between(x: np.ndarray, bad: np.ndarray, j: int, lim: SymptomLimits = LIMITS) -> bool:
    """An absurd stretch of at most `absurd_back_points` points after in-range ones, followed only by
    in-range points back under `recovered` x the median of those before it: one bad interval the
    run came back from, a spike however large (a detector's loss at 3.2e14 for one print, then 0.25
    again), which the jump rules date and name; the stretch says nothing the spike does not."""
    if j == 0:
        return False
    e = j + int(np.argmin(bad[j:])) if not bad[j:].all() else x.size  # the first point back in range
    if e - j > lim.absurd_back_points or e == x.size or bad[e:].any():
        return False
    before = x[max(0, j - lim.history) : j]
    base = float(np.median(before))
    return base > 0 and bool((x[e:] > 0).all()) and float(np.median(x[e:])) < lim.recovered * base


def _absurd_came_back(q: Quantities, lf: np.ndarray, x: np.ndarray, bad: np.ndarray, j: int) -> list[Symptom] | None:
    """An absurd stretch the log opens with that the loss left for good: at most `absurd_back_points`
    points out of range, then >= `absurd_back_after` points in range, all of them `huge_jump` x
    below the stretch. With no point before it, the points after it are its baseline: a mid-run
    excerpt whose first prints are 3e14 and whose next ones are 0.4 shows a spike the run came back
    from, not weights that were never sane (a stretch after in-range points is the jump rules' to
    judge). None when it is not one."""
    lim = LIMITS
    if j != 0:
        return None
    e = int(np.argmin(bad)) if not bad.all() else x.size  # the first point back in range
    after = x[e:]
    if e > lim.absurd_back_points or after.size < lim.absurd_back_after or bad[e:].any() or (after <= 0).any():
        return None
    base = float(np.median(after))
    peak = float(np.max(np.abs(x[:e])))
    if peak < lim.huge_jump * float(np.max(after)):
        return None
    return [
        _sym(
            q,
            "spike",
            lf[0],
            loss=float(x[0]),
            base=base,
            ratio=float(x[0]) / base,
            recovered=True,
            before=0,
            after=int(after.size),
            climb=False,
            opening=True,
        )
    ]


def _absurd_component(run: Run, q: Quantities) -> list[Symptom]:
    """Where the log holds no training loss (a GAN's two adversaries, whose sum is none), a
    component loss it printed at `absurd` or beyond: no term of a sane loss reaches it (BasicSR's
    l_g_pix at 1e27 while its perceptual terms print in the hundreds)."""
    if q.n == 0:
        return []
    for step, comps in sorted(run.event("loss_components").items()):
        huge = (
            [k for k, v in comps.items() if _is_number(v) and abs(v) >= LIMITS.absurd]
            if isinstance(comps, dict)
            else []
        )
        if huge:
            row = min(int(np.searchsorted(q.steps, int(step))), q.n - 1)
            v = float(comps[huge[0]])
            return [
                _sym(q, "absurd", row, loss=v, ce=False, at_start=row == 0, negative=v < 0, first=v, name=str(huge[0]))
            ]
    return []


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: losses that are a clamp's ceiling, not a measurement: the true class's probability reached 0 and the
#: framework's log clamped it (Caffe's SoftmaxWithLoss at FLT_MIN, Keras's cross-entropy clip at 1e-7)
CLAMP_CEILINGS = ((-math.log(1.1754943508222875e-38), "caffe_flt_min"), (-math.log(1e-7), "keras_epsilon"))
#: within the printed digits (Caffe prints 87.3365, Keras 16.1181)
CLAMP_TOL = 1e-5
#: points at one clamp's ceiling that make a constant loss: two prints of a value no measurement gives
#: (three for any other value: `constant_points`)
CLAMP_CONSTANT_POINTS = 2


def _at_a_clamp(x: np.ndarray) -> np.ndarray:
    """Which points of `x` sit at a clamp's ceiling (`CLAMP_CEILINGS`): only a cross-entropy prints one."""
    return np.logical_or.reduce([np.abs(x - c) <= CLAMP_TOL * c for c, _ in CLAMP_CEILINGS])


def _at_clamp(x: np.ndarray) -> bool:
    """Every point of `x` sits at the same clamp's ceiling (`CLAMP_CEILINGS`)."""
    return any(bool((np.abs(x - c) <= CLAMP_TOL * c).all()) for c, _ in CLAMP_CEILINGS)


def _eval_frozen(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """The evaluation loss exactly the same, not 0, at the last >= `eval_frozen_points` evaluations,
    printed fine enough to show a 1% change (the finest digit the evaluation and training losses
    show: one printer prints both), while the training loss still moved between them: the model's
    outputs on held-out data no longer change, saturated or collapsed (facenet's triplet val_loss
    0.2000, its margin, at every epoch; a Keras MLP's val_loss 6.9442 three epochs running). Dated at
    the first of them."""
    if not run.has("eval_loss"):
        return []
    ev = run.col("eval_loss")
    rows = np.flatnonzero(run.logged("eval_loss") & np.isfinite(ev))
    v = ev[rows]
    if v.size < lim.eval_frozen_points or float(v[-1]) == 0.0:
        return []
    last = float(v[-1])
    k = int(np.argmax(v[::-1] != last)) if bool((v != last).any()) else int(v.size)
    if k < lim.eval_frozen_points:
        return []
    train = q.loss[q.finite_loss[(q.finite_loss >= rows[-k]) & (q.finite_loss <= rows[-1])]]
    if train.size <= 1 or float(np.ptp(train)) == 0.0:
        return []  # the training loss froze too: the whole-run rules judge it
    if _sticky_eval(run, q, rows) or _lr_decayed(q, rows[-k:]):
        return []
    seen = np.concatenate([v[: lim.history], q.loss[q.finite_loss[: lim.history]]])
    if finest_print(seen) / abs(last) > lim.constant_resolution:
        return []
    return [_sym(q, "eval_constant", int(rows[-k]), level=last, n=k)]


def _sticky_eval(run: Run, q: Quantities, rows: np.ndarray) -> bool:
    """The evaluation loss is printed on (nearly) every training row of a log whose rows are not
    epochs (nor rows the reader knows carry one evaluation each: `eval_at_epoch_end`, Keras's last
    bar of an epoch): a progress bar or logger repeating the last validation's value until the next
    one (NeMo's `val_loss: 4.106` on every iteration line), so equal values are one evaluation, not
    many."""
    meta = run.meta
    per_epoch = meta.get("steps_from") == "epoch" or meta.get("epoch_rows_from") is not None
    each_once = per_epoch or bool(meta.get("eval_at_epoch_end"))
    return not each_once and rows.size >= LIMITS.sticky_eval_share * q.finite_loss.size


def _lr_decayed(q: Quantities, rows: np.ndarray) -> bool:
    """The LR logged on `rows` is at most `frozen_lr_share` of the log's largest, or at most `lr_tiny`,
    or falls by `frozen_lr_fall` x over them (a plateau scheduler or a decay's tail: Keras's
    ReduceLROnPlateau halving 7.8e-6 down to 2.4e-7): a held-out loss that no longer moves then is the
    schedule's end, not outputs that stopped responding."""
    lr = q.lr[np.isfinite(q.lr)]
    here = q.lr[rows]
    here = here[np.isfinite(here)]
    if not (lr.size and here.size):
        return False
    top = float(np.max(here))  # (an excerpt of the tail alone shows no peak: an LR this small is one)
    fell = float(here[0]) >= LIMITS.frozen_lr_fall * float(here[-1])  # a scheduler cutting it meanwhile
    return top <= LIMITS.frozen_lr_share * float(np.max(lr)) or top <= LIMITS.lr_tiny or fell


def _zero_or_constant(run: Run, q: Quantities) -> list[Symptom]:
    """Every loss point exactly 0 (>= 3 points), or exactly equal (`identical`) and not at a chance
    level (`_chance_plateau` names those with their K). Zeros while gradients flow (`zero_grad_live`)
    are no loss the weights saw; zeros the log ends on after a sane loss with no gradient
    (`zero_grad_dead`) are one at any length."""
    lf = q.finite_loss
    x = q.loss[lf]
    zeros = lf[x == 0.0]
    if zeros.size and _grad_at(q, zeros, np.median) >= LIMITS.zero_grad_live:
        return []
    if _zero_at_start(run, q, x):
        return [_sym(q, "zero", lf[0], n=int(x.size))]
    tail = _zero_tail(q, lf, x)
    if tail is None:
        tail = _zero_collapse(run, q, lf, x)
    if tail is not None:
        return [_sym(q, "zero", lf[tail], n=int(x.size - tail))]
    if x.size < LIMITS.constant_points:
        # two prints at a clamp's ceiling (Caffe's 87.3365 at iterations 0 and 100) are no measurement
        clamp = x.size >= CLAMP_CONSTANT_POINTS and _at_clamp(x)
        return [_sym(q, "constant", lf[0], level=float(x[0]), n=int(x.size))] if clamp else []
    z = int(np.argmax(x == 0.0))
    # from the start, or straight down from a loss no four-decimal log rounds to 0 (a loss that
    # converged towards 0 and printed 0.0 is the run done, not broken)
    if x[z] == 0.0 and _zero_from(q, lf, x, z) and (z == 0 or float(x[z - 1]) >= LIMITS.zero_drop_from):
        return [_sym(q, "zero", lf[z], n=int((x == 0.0).sum()))]
    ch = chance_of(run, float(x[0]))
    if not (identical(run, q, x) or _still(run, q, lf, x)):
        return []
    if ch is not None and abs(float(x[0]) - ch[0]) <= LIMITS.chance_tol * ch[0]:
        return []  # at ln K: `_chance_plateau` names it with its K
    return [_sym(q, "constant", lf[0], level=float(x[0]), n=int(x.size))]


def _still(run: Run, q: Quantities, lf: np.ndarray, x: np.ndarray) -> bool:
    """The whole log within `still_rel` of its median (not 0) over >= `span_steps` trainer steps,
    printed with digits finer than that band (`still_print` of it): equal to five significant digits where
    learning changes the 4th-5th. Coarser prints that agree are `identical`'s to judge."""
    med = float(np.median(x))
    if x.size < LIMITS.constant_points or med <= 0 or not steps_known(run) or bar_redraw(run, q, x.size):
        return False
    if finest_print(x) > LIMITS.still_print * LIMITS.still_rel * med:
        return False
    span = int(q.steps[lf[-1]] - q.steps[lf[0]])
    return span >= LIMITS.span_steps and float(np.max(np.abs(x - med))) <= LIMITS.still_rel * med


def _grad_at(q: Quantities, rows: np.ndarray, how=np.median) -> float:
    """`how` (median, max) of the finite gradient norms logged on `rows`; NaN when none is."""
    g = q.grad_norm[rows]
    g = g[np.isfinite(g)]
    return float(how(g)) if g.size else math.nan


def _zero_tail(q: Quantities, lf: np.ndarray, x: np.ndarray) -> int | None:
    """The first of the zeros the log ends on, when the loss before them was >= zero_drop_from and
    every one of them has a gradient norm logged, all <= zero_grad_dead: the loss went to exactly 0
    in one interval and nothing flows back (an empty label mask, a loss that lost its targets)."""
    nz = np.flatnonzero(x != 0.0)
    t = int(nz[-1]) + 1 if nz.size else 0
    if t == 0 or t >= x.size or float(x[t - 1]) < LIMITS.zero_drop_from:
        return None
    g = q.grad_norm[lf[t:]]
    dead = bool(np.isfinite(g).all()) and float(np.max(g)) <= LIMITS.zero_grad_dead
    return t if dead else None


def _zero_collapse(run: Run, q: Quantities, lf: np.ndarray, x: np.ndarray, lim: SymptomLimits = LIMITS) -> int | None:
    """The first row of a tail that ends on an exact 0, each of whose losses is >= 0 and at most
    `collapse_rel` of the loss just before it, that loss >= zero_drop_from and at most
    `collapse_steps` steps earlier (the trainer's steps): one update took a sane loss to ~0 and it
    stayed there (12.18, then 1.8e-6, then 0.0): no gradient step learns that much; the loss lost
    what it is measured on."""
    if x.size <= 1 or x[-1] != 0.0:
        return None
    nz = np.flatnonzero(x >= lim.zero_drop_from)
    if not nz.size:
        return None
    t = int(nz[-1]) + 1  # the first print of the tail below zero_drop_from
    if t >= x.size or bool((x[t:] < 0).any()) or float(np.max(x[t:])) > lim.collapse_rel * float(x[t - 1]):
        return None
    if not steps_known(run) or int(q.steps[lf[t]] - q.steps[lf[t - 1]]) > lim.collapse_steps:
        return None
    return t


def _zero_at_start(run: Run, q: Quantities, x: np.ndarray) -> bool:
    """Every loss exactly 0 on >= `zero_start_points` points of a log that shows the run's first
    updates (the trainer's steps, the first at or before `trend_after`): no model has learnt its task
    to a loss of 0 that early, so the loss is empty (nothing supervised), not converged."""
    if x.size < LIMITS.zero_start_points or bool((x != 0.0).any()) or not steps_known(run):
        return False
    first_epoch = run.meta.get("first_epoch")
    if isinstance(first_epoch, (int, float)) and first_epoch >= 1:
        return False
    return int(q.steps[q.finite_loss[0]]) <= LIMITS.trend_after


def _zero_from(q: Quantities, lf: np.ndarray, x: np.ndarray, z: int) -> bool:
    """The loss is exactly 0 from row z on: >= zero_share of all the rows (as before), or of the
    rows from z to the end (>= constant_points of them) while no gradient flows there (the grad
    norm, where logged, is 0: a loss of exactly 0 has a zero gradient; zeros printed while the norm
    stays up are a logging filter's, not the loss the weights saw)."""
    if float(np.mean(x == 0.0)) >= LIMITS.zero_share:
        return True
    if x.size - z < LIMITS.constant_points or float(np.mean(x[z:] == 0.0)) < LIMITS.zero_share:
        return False
    g = q.grad_norm[lf[z:]]
    g = g[np.isfinite(g)]
    return not (g.size and float(np.median(g)) > 0)


def identical(run: Run, q: Quantities, x: np.ndarray) -> bool:
    """>= constant_points finite losses, all exactly equal and not 0, printed fine enough to show a 1%
    fall (or exactly 1, the ceiling of a bounded loss such as 1 - dice), and not a progress bar's
    redraw (`scalars.bar_redraw`)."""
    if x.size < LIMITS.constant_points or float(np.ptp(x)) != 0.0 or x[0] == 0:
        return False
    if print_resolution(float(x[0])) / abs(float(x[0])) > LIMITS.constant_resolution and float(x[0]) != 1.0:
        return False
    return not bar_redraw(run, q, x.size)


def _stuck_tail(run: Run, q: Quantities) -> list[Symptom]:
    """The log ends on >= `stuck_points` losses equal to the digits printed (or, printed with more
    digits than fp32 holds, within `f32_rel` of each other), fine enough to show a 1% change, not 0,
    not a progress bar's redraw, after points that moved by more than rounding explains
    (`_beyond_rounding`): the loss moved, then stopped changing for good (a network whose outputs went
    constant: dead units, a saturated output, weights that no longer update). At ln K it is a
    chance plateau (with its K), else a stall; dated at the first of the equal points. A whole log
    equal to fp32's precision but not to the last digit is a constant loss too."""
    lf = q.finite_loss
    x = q.loss[lf]
    if x.size < LIMITS.stuck_points or float(np.ptp(x)) == 0.0:
        return []  # a whole log of exactly equal values is `_zero_or_constant`'s / `_chance_plateau`'s
    v = float(x[-1])
    moved = np.flatnonzero(np.abs(x - v) > LIMITS.f32_rel * abs(v))
    t = int(moved[-1]) + 1 if moved.size else 0  # the first point of the equal tail
    if x.size - t < LIMITS.stuck_points or v == 0.0 or not _fine_in(v, x) or _tail_redraw(run, q, lf[t:]):
        return []
    if t and not _beyond_rounding(x[: t + 1], v, x.size - t):
        return []  # a running mean that settles below its print's resolution
    ch = chance_of(run, v)
    if ch is not None and abs(v - ch[0]) <= LIMITS.chance_tol * ch[0]:
        return [
            _sym(
                q,
                "chance",
                lf[t],
                level=v,
                chance=ch[0],
                k=ch[1],
                n=int(x.size - t),
                tail=True,
                known=count_named(run),
            )
        ]
    if t == 0:
        return [_sym(q, "constant", lf[0], level=v, n=int(x.size), tail=True)]
    return [_sym(q, "stuck", lf[t], level=v, n=int(x.size - t), before=float(x[t - 1]))]


def _beyond_rounding(x: np.ndarray, v: float, k: int) -> bool:
    """k equal prints are more than rounding can make of a loss that still moves: its last
    `stuck_points` steps up to and into the tail were u units of the print's last digit (median), so
    one step rounds to no change with a chance of about 1/u, and k - 1 of them in a row with
    (1/u)^(k-1), which must be under `stuck_chance` (a Keras bar's epoch mean late in an epoch moves by
    a unit or two between redraws and repeats itself; a loss that moved by 79 units and then printed
    the same value three times did not round to it)."""
    recent = x[-(LIMITS.stuck_points + 1) :]
    # the print's last digit: the finest of these values' (1.0960 reads back as 1.096)
    res = finest_print(recent)
    units = float(np.median(np.abs(np.diff(recent)) / res))
    return units > 1 and (k - 1) * math.log(1.0 / units) <= math.log(LIMITS.stuck_chance)


def fine_print(v: float) -> bool:
    """v is printed fine enough to show a change of `constant_resolution` (or is exactly 1, the ceiling
    of a bounded loss such as 1 - dice)."""
    return print_resolution(v) / abs(v) <= LIMITS.constant_resolution or v == 1.0


def _fine_in(v: float, x: np.ndarray) -> bool:
    """v is printed fine enough (`fine_print`), or the finest digit its column shows elsewhere is:
    a printer that shows 0.321375 prints an exact 0.5 as `0.5` (`%g` and Python's shortest repr drop
    the zeros), so the short print is no coarse one; a fixed number of decimals (HF's 4: 1.1406, then
    0.0001) shows no finer digit than v's own."""
    if fine_print(v):
        return True
    return finest_print(x[: LIMITS.history]) / abs(v) <= LIMITS.constant_resolution


def _tail_redraw(run: Run, q: Quantities, rows: np.ndarray) -> bool:
    """The rows are progress-bar points past the run's first BAR_CADENCE steps, over fewer than
    BAR_CADENCE steps: what a bar may redraw between refreshes (`scalars.bar_redraw`'s rule)."""
    span = int(q.steps[rows[-1]] - q.steps[rows[0]])
    return run.meta.get("framework") == "tqdm" and span < BAR_CADENCE and int(q.steps[rows[0]]) >= BAR_CADENCE


def steps_known(run: Run) -> bool:
    """The log's steps are the trainer's steps, not line numbers or epochs the reader counted."""
    return run.meta.get("steps_from", "log") == "log"  # set by the text readers ("numbered", "epoch")


def _repeats(run: Run, q: Quantities) -> list[Symptom]:
    """A block of `repeat_block` consecutive, distinct losses (printed to >= 3 significant digits)
    that recurs exactly at later steps, beyond what the log's own few printed values make likely
    (`stuck_chance`): the same batches gave the same losses, so the weights did not change in
    between (a second epoch repeating the first one's losses)."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    b = LIMITS.repeat_block
    if x.size < 2 * b or x.size > 100000 or identical(run, q, x):
        return []
    st = q.steps[lf]
    w = np.lib.stride_tricks.sliding_window_view(x, b)
    rows = np.flatnonzero(np.all(np.diff(np.sort(w, axis=1), axis=1) != 0, axis=1))
    if rows.size <= 1:
        return []  # no second block to recur
    blocks = np.ascontiguousarray(w[rows], dtype=np.float64).view(np.dtype((np.void, 8 * b))).ravel()
    _, first, inv = np.unique(blocks, return_index=True, return_inverse=True)
    start = rows[first[inv.reshape(-1)]]  # each block's first occurrence
    # the chance that a printed value comes again: its print's resolution over the spread of the
    # loss from one print to the next (at most the density at the mode of that spread)
    sigma = diff_noise_abs(x)
    pairs = rows.size * (rows.size - 1) / 2
    for k in np.flatnonzero((rows >= start + b) & (st[rows] > st[start + b - 1]))[:100]:
        i, j = int(rows[k]), int(start[k])
        if not all(
            v and print_resolution(float(v)) / abs(float(v)) <= LIMITS.constant_resolution for v in x[i : i + b]
        ):
            continue
        # a coarse print (3 significant digits over a flat, noisy stretch) takes few values: a block
        # of them recurs somewhere by chance (expected recurrences: pairs of blocks x the chance that
        # one block's values come again), which is no evidence of the same batches
        p = (
            min(1.0, max(print_resolution(float(v)) for v in x[i : i + b]) / (math.sqrt(2 * math.pi) * sigma))
            if sigma > 0
            else 1.0
        )
        if pairs * p**b > LIMITS.stuck_chance:
            continue
        return [_sym(q, "repeat", lf[i], first=int(st[j]), again=int(st[i]), n=b)]
    return []


def _recurring(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """Single losses that come back exactly at later, non-adjacent prints (`_returns`) at least
    `recur_min` times, beyond what chance makes of the log's spread and print (`_returns_by_chance`):
    a handful of values cycling is the same batches through weights that do not change (a model
    whose updates never land: DDP ranks out of step, an optimizer stepping other tensors). A block
    of them recurring in order is `_repeats`'s."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if not lim.recur_points <= x.size <= lim.recur_max_points or float(np.ptp(x)) == 0.0 or (x == 0).any():
        return []
    # printed fine enough (the finest print's step: 3.7000 reads back as 3.7)
    if finest_print(x) > lim.constant_resolution * float(np.min(np.abs(x))) or _repeats(run, q):
        return []
    hits = _returns(x, q.steps[lf])
    if (
        len(hits) < max(lim.recur_min, lim.recur_returns_share * x.size)
        or _returns_by_chance(x, len(hits)) > lim.stuck_chance
    ):
        return []
    j, i = hits[0]
    return [
        _sym(q, "recur", lf[i], first=int(q.steps[lf[j]]), again=int(q.steps[lf[i]]), n=len(hits), level=float(x[i]))
    ]


def _returns(x: np.ndarray, st: np.ndarray) -> list[tuple[int, int]]:
    """(earlier row, row) for each loss equal to one printed before, neither on the print just before
    it (a line logged twice) nor at the same step (ranks printing one all-reduced value)."""
    last: dict[float, int] = {}
    out = []
    for i, v in enumerate(x.tolist()):
        j = last.get(v)
        if j is not None and i - j > 1 and st[i] > st[j]:
            out.append((j, i))
        last[v] = i
    return out


def _returns_by_chance(x: np.ndarray, k: int) -> float:
    """P(>= k exact returns) if each pair of non-adjacent prints agreed by chance: a Poisson tail with
    mean pairs x p, p the chance that two draws of the log's own spread print alike (the print's
    usual step over 2 sqrt(pi) sigma; sigma the smaller of the point-to-point and the overall robust
    spread, so that a drifting loss is judged on its local noise)."""
    res = float(np.median([print_resolution(float(v)) for v in x]))  # the usual print's step (7 digits: 1e-6 at 1.x)
    sig = min(diff_noise_abs(x), 1.4826 * float(np.median(np.abs(x - np.median(x)))))
    if sig <= 0:
        return 1.0
    n = x.size
    lam = (n * (n - 1) / 2 - (n - 1)) * min(1.0, res / (2 * math.sqrt(math.pi) * sig))
    if k <= lam:
        return 1.0
    terms = [-lam + i * math.log(lam) - math.lgamma(i + 1) for i in range(k, k + 200)] if lam > 0 else [-math.inf]
    return float(sum(math.exp(t) for t in terms))


def diff_noise_abs(x: np.ndarray) -> float:
    """The robust sigma of one print from the point-to-point differences (absolute units)."""
    return 1.4826 * float(np.median(np.abs(np.diff(x)))) / math.sqrt(2)


def _no_fall(run: Run, q: Quantities) -> list[Symptom]:
    """A log that shows the run's start (first step <= start_steps, the steps the trainer's) with
    >= no_fall_points losses none of which fell below (1 - no_fall_tol) x the first, rising or
    >= no_fall_long points, while the LR (where logged) is not still climbing: training that makes
    no progress from the first step. (A healthy run's loss falls below its first value within its
    first logged points; one that plateaus later has fallen first.)"""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < LIMITS.no_fall_points or x[0] <= 0 or not _shows_start(run, q, lf):
        return []
    if float(np.min(x[1:])) < (1 - LIMITS.no_fall_tol) * float(x[0]) or identical(run, q, x):
        return []
    if _warming(q, lf):
        return []  # a warm-up: too early to call it stuck
    tau = kendall_tau(x[:200])
    if tau < LIMITS.rise_tau and x.size < LIMITS.no_fall_long:
        return []
    k = max(2, x.size // 5)
    end = float(np.median(x[-k:]))
    if tau >= LIMITS.rise_tau and end >= (1 + LIMITS.creep_min) * float(x[0]) and _ends_on_top(x, k, end):
        # it rose, orderly, from the run's first point and ends near its top (as `_creeps` asks):
        # a creep from the start, not a plateau
        first = float(x[0])
        return [
            _sym(
                q, "creep", lf[1], best=first, best_step=int(q.steps[lf[0]]), end=end, ratio=end / first, n=int(x.size)
            )
        ]
    return [
        _sym(
            q,
            "no_fall",
            lf[0],
            first=float(x[0]),
            low=float(np.min(x)),
            last=float(x[-1]),
            n=int(x.size),
            end_step=int(q.steps[lf[-1]]),
            rising=bool(tau >= LIMITS.rise_tau),
            tau=tau,
        )
    ]


def _rising_start(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A log of the run's start too short for `_no_fall` (`rise_start_points` to `no_fall_points`
    points) whose loss never fell below its first value and rose: Kendall's tau >= rise_start_tau and
    the last point >= `diverged` x the first, the LR (where logged) not still warming up."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if not lim.rise_start_points <= x.size < lim.no_fall_points or x[0] <= 0 or not _shows_start(run, q, lf):
        return []
    if float(np.min(x[1:])) < (1 - lim.no_fall_tol) * float(x[0]) or float(x[-1]) < lim.diverged * float(x[0]):
        return []
    tau = kendall_tau(x)
    if tau < lim.rise_start_tau or _warming(q, lf):
        return []
    return [
        _sym(
            q,
            "rising_start",
            lf[1],
            first=float(x[0]),
            last=float(x[-1]),
            n=int(x.size),
            tau=tau,
            ratio=float(x[-1] / x[0]),
        )
    ]


def _start_step_up(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A log (>= `rise_start_points` points) whose loss stepped up after its first point to a level it
    keeps: every later point >= `diverged` x the first, and the step >= `start_up_z` of the later
    points' own noise (GoogLeNet's 3.84 at batch 72, then 6.54, 6.48 ... 6.37 within 1% while its
    accuracy fell 0.30 -> 0.07: the run broke there and nothing since moved it back; a low first draw
    among noisy batches is within their noise). Not while the LR warms up."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < lim.rise_start_points or x[0] <= 0 or _warming(q, lf):
        return []
    after = x[1:]
    if float(np.min(after)) < lim.diverged * float(x[0]) or float(np.ptp(after)) == 0.0:
        return []  # (a tail equal to the last digit is a stuck loss: `_stuck_tail` names it, at chance too)
    level = float(np.median(after))
    noise = max(_ln_point_noise(np.log(after)), lim.start_up_noise_floor)
    if math.log(level / float(x[0])) < lim.start_up_z * noise:
        return []
    data = dict(loss=float(x[1]), base=float(x[0]), ratio=level / float(x[0]), recovered=False)
    return [_sym(q, "jump_stayed", lf[1], **data, before=1, after=int(x.size - 2), climb=False)]


def _shows_start(run: Run, q: Quantities, lf: np.ndarray) -> bool:
    """The log's steps are the trainer's and its first is at most `start_steps`, and it is not an HF
    console paste from epoch 1 on: the run's first updates are shown."""
    first_epoch = run.meta.get("first_epoch")
    if isinstance(first_epoch, (int, float)) and first_epoch >= 1:
        return False
    if run.meta.get("epoch_rows_from") == 1:
        return True  # the means of every epoch from the first: the first point is the run's first epoch
    return steps_known(run) and int(q.steps[lf[0]]) <= LIMITS.start_steps


def _epoch_rows(run: Run) -> bool:
    """One row per epoch: its step is the epoch's number, or it is the mean a Keras bar prints at
    its epoch's end (`epoch_rows_from`)."""
    return run.meta.get("steps_from") == "epoch" or run.meta.get("epoch_rows_from") is not None


def _warming(q: Quantities, lf: np.ndarray) -> bool:
    """The logged LR is still climbing over the rows (a warm-up: last >= `warm_lr_climb` x first)."""
    lr = q.lr[lf]
    lr = lr[np.isfinite(lr)]
    return bool(lr.size >= 2 and lr[-1] >= LIMITS.warm_lr_climb * lr[0] and lr[-1] > 0)


def _creep(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A loss that creeps up from its best to the end of the log (see `creep_min`): too little for
    `_divergence` (which this defers to), steady enough to stand out of the log's own noise."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < lim.creep_log or (x <= 0).any():
        return []
    found = _creeps(x, lim)
    # and without its largest point: one excursion (a gradient spike's bump that came back) is no creep
    if found is None or _creeps(np.delete(x, int(np.argmax(x))), lim) is None:
        return []
    b, best, end = found
    after = x[b:]
    rise = math.log(end / best)
    if _warming(q, lf[b:]):
        return []  # a loss that rises while the LR still warms up is a warm-up's first updates
    if _shows_start(run, q, lf) and float(np.min(x[1:])) >= (1 - lim.no_fall_tol) * float(x[0]):
        return []  # it never fell from the run's first loss: `_no_fall` / `_rising_start` judge that
    half = math.sqrt(best * end)
    on = b + int(np.argmax(after >= half))
    # (`rise_seen` in log space: a creep of a few percent has been at 90% of its end level all along)
    if (x[b + 1 : on] >= best * math.exp(lim.rise_seen * rise)).any():
        return []  # one more crest of an oscillation
    return [
        _sym(q, "creep", lf[on], best=best, best_step=int(q.steps[lf[b]]), end=end, ratio=end / best, n=int(after.size))
    ]


def _creeps(x: np.ndarray, lim: SymptomLimits) -> tuple[int, float, float] | None:
    """(row of the best, the best, the end level) when the points after the log's best rise to its
    end by `creep_min` to `diverged` x, orderly (`creep_tau`), beyond their noise (`rise_z`) and
    above three quarters of the points before the end; else None."""
    best, b = rolling_best(x)
    after = x[b:]
    k = max(2, x.size // 5)
    end = float(np.median(x[-k:]))
    if (
        after.size < lim.creep_points
        or b >= x.size - k
        or end < (1 + lim.creep_min) * best
        or end >= lim.diverged * best
    ):
        return None
    if (
        kendall_tau(after) < lim.creep_tau
        or math.log(end / best) < lim.rise_z * point_noise(after)
        or not _ends_on_top(x, k, end)
    ):
        return None
    return b, best, end


def _ends_on_top(x: np.ndarray, k: int, end: float) -> bool:
    """The end level (the last `k` points' median) is at or above three quarters of the points before
    them: a rise that holds at the end, not one more crest the log came back from."""
    return end >= float(np.percentile(x[:-k], 75))


def _short_creep(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A log too short for `_creep` (`creep_points` to `creep_log` points) whose loss rises across
    the whole of it, more orderly than noise allows (`rise_p_value` <= `short_rise_p`) and by at
    least `creep_min`: a pasted excerpt of five epochs, 32.0 -> 33.9 -> 35.8 -> 37.6 -> 39.5, shows a
    rise however few its points. The run's first updates rising are `_rising_start`'s to judge, and
    a warm-up that still climbs is too early to judge."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if not lim.creep_points <= x.size < lim.creep_log or (x <= 0).any() or _shows_start(run, q, lf):
        return []
    first, end = float(np.median(x[:2])), float(np.median(x[-2:]))
    if not _rises_short(x, lim) or _warming(q, lf):
        return []
    # without its largest point the log must still rise: one excursion near the end (a gradient
    # spike's bump that came back) moves a median of two, a creep of the whole excerpt does not
    rest = np.delete(x, int(np.argmax(x)))
    if not (
        _rises_short(rest, lim) or (_rises_short(rest, lim, lim.short_rise_p_rest) and _accuracy_falls(run, lf, lim))
    ):
        return []
    kind = "creep" if end < lim.diverged * first else "rise"
    data: dict[str, Any] = dict(best=first, best_step=int(q.steps[lf[0]]), end=end, ratio=end / first, n=int(x.size))
    if kind == "rise":
        data["grad_ratio"] = None
    return [_sym(q, kind, lf[1], **data)]


def _accuracy_falls(run: Run, rows: np.ndarray, lim: SymptomLimits) -> bool:
    """The training accuracy logged on every one of `rows` falls across them in an order noise makes
    this rarely (`short_rise_p`): a second series that says the same as a rising loss."""
    if not run.has("accuracy"):
        return False
    acc = run.col("accuracy")[rows]
    return bool(np.isfinite(acc).all()) and rise_p_value(-acc) <= lim.short_rise_p


def _rises_short(x: np.ndarray, lim: SymptomLimits, p: float | None = None) -> bool:
    """The median of the last two points >= (1 + `creep_min`) x that of the first two, and the
    points' order rises more than noise allows (`rise_p_value` <= `p`, `short_rise_p` by default)."""
    first, end = float(np.median(x[:2])), float(np.median(x[-2:]))
    return end >= (1 + lim.creep_min) * first and rise_p_value(x) <= (lim.short_rise_p if p is None else p)


def _saturated(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """Every printed loss is its row's error rate times what a saturated sample costs (`SATURATED_COSTS`:
    Keras's clip, 15.9424 to 16.1181; torch's BCELoss clamp, 100): `loss: 7.4283 - accuracy: 0.5391` is
    0.4609 x 16.1181. Each output sits at exactly 0 or 1, so a right sample costs nothing and a wrong
    one the clamp, and no gradient flows through a clipped output: the outputs are saturated (an
    activation that does not squash, a softmax over one unit), whatever the curve's shape. On at least
    `saturated_rows` rows and `saturated_share` of those with an accuracy strictly between 0 and 1."""
    if not run.has("accuracy"):
        return []
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    acc = run.col("accuracy")[lf]
    ok = np.isfinite(acc) & (acc > 0) & (acc < 1) & (q.loss[lf] > 0)
    rows, acc = lf[ok], acc[ok]
    if rows.size < lim.saturated_rows:
        return []
    x = q.loss[rows]
    fits = saturated_cost(x / (1.0 - acc))  # what each wrong sample cost, if the right ones cost nothing
    if int(fits.sum()) < lim.saturated_rows or float(fits.mean()) < lim.saturated_share:
        return []
    k = int(np.argmax(fits))
    share = float(1.0 - acc[k])
    return [
        _sym(
            q,
            "saturated",
            int(rows[k]),
            level=float(x[k]),
            share=share,
            clamp=float(x[k]) / share,
            n=int(fits.sum()),
            of=int(rows.size),
        )
    ]


def _epoch_flat(run: Run, q: Quantities) -> list[Symptom]:
    """An epoch-level log (one point per pass over the data) whose loss does not fall: >=
    epoch_points epochs from the run's first (or epoch_long anywhere), the last third's median
    within epoch_fall of the first third's or above it, with no consistent fall (Kendall's tau >
    -epoch_tau). An epoch's mean loss carries little batch noise: a run that learns lowers it pass
    after pass, so several passes without a fall are a plateau, whatever the log's length."""
    lim = LIMITS
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if not _epoch_rows(run) or x.size < lim.epoch_points or (x <= 0).any():
        return []
    from_start = int(q.steps[lf[0]]) <= 1 or run.meta.get("epoch_rows_from") == 1
    if x.size < (lim.epoch_points if from_start else lim.epoch_long) or identical(run, q, x):
        return []
    k = max(1, x.size // 3)
    first, last = float(np.median(x[:k])), float(np.median(x[-k:]))
    tau = kendall_tau(x[:200])
    if last < (1 - lim.epoch_fall) * first or tau <= -lim.epoch_tau:
        return []
    return [
        _sym(
            q,
            "epoch_flat",
            lf[0],
            first=first,
            last=last,
            n=int(x.size),
            end_step=int(q.steps[lf[-1]]),
            from_start=from_start,
            tau=tau,
        )
    ]


def _fit_flat(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """Per-period rows from the run's first (a training loss and a held-out loss on every row:
    `fit_points` or more, the first step <= 1) where neither loss fell after the first period
    (`epoch_fall`) and the training loss ends at the held-out level (`fit_gap`): the model fits
    nothing. Four such rows say it where `_epoch_flat` needs five epochs of the training loss alone,
    because the held-out loss is the second witness."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    if lf.size < lim.fit_points or not steps_known(run) or int(q.steps[lf[0]]) > 1 or not run.has("eval_loss"):
        return []
    e = run.col("eval_loss")[lf]
    x = q.loss[lf]
    if not np.isfinite(e).all() or (x <= 0).any() or (e <= 0).any() or identical(run, q, x):
        return []
    fell = float(np.min(x[2:])) < (1 - lim.epoch_fall) * float(x[1]) or float(np.min(e[1:])) < (
        1 - lim.epoch_fall
    ) * float(e[0])
    if fell or float(x[-1]) < lim.fit_gap * float(e[-1]):
        return []
    return [
        _sym(
            q,
            "fit_flat",
            lf[1],
            first=float(x[1]),
            last=float(x[-1]),
            n=int(x.size),
            end_step=int(q.steps[lf[-1]]),
            eval_first=float(e[0]),
            eval_last=float(e[-1]),
        )
    ]


def lm_ce(run: Run) -> bool:
    """The loss is a language model's token cross-entropy as far as the log says (`is_ce`, with no
    class count and no classification task)."""
    task = run.meta.get("task_hint") or run.meta.get("task")
    return is_ce(run) and not run.meta.get("n_classes") and task != "classification"


def _lm_untrained(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A language model's loss flat at or above `lm_untrained` nats over `lm_points` prints spanning
    `lm_span` steps, `lm_after` steps or more into the run: stuck near the unigram level, where a
    learning LM spends only its first few hundred steps. Flat: the last third's median is not below
    the first third's by `epoch_fall` and by `rise_z` standard errors of the log's own point noise."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < lim.lm_points or not steps_known(run) or not lm_ce(run) or (x <= 0).any():
        return []
    s0, s1 = int(q.steps[lf[0]]), int(q.steps[lf[-1]])
    if s0 < lim.lm_after or s1 - s0 < lim.lm_span or float(np.median(x)) < lim.lm_untrained:
        return []
    k = max(2, x.size // 3)
    first, last = float(np.median(x[:k])), float(np.median(x[-k:]))
    se = point_noise(x) * math.sqrt(2 / k)
    if math.log(last / first) <= min(math.log(1 - lim.epoch_fall), -lim.rise_z * se):
        return []  # it is still falling (the fall clears `rise_z` standard errors: the rise test's bar)
    return [_sym(q, "lm_untrained", lf[0], first=first, last=last, n=int(x.size), end_step=s1, level=lim.lm_untrained)]


def _metric_worst(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """The label metric printed beside the loss at its worst on every point while the loss does not
    fall (`_not_falling`): an accuracy at chance (`_acc_chance`) or an error rate at 1: a model that
    learnt nothing about its labels, visible in three points where the loss alone is only flat. The
    points must show more than the run's first moments (`_long_enough_at`, as for a loss at ln K): a
    healthy run starts at chance too."""
    if _not_ce(run):
        return []  # a regression's accuracy means nothing; a preference pair's starts at 0.5 with the loss at ln 2
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    for col in LABEL_METRICS:
        m = run.col(col)[lf] if run.has(col) else np.zeros(0)
        ok = np.isfinite(m)
        if (
            ok.sum() < max(lim.metric_points, lim.metric_cover * x.size)
            or (m[ok] < 0).any()
            or (m[ok] > lim.percent_whole).any()
        ):
            continue
        v = m[ok] / lim.percent_whole if (m[ok] > 1).any() else m[ok]  # a value above 1: printed as a percentage
        rows = lf[ok]
        if col == "error_rate":
            worst, chance, k = bool((v >= lim.error_worst).all()), 1.0, None
            fell = _collapsed_to_worst(v, x.size, lim)
            best = float(np.min(v)) if fell else None
            if not worst and fell:
                v, rows = v[-fell:], rows[-fell:]
                x, worst = q.loss[rows], True
        else:
            hit = _acc_chance(run, v, x, int(q.steps[lf[0]]), lim)
            worst, chance, k, fell, best = hit is not None, *(hit or (0.0, None)), 0, None
        s0, s1 = int(q.steps[rows[0]]), int(q.steps[rows[-1]])
        long_enough = fell or _long_enough_at(run, int(v.size), s1 - s0, True, s0)
        if worst and _not_falling(run, x, lim) and long_enough:
            return [
                _sym(
                    q,
                    "metric_worst",
                    rows[0],
                    metric=col,
                    first=float(v[0]),
                    last=float(v[-1]),
                    chance=chance,
                    k=k,
                    n=int(v.size),
                    end_step=s1,
                    loss_first=float(x[0]),
                    loss_last=float(x[-1]),
                    best_before=best,
                )
            ]
    return []


#: the columns that say how a model does on its labels, and what each is at its worst
LABEL_METRICS = ("accuracy", "error_rate")


def _collapsed_to_worst(v: np.ndarray, n_loss: int, lim: SymptomLimits) -> int:
    """How many of the last error rates sit at their worst (>= `error_worst`: every output wrong)
    after an earlier one was better, when they are >= `metric_points` and >= `metric_cover` of the
    loss's points; else 0. A run starts at its worst and gets better; one that got better and then
    went back to every output wrong collapsed (a CTC model that emits only blanks), at any step."""
    worst = v >= lim.error_worst
    tail = int(np.argmin(worst[::-1])) if not worst.all() else 0
    better_before = tail < v.size and bool((~worst[: v.size - tail]).any())
    if better_before and tail >= max(lim.metric_points, lim.metric_cover * n_loss):
        return tail
    return 0


def _acc_chance(
    run: Run, v: np.ndarray, x: np.ndarray, first: int, lim: SymptomLimits
) -> tuple[float, int | None] | None:
    """(chance accuracy, K) when every accuracy is at or below chance: at or below 1/K + `acc_margin`
    for the K the configuration names, or the K whose ln the loss fell to from above (`_fell_to`); or
    within `acc_margin` of 0.5 with the loss at a binary cross-entropy's start (`binary_low/high`).
    An accuracy of exactly 0 with no K is no evidence: Keras prints `accuracy` for regressions too,
    where it stays 0 while they learn; a loss flat at ln K is `_chance_plateau`'s to judge."""
    k = named_count(run, "n_classes")
    if k is None:
        k = _fell_to(run, x, first)
    if k is not None:
        return (1 / k, k) if (v <= 1 / k + lim.acc_margin).all() else None
    half = 1 / lim.binary_k
    level = float(np.median(x)) / math.log(lim.binary_k) if x.size else 0.0
    if (np.abs(v - half) <= lim.acc_margin).all() and lim.binary_low <= level <= lim.binary_high:
        return half, lim.binary_k
    return None


def _fell_to(run: Run, x: np.ndarray, first: int) -> int | None:
    """The K whose ln the loss's last third sits at after a first third above it by more than
    `chance_tol`, in an excerpt past the run's start (`_mid_run`): a loss that came down from an
    absurd level only as far as uniform guessing (a run's first steps fall to ln K on their way)."""
    third = max(1, x.size // 3)
    last = float(np.median(x[-third:])) if x.size else 0.0
    ch = chance_of(run, last, LIMITS.chance_above) if last > 0 else None
    if ch is None or float(np.median(x[:third])) <= ch[0] * (1 + LIMITS.chance_tol) or not _mid_run(run, first):
        return None
    return ch[1]


def _not_falling(run: Run, x: np.ndarray, lim: SymptomLimits) -> bool:
    """The loss's last third is not below its first third by `epoch_fall` and `rise_z` standard
    errors of its own point noise, or it ends at a chance level ln K (a fall from an absurd start to
    uniform guessing is no learning)."""
    if (x <= 0).any():
        return False
    k = max(1, x.size // 3)
    first, last = float(np.median(x[:k])), float(np.median(x[-k:]))
    ch = chance_of(run, last, LIMITS.chance_above)
    if ch is not None and last >= ch[0] * (1 - LIMITS.chance_tol):
        return True
    se = point_noise(x) * math.sqrt(2 / k) if x.size >= lim.metric_points else 0.0
    return math.log(last / first) > min(math.log(1 - lim.epoch_fall), -lim.rise_z * se)


def kendall_tau(x: np.ndarray) -> float:
    """Kendall's tau of x against its index: +1 rising at every pair, -1 falling, ~0 noise."""
    n = x.size
    if n < 2:
        return 0.0
    d = np.sign(x[None, :] - x[:, None])
    return float(np.triu(d, 1).sum()) / (n * (n - 1) / 2)


def rise_p_value(x: np.ndarray) -> float:
    """The chance that exchangeable noise orders n points at least as rising as x: the exact tail
    of Kendall's statistic (the inversion count of a random permutation, Mahonian numbers), ties
    counted against the rise. Exact at any length, so five points all rising (p = 1/120) are a
    trend where a normal approximation or a fixed tau bar would not say so."""
    n = int(x.size)
    if n <= 1:
        return 1.0
    inversions = int(np.triu(x[None, :] <= x[:, None], 1).sum())  # pairs i < j with x[j] <= x[i]
    counts = np.ones(1)
    for m in range(2, n + 1):  # permutations of m items by inversion count
        counts = np.convolve(counts, np.ones(m))
    return float(counts[: inversions + 1].sum() / counts.sum())


def named_count(run: Run, key: str) -> int | None:
    """The class count or vocabulary size the run's configuration names (`meta[key]`), when it is
    one: a number of two or more."""
    k = run.meta.get(key)
    if isinstance(k, (int, float)) and not isinstance(k, bool) and k >= LIMITS.binary_k:
        return int(k)
    return None


def count_named(run: Run) -> bool:
    """Whether the run's configuration names its class count or vocabulary size (the chance level
    is then the run's own, not a guess from a common K)."""
    return run.meta.get("n_classes") is not None or run.meta.get("vocab_size") is not None


def chance_of(run: Run, level: float, above: float = 0.0) -> tuple[float, int] | None:
    """(ln K, K) of the class count or vocabulary the run's configuration names, or else of the
    common K whose ln the level is within 0.2% of (or above it by up to `above`, a share of ln K)."""
    for key in ("n_classes", "vocab_size"):
        k = named_count(run, key)
        if k is not None:
            return math.log(k), k
    for k in COMMON_K:
        c = math.log(k)
        near = LIMITS.chance_match * c + LIMITS.chance_match_abs
        if -near <= level - c <= max(near, above * c):
            return c, k
    return None


def _chance_plateau(run: Run, q: Quantities) -> list[Symptom]:
    """Every point within `chance_tol` of ln K and not falling, on >= 6 points spanning >= 100
    steps (or >= 20 points); or within `chance_tight` of it (no batch noise to wait out) on >= 3
    points spanning >= 100 steps or 3 epochs (6 numbered lines); or >= 3 identical points at ln K: a
    model that has learnt nothing about its labels."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size < LIMITS.constant_points:
        return []
    level = float(np.median(x))
    ch = chance_of(run, level, 0.0 if _mid_run(run, int(q.steps[lf[0]])) else LIMITS.chance_above)
    if ch is None or level <= 0:
        return []
    c, k = ch
    span = int(q.steps[lf[-1]] - q.steps[lf[0]])
    exact = float(np.ptp(x)) == 0.0  # identical values at chance: no batch noise to wait out
    off = float(np.max(np.abs(x - c)))
    tight = off <= LIMITS.chance_tight * c
    if off > LIMITS.chance_tol * c or not (exact or _long_enough_at(run, x.size, span, tight, int(q.steps[lf[0]]))):
        return []
    third = max(1, x.size // 3)
    if float(np.median(x[-third:])) < float(np.median(x[:third])) - 0.005 * c:
        return []
    return [
        _sym(
            q,
            "chance",
            lf[0],
            level=level,
            chance=c,
            k=k,
            n=int(x.size),
            known=count_named(run),
        )
    ]


def _chance_pair(run: Run, q: Quantities, lim: SymptomLimits = LIMITS) -> list[Symptom]:
    """A log of only two losses (fewer than `constant_points`), identical to the last of >= 5
    significant digits (`fine_print`), within `chance_tight` of ln K, `span_steps` or more apart: the
    run is at uniform guessing to the digit after that many updates (a model that learnt anything
    moves its loss in the 4th digit within a few steps)."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size != lim.pair_points or float(np.ptp(x)) != 0.0 or x[0] <= 0 or not steps_known(run):
        return []
    v = float(x[0])
    ch = chance_of(run, v)
    if ch is None or abs(v - ch[0]) > lim.chance_tight * ch[0] or print_resolution(v) / v > lim.pair_resolution:
        return []
    if int(q.steps[lf[1]] - q.steps[lf[0]]) < lim.span_steps:
        return []
    known = count_named(run)
    return [_sym(q, "chance", lf[0], level=v, chance=ch[0], k=ch[1], n=2, known=known)]


def _long_enough_at(run: Run, n: int, span: int, tight: bool, first: int) -> bool:
    """Whether n points at a chance level over `span` steps show more than a run's first moments:
    >= 20 points, or >= chance_points over >= span_steps steps; with no batch noise (`tight`), three
    points over >= span_steps steps or three epochs, or in an excerpt that starts past the run's
    first `trend_after` steps (its first logged step `first`, or an epoch >= 1: a model still at
    uniform guessing after that many updates), or chance_points numbered lines."""
    how = run.meta.get("steps_from", "log")
    if n >= 20 or (n >= LIMITS.chance_points and span >= LIMITS.span_steps):
        return True
    if not tight:
        return False
    if how == "epoch" or _mid_run(run, first):
        return n >= LIMITS.constant_points
    if how == "log":
        return span >= LIMITS.span_steps
    return n >= LIMITS.chance_points


def _mid_run(run: Run, first: int) -> bool:
    """The log starts past the run's first `trend_after` updates: its first logged step (the
    trainer's) is beyond them, or the reader saw an epoch >= 1 at its start."""
    first_epoch = run.meta.get("first_epoch")
    if isinstance(first_epoch, (int, float)) and first_epoch >= 1:
        return True
    return steps_known(run) and first > LIMITS.trend_after


def _stayed_points(history: np.ndarray, med: float) -> int:
    """How many points after a gradient-norm jump, all >= 10x the median before it, show the norm
    stayed up rather than scattered there by chance: 2 for a quiet history, more for one whose own
    points reach 10x its median (`grad_stayed_chance`). `watch` judging a log that ends two points
    after a jump would otherwise call the noise of small batches a surge the full log never shows."""
    p = float(np.mean(history >= 10 * med)) if history.size else 0.0
    if p <= 0:
        return 2
    if p >= 1:
        return 10**9
    return max(2, math.ceil(math.log(LIMITS.grad_stayed_chance) / math.log(p)))


def _grad(run: Run, q: Quantities) -> list[Symptom]:
    """The gradient norm jumps >= grad_jump x its prior median (and >= 1), or its median over the
    log is >= grad_level (`grad_level_jump` when the loss also jumped in one interval: `sudden_jump`)."""
    gn = q.grad_norm[: q.healthy_end]
    rows = np.flatnonzero(np.isfinite(gn) & (gn >= 0))
    if rows.size == 0:
        return []
    g = gn[rows]
    out = []
    with np.errstate(divide="ignore"):
        lg = np.log(np.maximum(g, 1e-30))
    for j in _candidates(lg, math.log(LIMITS.grad_jump_stayed)):
        if j < 2:
            continue
        med = float(np.median(g[max(0, j - LIMITS.history) : j]))
        if med <= 0 or g[j] < LIMITS.grad_jump_floor or g[j] < LIMITS.grad_jump_stayed * med:
            continue
        back = g[j + 1 :]
        stayed = back.size >= _stayed_points(g[max(0, j - LIMITS.history) : j], med) and bool((back >= 10 * med).all())
        if stayed or g[j] >= LIMITS.grad_jump * med or _out_of_calm(lg, j):
            out.append(
                _sym(
                    q,
                    "grad_jump",
                    rows[j],
                    g=float(g[j]),
                    base=med,
                    ratio=float(g[j] / med),
                    recovered=bool((back < 3 * med).any()) if back.size else None,
                )
            )
            break
    if g.size >= 2 and float(np.median(g)) >= LIMITS.grad_level:
        level = dict(median=float(np.median(g)), top=float(np.max(g)))
        jump = sudden_jump(q)
        out.append(
            _sym(q, "grad_level_jump", jump[0], **level, **jump[1]) if jump else _sym(q, "grad_level", rows[0], **level)
        )
    return out


def _out_of_calm(lg: np.ndarray, j: int, lim: SymptomLimits = LIMITS) -> bool:
    """The gradient norm at point j (ln `lg`) stands `grad_calm_z` noise sigmas out of a calm history
    (`_baseline`, as the loss's jumps are judged; see `grad_calm_z`): the log's own scatter, not a
    fixed ratio, says it is no ordinary batch."""
    b = _baseline(lg, j, lim)
    if b is None or min(j, lim.history) < lim.grad_calm_points:
        return False
    med, sigma, _ = b
    return (float(lg[j]) - med) / max(sigma, lim.grad_calm_sigma_floor) >= lim.grad_calm_z


def sudden_jump(q: Quantities, lim: SymptomLimits = LIMITS) -> tuple[int, dict[str, float]] | None:
    """(row, facts) of the loss's largest rise from one logged point to the next when it is sudden:
    >= `diverged` x in that one interval, above every point before it, larger than the rises before
    it together (in ln loss: no build-up) and not climbed past by `diverged` x later: a spike as the
    threads name one (the loss 6.4 -> 11.4 in ten iterations of a 104B run), not a climb over many
    prints (which also rises point after point). None when the loss shows none. For
    a log whose jump rules cannot judge one (1-3 points before it: `jump_at`) while the gradient
    norm says the run is in trouble."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if x.size <= 1 or (x <= 0).any():
        return None  # no interval to jump in
    d = np.diff(np.log(x))
    j = int(np.argmax(d))
    build_up = float(np.sum(np.clip(d[:j], 0, None)))
    later = x[j + 2 :]
    if (
        d[j] < math.log(lim.diverged)
        or d[j] <= build_up
        or x[j + 1] <= float(np.max(x[: j + 1]))
        or (later.size and float(np.max(later)) >= lim.diverged * float(x[j + 1]))
    ):
        return None
    return int(lf[j + 1]), dict(loss=float(x[j + 1]), base=float(x[j]), ratio=float(x[j + 1] / x[j]))


def scale_path(run: Run, upto: int | None = None) -> tuple[float, float, int] | None:
    """(largest, smallest, row of the smallest) of the logged loss scale in rows [0, upto)."""
    s = run.col("scale")[:upto]
    rows = np.flatnonzero(np.isfinite(s))
    if rows.size == 0:
        return None
    v = s[rows]
    j = int(np.argmin(v))
    top = float(np.max(v[: j + 1]))
    return top, float(v[j]), int(rows[j])


def fast_fall(run: Run, upto: int | None = None) -> tuple[float, float, int] | None:
    """(from, to, row) of a loss scale that fell >= scale_fall x within `scale_window` logged rows
    (before row `upto`): overflow after overflow, not the occasional back-off of a healthy run."""
    s = run.col("scale")[:upto]
    rows = np.flatnonzero(np.isfinite(s))
    v = s[rows]
    if v.size < 2:
        return None
    top = -prior_min(-v, LIMITS.scale_window)  # the largest of the 10 rows before each
    hit = np.flatnonzero((top > 0) & np.isfinite(top) & (v <= top / LIMITS.scale_fall))
    if hit.size == 0:
        return None
    j = int(hit[0])
    return float(top[j]), float(v[j]), int(rows[j])


def held_before(s: np.ndarray, row: int, top: float) -> bool:
    """Whether the loss scale held one value over >= `scale_held` logged rows on its way from `top`
    down to its value at `row`: a scaler's start-up search had ended (it found a scale that fits),
    so the fall after it is overflow after overflow, however early in the run. A scale read from
    overflow lines is known only at their rows (16384 after the third step's overflow and again
    before the 18th's): the rows between count as held."""
    rows = np.flatnonzero(np.isfinite(s[: row + 1]))
    v = s[rows]
    at_top = np.flatnonzero(v >= top)
    if at_top.size == 0:
        return False
    j = int(at_top[-1])
    while j > 0 and v[j - 1] == v[j]:  # the run the last top belongs to, from its start
        j -= 1
    for k in range(j + 1, v.size + 1):
        if k == v.size or v[k] != v[j]:  # a run of one value from j to k - 1
            if int(rows[k - 1] - rows[j]) + 1 >= LIMITS.scale_held:
                return True
            j = k
    return False


def _scale(run: Run, q: Quantities) -> list[Symptom]:
    """The loss scale fell >= scale_fall x from its largest, or below 1, or to 1 from above."""
    p = scale_path(run)
    if p is None:
        return []
    top, low, row = p
    fell = fast_fall(run)
    if not (low < 1 or fell is not None or (low == 1 and top > 1)):
        return []
    if low >= 1 and fell is not None:
        top, low, row = fell
    s = run.col("scale")
    if (
        low >= 1
        and int(q.steps[0]) <= LIMITS.search_steps
        and int(q.steps[row]) <= LIMITS.search_fall_by
        and not held_before(s, row, top)
    ):
        return []  # a dynamic scaler searching down from its initial 2^16 / 2^32 at the run's start
    first = int(np.flatnonzero(np.isfinite(s) & (s <= max(low, top / LIMITS.scale_fall)))[0])
    return [_sym(q, "scale_collapse", first, top=top, low=low, low_step=int(q.steps[row]))]


def text_events(run: Run, kind: str, upto_step: int | None = None) -> list[int]:
    """Steps of the text events of `kind` the reader found (at or before `upto_step`)."""
    ev = run.event("text_events")
    steps = []
    for s, items in ev.items():
        if upto_step is not None and s > upto_step:
            continue
        if isinstance(items, list) and any(isinstance(e, dict) and e.get("kind") == kind for e in items):
            steps.append(int(s))
    return sorted(steps)


def _skips(run: Run, q: Quantities) -> list[Symptom]:
    """>= skip_rate of the logged steps skipped (the `skipped` column or overflow lines), >= 3."""
    n = max(1, int(run.logged("loss").sum()), len(run))
    early = int(q.steps[0]) <= LIMITS.search_steps  # a scaler's first search is no symptom
    if run.has("skipped"):
        sk = np.nan_to_num(run.col("skipped"), nan=0.0) > 0.5
        if early:
            sk &= q.steps > 2 * LIMITS.search_steps
        k, first = int(sk.sum()), (int(np.argmax(sk)) if sk.any() else None)
    else:
        steps = [s for s in text_events(run, "overflow") if not early or s > 2 * LIMITS.search_steps]
        k = len(steps)
        first = int(np.searchsorted(q.steps, steps[0])) if steps else None
    if first is None or k < LIMITS.skip_min or k / n < LIMITS.skip_rate:
        return []
    return [_sym(q, "skips", min(first, len(run) - 1), k=k, n=n, frac=k / n)]


def _lr(run: Run, q: Quantities) -> list[Symptom]:
    """The LR exactly 0 on every logged row (>= 3), or at most lr_tiny on all while the loss does
    not fall."""
    lr = q.lr
    rows = np.flatnonzero(np.isfinite(lr))
    if rows.size < 3:
        return []
    v = lr[rows]
    if float(np.max(np.abs(v))) == 0.0:
        if zero_lr_explained(run, q, float(q.steps[rows[-1]])):
            return []
        return [_sym(q, "lr_zero", rows[0], n=int(rows.size))]
    lf = q.finite_loss
    x = q.loss[lf]
    # a decay's tail (the LR falling to ~0 at the end of a schedule) is a run finishing: there the
    # loss must also rise clearly (>= 10%) to be a symptom, not merely fail to fall
    rise = LIMITS.tail_rise if float(v[-1]) < float(v[0]) else 1.0
    if float(np.max(v)) <= LIMITS.lr_tiny and x.size >= 3 and float(x[-1]) >= rise * float(x[0]):
        if _warming(q, rows) and int(q.steps[rows[-1]] - q.steps[rows[0]]) < LIMITS.span_steps:
            return []  # a warm-up's first steps (2.5e-8, 5e-8, ...): tiny by design; one that never ends shows longer
        return [_sym(q, "lr_tiny", rows[0], lr=float(np.max(v)), first=float(x[0]), last=float(x[-1]))]
    return []


def precision_of(run: Run) -> str | None:
    """'fp16' / 'bf16' / 'fp32' as the log shows it: the reader's meta, a loss-scale column or
    overflow lines (fp16's), the scaler `watch` saw."""
    p = run.meta.get("precision")
    if p in ("fp16", "bf16", "fp32"):
        return p
    if unit_scale(run):
        return None  # a scale of exactly 1 throughout is no scaler at work (Megatron prints it for bf16)
    if run.has("scale") or run.meta.get("scaler") or text_events(run, "overflow") or text_events(run, "loss_scale"):
        return "fp16"
    return None


def unit_scale(run: Run) -> bool:
    """The logged loss scale is exactly 1.0 on every row: no dynamic loss scaling (bf16 or fp32)."""
    s = run.col("scale")
    s = s[np.isfinite(s)]
    return bool(s.size) and bool((s == 1.0).all()) and not text_events(run, "overflow")


def fp16_prone_model(run: Run) -> str | None:
    """The model's name when it is one known to overflow in fp16."""
    for key in ("model", "model_name", "model_type", "architecture"):
        v = run.meta.get(key)
        name = str(v.get("name") or v.get("class") or "") if isinstance(v, dict) else str(v or "")
        low = name.lower()
        if low and any(p in low for p in FP16_PRONE):
            return name
    return None
