"""The Kubernetes runtime: caches feed a work queue, each pass plans and carries out.

`kube` (the API client, checked against `pool.model.access`), `cache` and `named`
(list-and-watch caches, Secrets read by name), `caches` (the caches a controller reads,
wired once), `workqueue`, `leader` (election), `expectations` (writes the caches have not
shown yet), `memory` (the pool's memory Lease), `scope` (what an install watches).

`controller` runs one pass per set as a sequence of steps, each a module: `leftovers`
(lease protection of what a deleted set left), `observe` (the planner's input, with
`claims` and `credentials`), `lanes` (which steps a pass in each lane carries out),
`executor` with `writer`, `removal` and `configwrites` (a plan's steps, guarded), `report`
(status, Events, the pass's log). `routing` says which keys each watch event wakes;
`events`, `eventsender` and `metrics` report beside the passes.
"""
