"""The ExporterSet pool reconciler: a pure planner and the Kubernetes runtime that feeds it.

Layers, each a module with one job:
- `observe`: the small frozen views the planner reads (no dependency on generated models);
- `adapt`: raw API objects (plain dicts) to views, with schema defaults applied;
- `buckets`, `planner`, `status`: the pool semantics of DESIGN §4 (pure, no I/O);
- `render`, `provisioners/`: the Exporter and the workload of one instance (pure);
- `cache`, `workqueue`, `leader`, `executor`, `controller`, `cli`: the runtime (I/O);
- `simulate`, `simulate_cli`: the planner replayed on a simulated clock.

`reconciler.planner` and what it imports never touch `kubernetes` (see `.importlinter`).
"""
