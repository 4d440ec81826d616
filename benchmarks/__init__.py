"""Benchmarks: the fault zoo (`python -m benchmarks.zoo`) and the overhead comparison
(`python benchmarks/overhead.py`).

Benchmarks measure *this checkout*: when run from a source tree, its `src/` goes first on the
import path, so an older installed copy of lossdoctor is never the one measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"
if (_SRC / "lossdoctor").is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))
