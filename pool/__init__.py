"""The pool's pure logic: what a pool of virtual exporters should be, and what each
instance is made of. No I/O: both adapters, the admission webhook (`webhook/`) and the
reconcile loop (`reconciler/`), call it, and neither is imported here.

Four rooms, imported in one direction only (`.importlinter`, contract `pool-layers`):

    simulation/                 the rules on a simulated cluster and clock
    rules/     rendering/       what a pool should do; what an instance is made of
    model/                      the shapes and names every side shares

- `model/`: the planner's views and steps, status shapes, label and annotation keys,
  reasons, time format, schema defaults, raw objects to views, Jumpstarter's contract,
  and the access table every API call is checked against (the source of the RBAC);
- `rules/`: the pool rules of docs/design.md §4: `planner.plan` and its stages, buckets,
  backoff, conditions, transitions, and a plan in words (`explain`, `planreport`);
- `rendering/`: an instance's Exporter, config Secret and workload (`provisioners/`), its
  credentials, the config Secret comparison and the image check;
- `simulation/`: the planner on a simulated cluster and clock (`World`, `simulate`).
"""
