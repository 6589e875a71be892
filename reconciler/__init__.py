"""The ExporterSet pool reconciler: a pure planner and the Kubernetes runtime that feeds it.

Layers, each a module with one job:
- `observe`, `actions`: the planner's frozen input views and output steps;
- `adapt`, `defaults`: raw API objects (plain dicts) to views, schema defaults applied;
- `buckets`, `planner`, `status`: the pool semantics of docs/design.md §4 (pure, no I/O);
- `explain`, `planreport`: a plan in words, for the log, Events and `plan` (pure);
- `render`, `provisioners/`: the Exporter and the workload of one instance (pure);
- `access`: every API call made, the source of the generated RBAC;
- `kube`, `cache`, `workqueue`, `leader`, `executor`, `controller`, `cli`: the runtime;
- `plan_cli`: `virtualtarget plan`, the runtime's reading and planning half, read-only;
- `world`, `simulate`, `simreport`, `simulate_cli`: the planner on a simulated clock.

`reconciler.planner` and what it imports never touch `kubernetes` (see `.importlinter`).
"""
