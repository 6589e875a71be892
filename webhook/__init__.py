"""Mutating and validating admission webhooks for VirtualTargetClass, ExporterSet and Exporter.

Layers, one concern per module:
- `routes`: the served kinds and their kubebuilder-style paths (one table).
- `decode`: HTTP body limits and AdmissionReview decoding; `envelope`: the response.
- `patch` + `defaulter`: explicit default edits and their minimal RFC 6902 patch.
- `rules_runner`, `checks_*`, `immutability`, `validator`: single-object validation.
- `crossobject` (against a `clusterview.ClusterView`), `cache` + `access`: cluster reads.
- `admission`: one review in, one outcome out; `app`: FastAPI; `server`/`cli`: TLS serving.

The webhook never imports the reconciler (enforced by `.importlinter`).
"""
