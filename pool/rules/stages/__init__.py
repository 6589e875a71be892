"""The planner's stages, one module each, in the order `pool.rules.planner.plan`
calls them: census, failures (and backoff), size, marks (served marks and lease
protection), departures, upkeep, scale_up, scale_down, release (of lease protection),
notes, status; and settle, over the joined steps (no delete before its fence settles).

A stage is a pure function of the observation, `now` and what earlier stages found; it
returns its `Steps` (or a small result holding them) and states its rule in its
docstring. A new stage is a module here, called from `plan` at its place in that order,
its steps joined there in the same order. A stage's result is a slotted dataclass, not a
frozen one: a pass builds a dozen of them, and a frozen one costs four times as much to
build (on a pool of 10, the difference was 5 of the planner's 100 microseconds).
"""
