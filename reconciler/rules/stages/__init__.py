"""The planner's stages, one module each, in the order `reconciler.rules.planner.plan`
calls them: census, failures (and backoff), size, marks (served marks and lease
protection), departures, upkeep, scale_up, scale_down, release (of lease protection),
notes, status.

A stage is a pure function of the observation, `now` and what earlier stages found; it
returns its `Steps` (or a small result holding them) and states its rule in its
docstring. A new stage is a module here, called from `plan` at its place in that order,
its steps joined there in the same order.
"""
