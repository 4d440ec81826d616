"""Where the assistant's turns are, learned from the tokenizer's own chat template.

Rendering a probe conversation with the template tells, without knowing the template's dialect,
what text opens an assistant turn (ChatML's `<|im_start|>assistant\\n`, Llama-3's
`<|start_header_id|>assistant<|end_header_id|>\\n\\n`, ...) and what closes it (`<|im_end|>`,
`<|eot_id|>`). Those token sequences are then found in the batch's `input_ids`: tokens inside an
assistant turn are the response, everything else that is not padding is prompt. That is the
ground truth a label mask is judged against.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger("lossdoctor")

_Q, _A = "lossdoctorprobequestion", "lossdoctorprobeanswer"


@dataclass
class ChatSpans:
    """Token ids that open and close an assistant turn, and a decoder for evidence."""

    header: list[int]
    end: list[int]
    header_text: str
    end_text: str
    tokenizer: Any
    _blank: dict[int, bool] | None = None

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatSpans | None:
        """None when there is no usable chat template (the caller falls back to heuristics)."""
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            return None
        try:
            user = [{"role": "user", "content": _Q}]
            both = user + [{"role": "assistant", "content": _A}]
            prompt = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=False)
            full = tokenizer.apply_chat_template(both, tokenize=False, add_generation_prompt=False)
        except Exception as e:  # a template that needs a system turn, tools, ...
            log.debug("chat template probe failed: %s", e)
            return None
        if not isinstance(full, str) or _A not in full or _Q not in full:
            return None
        a = full.index(_A)
        start = full.index(_Q) + len(_Q)
        # the text between the user's content and the answer, minus what closes the user turn
        closes_user = prompt[prompt.index(_Q) + len(_Q) :] if _Q in prompt else ""
        between = full[start:a]
        header_text = between[len(closes_user) :] if between.startswith(closes_user) else between
        end_text = full[a + len(_A) :]
        header = _encode(tokenizer, header_text.rstrip())
        end = _encode(tokenizer, end_text.strip())[:1]  # the end-of-turn token itself
        if not header:
            return None
        return cls(header=header, end=end, header_text=header_text, end_text=end_text.strip(), tokenizer=tokenizer)

    def response_mask(self, ids: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """(response, neutral, found) masks over an (N, T) id matrix.

        Response: from the token after an assistant header up to and including the end-of-turn
        token. Neutral: whitespace right after a header or after an end-of-turn (templates differ
        on whether it is supervised). `found` says whether any header occurred at all.
        """
        n, t = ids.shape
        response = np.zeros((n, t), dtype=bool)
        neutral = np.zeros((n, t), dtype=bool)
        h = len(self.header)
        if t < h:
            return response, neutral, False
        windows = np.lib.stride_tricks.sliding_window_view(ids, h, axis=1)
        starts = (windows == np.asarray(self.header)).all(axis=2)
        found = bool(starts.any())
        end_id = self.end[0] if self.end else None
        for i, j in zip(*np.nonzero(starts)):
            k = j + h
            while k < t and real[i, k] and self.blank(int(ids[i, k])):
                neutral[i, k] = True
                k += 1
            while k < t and real[i, k]:
                response[i, k] = True
                if end_id is not None and ids[i, k] == end_id:
                    k += 1
                    break
                if k + h <= t and starts[i, k]:
                    response[i, k] = False
                    break
                k += 1
            while k < t and real[i, k] and self.blank(int(ids[i, k])):
                neutral[i, k] = True
                k += 1
        return response, neutral, found

    def blank(self, token: int) -> bool:
        """True for a token that decodes to whitespace only (cached per id)."""
        if self._blank is None:
            self._blank = {}
        v = self._blank.get(token)
        if v is None:
            try:
                v = self.tokenizer.decode([token]).strip() == ""
            except Exception:
                v = False
            self._blank[token] = v
        return v


def _encode(tokenizer: Any, text: str) -> list[int]:
    if not text:
        return []
    try:
        return list(tokenizer.encode(text, add_special_tokens=False))
    except Exception:
        return []


def decode(tokenizer: Any, ids: list[int]) -> str | None:
    """Decoded text for evidence, special tokens kept (they are what shows a leak)."""
    if tokenizer is None or not ids:
        return None
    try:
        return tokenizer.decode(ids, skip_special_tokens=False)
    except Exception:
        return None
