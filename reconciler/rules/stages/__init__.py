"""The planner's stages, one module each, in the order `reconciler.rules.planner.plan`
calls them: census, backoff (failures and backoff), size, marks (served marks),
departures, upkeep, scale_up, scale_down, notes, status.

A stage is a pure function of the observation, `now` and what earlier stages found; it
returns its `Steps` (or a small result holding them) and states its rule in its
docstring. A new stage is a module here, called from `plan` at its place in that order,
its steps joined there in the same order.
"""
