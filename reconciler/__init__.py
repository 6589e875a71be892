"""The ExporterSet reconcile loop: the Kubernetes adapter over the pool's pure logic
(`pool/`), which it feeds with what the cluster holds and whose steps it carries out.

- `runtime/`: the API client, caches, work queue, leader election, expectations, the
  executor of a plan's steps, the controller that runs passes, metrics and Events.

Entry points: `cli` (`virtualtarget reconcile`), `exporter_set_controller` (Jumpstarter's
command line), `plan_cli` (`virtualtarget plan`, the runtime's reading and planning half,
read-only) and `simulate_cli` (`virtualtarget simulate`).
"""
