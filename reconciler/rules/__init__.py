"""The pool rules (DESIGN §4): one pool's observation and `now` in, steps and status out.

`planner.plan` runs the stages in order (`planner` lists them); each stage is a module of
its own or a function with the rule it applies in its docstring. `buckets` classifies an
instance, `backoff` tells failed instances from finished ones, `conditions` computes the
status, `transitions` its Events, `explain` and `planreport` say a plan in words. Pure:
no I/O, no clock, no randomness; imports only `reconciler.model`.
"""
