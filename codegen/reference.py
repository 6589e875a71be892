"""A reference schema (Swagger 2.0 definitions, as KubeVirt publishes its API) read as one
structural schema, with its fields in the order an API reference page lists them.

The order is the page's: an object's own fields by name, then, field by field, the
fields of each sub-object (depth first). `codegen.alignment` relies on it.

What changes on the way to a schema kube-apiserver accepts in a CRD:
- every `$ref` is inlined; a definition that contains itself is cut where it recurs,
  with `x-kubernetes-preserve-unknown-fields` (the apiserver keeps what is there
  without a schema for it), and the cut is reported;
- a `type` list loses `null` (the apiserver prunes nulls of fields that are not
  nullable, so `nullable` goes too); string with integer or number is int-or-string, and
  the Quantity definition is `k8stypes.QUANTITY`, the project's one quantity schema;
- defaults go: they are the Go zero values (`""`, `0`, `{}`) that openapi-gen writes
  for non-pointer fields, not documented defaults, and in a CRD they would make the
  apiserver write empty values into every object. A list-map key that is not required
  keeps its default, because the apiserver demands one of the two;
- `x-kubernetes-patch-*` goes: custom resources have no strategic merge patch;
- the root's `metadata` is only `type: object`: ObjectMeta belongs to the apiserver,
  so its fields are neither walked nor counted.

Object and enum nodes get titles (the generated class names) from definition names.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from codegen.fieldtree import SchemaDocError
from codegen.k8stypes import QUANTITY

__all__ = ["ReferenceField", "ReferenceTree", "read_reference"]

Schema = dict[str, Any]

# Definitions whose Kubernetes meaning the reference cannot spell in JSON Schema.
_KNOWN_DEFINITIONS: dict[str, Schema] = {"k8s.io.apimachinery.pkg.api.resource.Quantity": QUANTITY}
# Keys carried over as they are; anything not here and not handled below is an error.
_KEPT = (
    "enum",
    "format",
    "maximum",
    "maxItems",
    "maxLength",
    "minimum",
    "minItems",
    "minLength",
    "pattern",
    "required",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
)
_HANDLED = (
    "$ref",
    "additionalProperties",
    "default",
    "description",
    "items",
    "nullable",
    "properties",
    "type",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
)
_INT_OR_STRING: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
_REF_PREFIX = "#/definitions/"


@dataclass(frozen=True)
class ReferenceField:
    """One field of the reference: its path, the reference's description ("" if none)
    and its type as the docs name it."""

    path: str
    text: str
    type: str


@dataclass
class ReferenceTree:
    """The kind's schema (titled, without descriptions) and its fields in page order."""

    schema: Schema
    fields: list[ReferenceField] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)  # `path (definition)` where recursion was cut


