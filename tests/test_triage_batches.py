"""Batch trees: sample selection, host copies and fingerprints keep the batch's own types."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch
from transformers import BatchEncoding

from lossdoctor.triage.batches import batch_size, devices, fingerprint, nbytes, select_samples, to_devices, to_host


class Pair(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


@dataclasses.dataclass
class Item:
    x: torch.Tensor
    lengths: list[int]
    shared: torch.Tensor


def test_select_samples_keeps_types_and_leaves_shared_tensors_whole():
    x = torch.arange(12.0).reshape(4, 3)
    enc = BatchEncoding({"input_ids": torch.arange(8).reshape(4, 2), "attention_mask": torch.ones(4, 2)})
    sub = select_samples(enc, [1, 3])
    assert isinstance(sub, BatchEncoding) and sub["input_ids"].tolist() == [[2, 3], [6, 7]]
    assert enc["input_ids"].shape == (4, 2)  # the original is not modified
    p = select_samples(Pair(x, torch.tensor([0, 1, 2, 3])), [2])
    assert isinstance(p, Pair) and p.x.tolist() == [[6.0, 7.0, 8.0]] and p.y.tolist() == [2]
    it = select_samples(Item(x, [3, 3, 3, 3], torch.ones(5)), [0])
    assert isinstance(it, Item) and it.x.shape == (1, 3) and it.shared.shape == (5,) and it.lengths == [3, 3, 3, 3]
    assert batch_size({"a": x, "b": torch.ones(4), "c": torch.ones(2, 9)}) == 4


def test_host_copy_is_independent_and_fingerprint_tracks_content():
    b = {"x": torch.randn(4, 3), "ids": torch.arange(4)}
    h = to_host(b)
    b["x"][0, 0] = 123.0
    assert h["x"][0, 0] != 123.0
    assert nbytes(h) == 4 * 3 * 4 + 4 * 8
    back = to_devices(h, devices(b))
    assert back["ids"].device == b["ids"].device and torch.equal(back["ids"], b["ids"])
    f1 = fingerprint(h)
    assert f1 == fingerprint(to_host(h))
    h["ids"][1] = 7
    assert fingerprint(h) != f1
