"""The reconciler's data model: what the rules read and write, and the names they use.

Frozen views of one pool's objects (`views`) and the raw objects they come from
(`adapt`, `defaults`), the steps a plan asks for (`actions`), the status shapes
(`status`), the pool's remembered backoff (`backoff`), labels and annotations (`keys`),
reasons (`reasons`), time format (`timefmt`), Jumpstarter's contract (`jumpstarter`) and
the API calls the reconciler may make (`access`). Imports no other part of the
reconciler; no I/O.
"""
