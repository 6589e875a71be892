"""The planner replays its corpus: every recorded observation gives the plan it gave when
it was recorded (actions in order, waits, status, Events, requeue and every `why` text).

The corpus (`tests/data/plan_corpus.json`, `python -m tests.plancorpus.record`) holds the
observations of the planner tests and of the property tests' strategies; a change that
means to change plans records it again and shows the difference in review.
"""

from __future__ import annotations

import json
from typing import Any

from tests.plancorpus import codec, layout
from tests.plancorpus.record import CORPUS


def _differences(before: Any, after: Any, path: str = "plan") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after)):
            found += _differences(before.get(key), after.get(key), f"{path}.{key}")
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        pairs = enumerate(zip(before, after, strict=True))
        return [d for i, (b, a) in pairs for d in _differences(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


def test_every_recorded_observation_plans_as_recorded() -> None:
    records = json.loads(CORPUS.read_text())
    assert len(records) >= 500
    decode, plan = codec.decoder(), layout.planner()
    changed = []
    for record in records:
        result = codec.encode(plan(decode(record["observation"]), decode(record["now"])))
        if result != record["plan"]:
            changed.append(f"{record['test']}: {_differences(record['plan'], result)[:3]}")
    summary = f"{len(changed)} of {len(records)} plans changed:\n"
    assert not changed, summary + "\n".join(changed[:5])
