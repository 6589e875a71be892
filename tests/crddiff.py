"""Two CustomResourceDefinitions compared field by field: every difference of their `spec`
(names, scope, each version and its whole openAPIV3Schema) but descriptions' wording.

A difference is keyed as `api.jumpstarter.CRD_DIFFERENCES_FROM_RELEASE` lists it:
- `<version> <field>`: a schema field (the documents' notation, `status.devices[].uuid`)
  that one CRD has and the other has not, with everything under it;
- `<version> <field> <keyword>`: a schema keyword of a field both have (`format`,
  `x-kubernetes-map-type`, `enum`, ...); `<version> <key>` a key of the version itself
  (`additionalPrinterColumns`, `subresources`, ...), `<version>` a version one CRD lacks;
- `<key>` or `names.<key>`: the rest of the spec.
Its value is (ours, theirs), ABSENT on the side without it. Descriptions are left out: they
validate, default and prune nothing (ours are the documents' text, re-wrapped).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["ABSENT", "ROOT", "differences", "only_ours"]

ABSENT = "(absent)"
ROOT = "openAPIV3Schema"  # the schema's own keywords are keyed under this name
_NESTED = ("properties", "items", "description")


def _fields(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Each field of a schema (the root as "") with its own keywords."""
    yield path, {k: v for k, v in schema.items() if k not in _NESTED}
    for name, sub in (schema.get("properties") or {}).items():
        yield from _fields(sub, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from _fields(schema["items"], f"{path}[]")


def _keyed(ours: Mapping[str, Any], theirs: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    keys = sorted(set(ours) | set(theirs))
    pairs = {f"{prefix}{k}": (ours.get(k, ABSENT), theirs.get(k, ABSENT)) for k in keys}
    return {k: pair for k, pair in pairs.items() if pair[0] != pair[1]}


def _parent(path: str) -> str:
    if path.endswith("[]"):
        return path[:-2]
    return path.rsplit(".", 1)[0] if "." in path else ""


def _schema(version: str, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    mine, other = dict(_fields(ours)), dict(_fields(theirs))
    found: dict[str, Any] = {}
    for path in sorted(set(mine) | set(other)):
        if path in mine and path in other:
            found |= _keyed(mine[path], other[path], f"{version} {path or ROOT} ")
        elif _parent(path) in mine and _parent(path) in other:  # the topmost one side lacks
            found[f"{version} {path}"] = tuple(
                "present" if path in side else ABSENT for side in (mine, other)
            )
    return found


def _version(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    name = str(ours["name"])
    rest = ("schema",)
    found = _keyed(
        {k: v for k, v in ours.items() if k not in rest},
        {k: v for k, v in theirs.items() if k not in rest},
        f"{name} ",
    )
    schemas = [(v.get("schema") or {}).get("openAPIV3Schema") or {} for v in (ours, theirs)]
    return found | _schema(name, *schemas)


def differences(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """Every difference of two CRDs' specs, keyed as the module says: (ours, theirs)."""
    mine, other = ours["spec"], theirs["spec"]
    rest = ("names", "versions")
    found = _keyed(
        {k: v for k, v in mine.items() if k not in rest},
        {k: v for k, v in other.items() if k not in rest},
        "",
    )
    found |= _keyed(mine.get("names") or {}, other.get("names") or {}, "names.")
    versions = [{str(v["name"]): v for v in spec.get("versions") or []} for spec in (mine, other)]
    for name in sorted(set(versions[0]) | set(versions[1])):
        if name in versions[0] and name in versions[1]:
            found |= _version(versions[0][name], versions[1][name])
        else:
            found[name] = tuple("present" if name in v else ABSENT for v in versions)
    return found


def only_ours(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The schema fields only `ours` has (the topmost of each), e.g. `status.leaseHooks`."""
    found = differences(ours, theirs).items()
    return [key.split(" ")[1] for key, pair in found if pair == ("present", ABSENT)]
