"""Serving Prometheus scrapes, shared by the webhook and the reconciler.

Both components expose `/metrics` the way controller-runtime's secure metrics do: only to
callers whose bearer token the apiserver authenticates (TokenReview) and authorizes for
`GET /metrics` (SubjectAccessReview). The pieces both need live here, once: the
authorization (`scrape.auth`), histograms kept as plain arithmetic (`scrape.histogram`)
and, for the reconciler, a small threaded HTTP(S) server (`scrape.http`).
"""
