"""The ExporterSet pool reconciler: pure pool rules and the Kubernetes runtime that feeds them.

Five rooms, imported in one direction only (`.importlinter`, contract `reconciler-layers`):

    runtime/   simulation/      the runtime and the simulated clock drive the rules
    rules/     rendering/       what a pool should do; what an instance is made of
    model/                      the shapes and names both sides share

- `model/`: the planner's views and steps, status shapes, label and annotation keys,
  reasons, time format, schema defaults, raw objects to views, Jumpstarter's contract,
  and the access table every API call is checked against (the source of the RBAC);
- `rules/`: the pool rules of docs/design.md §4: `planner.plan` and its stages, buckets, backoff,
  conditions, transitions, and a plan in words (`explain`, `planreport`); pure, no I/O;
- `rendering/`: an instance's Exporter, config Secret and workload (`provisioners/`), its
  credentials, the config Secret comparison and the image check; pure, no I/O;
- `runtime/`: the API client, caches, work queue, leader election, expectations, the
  executor of a plan's steps, the controller that runs passes, metrics and Events;
- `simulation/`: the planner on a simulated cluster and clock (`World`, `simulate`).

Entry points stay here: `cli` (`virtualtarget reconcile`), `exporter_set_controller`
(Jumpstarter's command line), `plan_cli` (`virtualtarget plan`, the runtime's reading and
planning half, read-only) and `simulate_cli` (`virtualtarget simulate`).
"""
