"""The plan corpus: observations the planner has met, each with the plan it made.

`record` runs the reconciler's unit tests (every scenario of the planner tests, and the
property tests' strategies under a fixed seed) with the planner wrapped, and writes what
it saw to `tests/data/plan_corpus.json`; `tests/unit/test_plan_corpus.py` replays it. A
restructuring of the planner that changes one action, wait, status field, Event or `why`
text of one recorded plan fails that test. `layout` names where the planner and its
types live, the only part that follows the code when it moves.
"""
