"""The JSON contract `lossdoctor.report/1` (schema in `lossdoctor/schema/report.schema.json`)."""

from __future__ import annotations

import json

from ..findings import Report


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, allow_nan=False, default=str)
