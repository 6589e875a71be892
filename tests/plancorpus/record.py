"""Record the plan corpus: `python -m tests.plancorpus.record [--out FILE]`.

Runs the reconciler's unit tests (`tests/unit/test_reconciler_*.py`: every planner test
scenario, and the property tests, whose strategies run derandomized as under CI) with the
planner wrapped, and keeps each distinct observation with the plan made from it: all of a
test's, up to `PER_TEST`; beyond that a sample chosen by the content's digest, so a
second recording of the same code picks the same ones. Each kept record is replayed
through the codec before it is written, so the corpus holds only what replays.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plancorpus import codec, layout

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "plan_corpus.json"
PER_TEST = 50  # observations kept of one test (a property test makes thousands)


class Recorder:
    """A pytest plugin: every call of the planner, with the test that made it."""

    def __init__(self) -> None:
        self.test = ""
        self.seen: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.original: Any = None

    def pytest_configure(self, config: pytest.Config) -> None:
        module = layout.planner_module()
        self.original = original = module.plan

        def recorded(obs: Any, now: Any) -> Any:
            observation, moment = codec.encode(obs), codec.encode(now)
            result = original(obs, now)
            record = {"test": self.test, "now": moment, "observation": observation}
            key = json.dumps([moment, observation], sort_keys=True)
            self.seen[self.test].setdefault(key, {**record, "plan": codec.encode(result)})
            return result

        module.plan = recorded

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.test = item.nodeid
        yield


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def select(seen: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    kept = []
    for test in sorted(seen):
        records = seen[test]
        keys = list(records)  # in the order the test made them
        if len(keys) > PER_TEST:
            chosen = set(sorted(keys, key=_digest)[:PER_TEST])
            keys = [k for k in keys if k in chosen]
        kept.extend(records[k] for k in keys)
    return kept


def verify(records: list[dict[str, Any]], plan: Any) -> None:
    """Each record's decoded observation plans to the recorded plan (the codec is exact)."""
    decode = codec.decoder()
    for record in records:
        again = codec.encode(plan(decode(record["observation"]), decode(record["now"])))
        if again != record["plan"]:
            raise SystemExit(f"record of {record['test']} does not replay through the codec")


def dump(records: list[dict[str, Any]]) -> str:
    """One record per line: a change shows as the lines of the plans it changed."""
    lines = [json.dumps(r, separators=(",", ":"), sort_keys=True) for r in records]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.plancorpus.record")
    parser.add_argument("--out", type=Path, default=CORPUS)
    args = parser.parse_args(argv)
    os.environ["CI"] = "true"  # the conftest's derandomized hypothesis profile
    recorder = Recorder()
    tests = sorted(str(p) for p in (ROOT / "tests" / "unit").glob("test_reconciler_*.py"))
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-x", *tests], plugins=[recorder])
    if code != 0:
        print(f"the tests failed (exit {code}): nothing recorded", file=sys.stderr)
        return 1
    records = select(recorder.seen)
    verify(records, recorder.original)
    args.out.write_text(dump(records))
    tests_seen = len(recorder.seen)
    print(f"{len(records)} observations of {tests_seen} tests written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
