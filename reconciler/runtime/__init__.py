"""The Kubernetes runtime: caches feed a work queue, each pass plans and carries out.

`kube` (the API client, checked against `pool.model.access`), `cache` and `named`
(list-and-watch caches, Secrets read by name), `caches` (the caches a controller reads,
wired once), `workqueue`, `leader` (election), `expectations` (writes the caches have not
shown yet), `memory` (the pool's memory Lease), `executor` (a plan's steps, guarded),
`controller` (one pass per set), `events`, `metrics` and `scope` (what an install
watches).
"""
