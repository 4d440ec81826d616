"""The dev/test split of the real-log corpus, fixed before any new log was labelled.

A log's split is decided by where it came from, never by what it shows, so that one project's logs
never sit on both sides:

- the *repository* of a GitHub source is `owner/name` (`https://github.com/OWNER/NAME/...`); for any
  other site it is the host and the first path part (`discuss.pytorch.org/t`,
  `stackoverflow.com/questions`); both are normalised (`normalise`: lower case, no `www.`, no
  `.git`, no trailing slash);
- test = the repositories whose normalised name hashes (sha256 of the UTF-8 name, read as an integer)
  to 0 modulo 3: a fixed third, known before any log is looked at;
- except: every repository that had a log in the corpus when this rule was written (`PINNED_DEV`)
  is dev, because lossdoctor's rules were tuned while looking at those logs.

    split_of("karpathy/nanoGPT") -> "dev"
    repository_of("https://github.com/karpathy/nanoGPT/issues/215") -> "karpathy/nanogpt"

Tune only on dev; run test once per change and publish it (docs/benchmarks.md). This file must not
change once test logs are labelled: a test asserts every manifest entry's split equals this rule.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlparse

#: the repositories with a log in the corpus on 2026-12-01 20:05 UTC (tuned on by earlier work): dev
PINNED_DEV = frozenset(
    {
        "answerdotai/modernbert",
        "butspeechfit/eend",
        "eleutherai/gpt-neox",
        "internlm/xtuner",
        "jiaquanye/tablemaster-mmocr",
        "lightning-ai/litgpt",
        "nvidia-nemo/megatron-bridge",
        "sy-xuan/pink",
        "time-moe/time-moe",
        "windylee0822/process_q_model",
        "anthonix/llm.c",
        "bigscience-workshop/megatron-deepspeed",
        "deepspeedai/megatron-deepspeed",
        "epfllm/megatron-llm",
        "facebookresearch/crystal-text-llm",
        "facebookresearch/dino",
        "facebookresearch/fairseq",
        "hiyouga/llamafactory",
        "huggingface/nanotron",
        "huggingface/transformers",
        "karpathy/nanogpt",
        "ml-explore/mlx-examples",
        "ml-explore/mlx-lm",
        "modal-labs/llm-finetuning",
        "nv-tlabs/lion",
        "open-mmlab/mmdetection",
        "pytorch/torchtitan",
        "unslothai/unsloth",
        "vpetren/gradnorm_tf",
        "ymcui/chinese-llama-alpaca",
        "yuanhuanghuang/quality",
        "zai-org/glm-4",
    }
)

TEST_RESIDUE = 0  # sha256(name) % 3 == TEST_RESIDUE -> test
MODULUS = 3


def normalise(repository: str) -> str:
    """`Owner/Name.git/` -> `owner/name`; `www.Host/part` -> `host/part`."""
    name = repository.strip().strip("/").lower()
    if name.endswith(".git"):
        name = name[: -len(".git")]
    if name.startswith("www."):
        name = name[len("www.") :]
    return name


def repository_of(source: str) -> str:
    """The normalised repository (GitHub `owner/name`) or site (`host/first-path-part`) of a URL."""
    url = urlparse(source.strip())
    host = url.netloc.lower()
    if host.startswith("www."):
        host = host[len("www.") :]
    parts = [p for p in url.path.split("/") if p]
    if host == "github.com":
        if len(parts) < 2:
            raise ValueError(f"not a repository URL: {source}")
        return normalise(f"{parts[0]}/{parts[1]}")
    if host in ("raw.githubusercontent.com",) and len(parts) >= 2:
        return normalise(f"{parts[0]}/{parts[1]}")
    if not host:
        raise ValueError(f"not a URL: {source}")
    return normalise(host + ("/" + parts[0] if parts else ""))


def split_of(repository: str) -> str:
    """ "dev" or "test" for a repository (`owner/name`) or site (`host/part`)."""
    name = normalise(repository)
    if name in PINNED_DEV:
        return "dev"
    digest = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16)
    return "test" if digest % MODULUS == TEST_RESIDUE else "dev"
