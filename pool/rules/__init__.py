"""The pool rules (docs/design.md §4): one pool's observation and `now` in, steps and status out.

`planner.plan` runs the stages of `stages/` in order, each a module stating the rule it
applies; `steps` is what a stage hands on. `buckets` classifies an instance, `backoff`
tells failed instances from finished ones, `transitions` gives the Events of condition
changes, `explain` and `planreport` say a plan in words. Pure: no I/O, no clock, no
randomness; imports only `pool.model`.
"""
