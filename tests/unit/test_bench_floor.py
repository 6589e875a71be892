"""The floor of `bench scale`: a fill's objects, read back, as their creators sent them."""

from __future__ import annotations

from typing import Any

from bench._floor import fresh, group
from pool.model.keys import NAME_LABEL, SET_LABEL


def _owned(kind: str, name: str, owner: str, **extra: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "scale-0",
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "creationTimestamp": "2026-12-04T12:00:00Z",
        "managedFields": [{"manager": "reconciler"}],
        "ownerReferences": [{"kind": "Exporter", "name": owner, "controller": True}],
        **extra,
    }
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


def _exporter(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "jumpstarter.dev/v1alpha1",
        "kind": "Exporter",
        "metadata": {"name": name, "namespace": "scale-0", "labels": {SET_LABEL: "pool-0"}},
        "status": {"credential": {"name": f"{name}-exporter-token"}},
    }


def test_fresh_is_what_a_creator_sends_into_the_new_namespace() -> None:
    pod = _owned("Pod", "a", "a", labels={NAME_LABEL: "pool-0"})
    pod["spec"] = {"nodeName": "node-1", "containers": [{"name": "exporter"}]}
    pod["status"] = {"phase": "Running"}

    body = fresh(pod, "scale-floor")

    assert body["metadata"] == {
        "name": "a",
        "namespace": "scale-floor",
        "labels": {NAME_LABEL: "pool-0"},
        "ownerReferences": [{"kind": "Exporter", "name": "a", "controller": True}],
    }
    assert body["spec"] == {"containers": [{"name": "exporter"}]}  # unscheduled, as created
    assert "status" not in body
    assert pod["metadata"]["namespace"] == "scale-0"  # the fill's object is left as it was


def test_group_gives_each_exporter_its_credential_config_and_pod() -> None:
    exporters = [_exporter("a"), _exporter("b")]
    secrets = [
        _owned("Secret", "a-exporter-token", "a"),
        _owned("Secret", "a-config", "a", labels={NAME_LABEL: "pool-0"}),
        _owned("Secret", "b-exporter-token", "b"),
        _owned("Secret", "other", "a"),  # neither its credential nor labelled as a config
        _owned("Secret", "c-config", "c", labels={NAME_LABEL: "pool-0"}),  # no such Exporter
    ]
    pods = [_owned("Pod", "a", "a"), _owned("Pod", "b", "b")]

    instances = group(exporters, secrets, pods)

    assert [i.exporter["metadata"]["name"] for i in instances] == ["a"]  # b has no config
    (a,) = instances
    assert a.credential is not None and a.credential["metadata"]["name"] == "a-exporter-token"
    assert [s["metadata"]["name"] for s in a.config] == ["a-config"]
    assert a.pod is not None and a.writes == 5