def _short_names(names: list[str]) -> dict[str, str]:
    """`v1.Disk` -> `Disk`; when two definitions share a last segment, the one outside the
    kind's own package (`k8s.io.api.core.v1.X`) takes its package name as a prefix (`CoreX`)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    out: dict[str, str] = {}
    for short, members in groups.items():
        for name in members:
            packages = [p for p in name.split(".")[:-1] if not re.fullmatch(r"v[0-9]+\w*", p)]
            prefix = packages[-1].capitalize() if len(members) > 1 and packages else ""
            out[name] = prefix + short
    taken: dict[str, str] = {}
    for name, title in sorted(out.items()):
        if title in taken:
            raise ValueError(f"definitions {taken[title]} and {name} both name a class {title}")
        taken[title] = name
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _capital(name: str) -> str:
    return name[:1].upper() + name[1:]


def _types(raw: Schema) -> set[str]:
    """The types a reference schema allows, without `null` (an object when it names none)."""
    types = raw.get("type", "object")
    return {types} if isinstance(types, str) else set(types) - {"null"}


def _type_of(raw: Schema) -> str:
    """The type the docs show for a reference schema."""
    kinds = _types(raw)
    return "int-or-string" if len(kinds) > 1 else kinds.pop()


class _Reader:
    """One pass over the definitions reachable from the root: schema and fields together."""

    def __init__(self, definitions: dict[str, Schema], text: str, where: str) -> None:
        self.definitions = definitions
        self.text = text
        self.where = where
        try:
            self.titles = _short_names(sorted(definitions))
        except ValueError as exc:
            raise SchemaDocError(where, 1, f"expected distinct definition names: {exc}") from None
        self.fields: list[ReferenceField] = []
        self.cuts: list[str] = []

    def fail(self, definition: str, expected: str) -> SchemaDocError:
        at = self.text.find(f'"{definition}": {{')
        line = self.text.count("\n", 0, at) + 1 if at >= 0 else 1
        return SchemaDocError(self.where, line, f"{definition}: {expected}")

    def resolve(self, raw: Schema, owner: str) -> tuple[str, Schema]:
        """(definition name or "", the schema that `raw` stands for)."""
        ref = str(raw.get("$ref", ""))
        if not ref:
            return "", raw
        name = ref.removeprefix(_REF_PREFIX)
        if not ref.startswith(_REF_PREFIX) or name not in self.definitions:
            raise self.fail(owner, f"expected {ref} to name a definition of this file")
        return name, self.definitions[name]

    def schema_of(
        self, raw: Schema, path: str, title: str, owner: str, stack: tuple[str, ...]
    ) -> Schema:
        """The node for a property or item schema, following a `$ref`."""
        definition, target = self.resolve(raw, owner)
        if not definition:
            return self.build(raw, path, title, owner, stack)
        if definition in stack:
            self.cuts.append(f"{path} ({definition})")
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if definition in _KNOWN_DEFINITIONS:
            return copy.deepcopy(_KNOWN_DEFINITIONS[definition])
        return self.build(target, path, self.titles[definition], definition, (*stack, definition))

    def build(
        self, raw: Schema, path: str, title: str, owner: str, stack: tuple[str, ...]
    ) -> Schema:
        unknown = sorted(set(raw) - set(_KEPT) - set(_HANDLED))
        if unknown:
            raise self.fail(owner, f"expected known schema keys at {path}, found {unknown[0]!r}")
        kinds = _types(raw)
        if len(kinds) == 1:
            node: Schema = {"type": kinds.pop()}
        elif "string" in kinds and kinds <= {"string", "integer", "number"}:
            node = copy.deepcopy(_INT_OR_STRING)
        else:
            raise self.fail(
                owner,
                f"expected a type the apiserver can check at {path}, found {raw.get('type')!r}",
            )
        node.update({key: copy.deepcopy(raw[key]) for key in _KEPT if key in raw})
        if "enum" in node:
            node["title"] = title
        if isinstance(raw.get("additionalProperties"), dict):
            value = raw["additionalProperties"]
            if "properties" in self.resolve(value, owner)[1]:
                raise self.fail(
                    owner, f"expected no map of objects at {path}: paths cannot name one"
                )
            node["additionalProperties"] = self.schema_of(
                value, path, title + "Value", owner, stack
            )
        if isinstance(raw.get("items"), dict):
            node["items"] = self.items(raw, path, title + "Item", owner, stack)
        if isinstance(raw.get("properties"), dict):
            node["title"] = title
            node["properties"] = self.walk(raw["properties"], path, title, owner, stack)
        return node

    def items(
        self, raw: Schema, path: str, title: str, owner: str, stack: tuple[str, ...]
    ) -> Schema:
        items = self.schema_of(raw["items"], f"{path}[]", title, owner, stack)
        target = self.resolve(raw["items"], owner)[1]
        for key in raw.get("x-kubernetes-list-map-keys") or ():
            own = target.get("properties", {}).get(key, {})
            node = items.get("properties", {}).get(key)
            if node is not None and key not in items.get("required", ()) and "default" in own:
                node["default"] = own["default"]
        return items

    def walk(
        self,
        properties: dict[str, Schema],
        path: str,
        title: str,
        owner: str,
        stack: tuple[str, ...],
    ) -> dict[str, Schema]:
        """List the object's own fields, then build each field's node, which lists the
        fields of its sub-objects: the page's order."""
        names = sorted(properties)
        for name in names:
            target = self.resolve(properties[name], owner)[1]
            own = properties[name].get("description")
            text = own if own is not None else target.get("description", "")
            self.fields.append(ReferenceField(_join(path, name), str(text), _type_of(target)))
        nodes: dict[str, Schema] = {}
        for name in names:
            if not path and name == "metadata":
                nodes[name] = {"type": "object"}
                continue
            nodes[name] = self.schema_of(
                properties[name], _join(path, name), title + _capital(name), owner, stack
            )
        return nodes


def read_reference(text: str, where: str, kind: str) -> ReferenceTree:
    """The schema of the definition named like `kind` (e.g. `v1.VirtualMachineInstance`)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaDocError(where, exc.lineno, f"expected JSON: {exc.msg}") from None
    definitions = document.get("definitions") if isinstance(document, dict) else None
    if not isinstance(definitions, dict):
        raise SchemaDocError(where, 1, "expected a Swagger 2.0 document with definitions")
    roots = sorted(name for name in definitions if name.rsplit(".", 1)[-1] == kind)
    if len(roots) != 1:
        found = ", ".join(roots) or "none"
        raise SchemaDocError(where, 1, f"expected one definition named {kind}, found {found}")
    reader = _Reader(definitions, text, where)
    schema = reader.schema_of({"$ref": _REF_PREFIX + roots[0]}, "", kind, roots[0], ())
    return ReferenceTree(schema=schema, fields=reader.fields, cuts=reader.cuts)
