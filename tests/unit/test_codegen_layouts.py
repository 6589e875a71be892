"""Each document layout parses into the field tree, and malformed text says where and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen import layout_backquoted, layout_bullets, layout_prose
from codegen.fieldtree import Field, SchemaDocError
from codegen.sources import parse_document, read_sources

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def _fields(name: str) -> dict[str, Field]:
    result = parse_document((SCHEMAS / name).read_text(), f"schemas/{name}")
    assert len(result.kinds) == 1
    return {f.path: f for f in result.kinds[0].fields}


def test_backquoted_table_reads_enums_typed_defaults_and_group() -> None:
    text = (SCHEMAS / "exporterset.txt").read_text()
    assert layout_backquoted.looks_like(text)
    doc = layout_backquoted.parse(text, "schemas/exporterset.txt")
    assert (doc.kind, doc.group, doc.version) == (
        "ExporterSet",
        "virtualtarget.jumpstarter.dev",
        "v1alpha1",
    )
    fields = {f.path: f for f in doc.fields}
    assert fields["spec.recycleStrategy"].enum == ("ExitAndReplace", "InPlaceReuse")
    assert fields["spec.recycleStrategy"].default == "ExitAndReplace"
    assert fields["spec.maxReplicas"].default == 4  # an int, not the text "4"
    assert fields["spec.maxReplicas"].description.endswith("0 means no upper bound.")
    assert fields["status.conditions[].status"].enum == ("True", "False", "Unknown")
    assert not fields["spec.selector"].has_default


def test_plain_table_reads_bare_paths_pipe_enums_and_empty_default() -> None:
    fields = _fields("exporter.txt")
    assert fields["spec.enabled"].type == "boolean"
    assert fields["spec.enabled"].default is True
    assert fields["status.leaseRef.name"].has_default
    assert fields["status.leaseRef.name"].default == ""
    assert fields["status.exporterStatus"].enum[:3] == ("Unspecified", "Offline", "Available")
    assert fields["status.devices[].parent_uuid"].type == "string"


def test_bullet_tree_reads_every_attribute() -> None:
    result = layout_bullets.parse(
        (SCHEMAS / "deckhouse-virtualization.txt").read_text(),
        "schemas/deckhouse-virtualization.txt",
    )
    kinds = {doc.kind: doc for doc in result.kinds}
    assert len(kinds) == 7
    image = kinds["ClusterVirtualImage"]
    assert (image.group, image.version, image.scope) == (
        "virtualization.deckhouse.io",
        "v1alpha2",
        "Cluster",
    )
    fields = {f.path: f for f in image.fields}
    assert fields["spec.dataSource"].required
    assert fields["spec.dataSource.type"].enum == ("HTTP", "ContainerImage", "ObjectRef", "Upload")
    md5 = fields["spec.dataSource.http.checksum.md5"]
    assert (md5.min_length, md5.max_length, md5.pattern) == (32, 32, "^[0-9a-fA-F]{32}$")
    assert md5.examples == ("md5: f3b59bed9f91e32fac1210184fcff6f5",)
    assert fields["spec.dataSource.objectRef.name"].min_length == 1
    # `Allowed values: 0 <= X` is a bound, not an enum.
    generation = fields["status.conditions[].observedGeneration"]
    assert (generation.minimum, generation.enum) == (0, ())
    # Children of an array of objects are item fields.
    assert fields["status.conditions"].items == "object"
    assert "status.conditions.type" not in fields
    # Bullets inside a description stay description.
    assert "HTTP" not in fields and "• HTTP" in fields["spec.dataSource.http"].description
    defaults = {f.path: f.default for f in kinds["VirtualDiskSnapshot"].fields if f.has_default}
    assert defaults == {"spec.requiredConsistency": True}
    assert [f.default for f in kinds["NodeUSBDevice"].fields if f.has_default] == [""]
    size = {f.path: f for f in kinds["VirtualDisk"].fields}["spec.persistentVolumeClaim.size"]
    assert size.type == "int-or-string"


def test_kind_without_example_shares_the_file_group() -> None:
    result = read_sources(SCHEMAS, ROOT)
    snapshot = next(doc for doc in result.kinds if doc.kind == "VirtualDiskSnapshot")
    assert snapshot.group == "virtualization.deckhouse.io"


def test_kind_documented_only_by_examples_is_a_notice() -> None:
    result = layout_bullets.parse((SCHEMAS / "deckhouse-virtualization.txt").read_text(), "d.txt")
    assert "VirtualMachineClass" not in {doc.kind for doc in result.kinds}
    (notice,) = result.notices
    assert notice.startswith("d.txt:2027: VirtualMachineClass is documented only by examples")


def test_descriptions_without_names_are_a_notice_not_fields() -> None:
    text = (SCHEMAS / "kubevirt-virtualmachineinstance.txt").read_text()
    assert layout_prose.looks_like(text)
    result = layout_prose.parse(text, "k.txt")
    assert result.kinds == []
    (notice,) = result.notices
    assert notice.startswith("k.txt:1: VirtualMachineInstance (kubevirt.io/v1) has ")
    assert "without field names" in notice and "\n" not in notice


TABLE = "Thing\n\nexample.dev/v1alpha1\n\nThing is a thing.\n\nSpec\n\nField\tType\tDescription\n"


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        (TABLE + "spec.a\tstring\n", 10, "expected 3 tab-separated cells"),
        (TABLE + "spec.a\tbanana\tA.\n", 10, "expected a type"),
        (TABLE + "spec.a\tinteger\tA. (default: many)\n", 10, "expected an integer default"),
        (TABLE + "spec.a.b\tstring\tB.\n", 10, "expected spec.a before spec.a.b"),
        (
            "Thing\n\nno group here\n\nSpec\n\nField\tType\tDescription\nspec.a\tstring\tA.\n",
            3,
            "group/version",
        ),
        (
            "Disk\n\nScope: Cluster\nVersion: v1\n\napiVersion: x.dev/v1\n\n• spec\n\n  objec\n",
            10,
            "expected the type of spec",
        ),
        ("just some words\n", 1, "expected a known layout"),
    ],
)
def test_malformed_document_names_file_line_and_expectation(
    text: str, line: int, expected: str
) -> None:
    with pytest.raises(SchemaDocError) as caught:
        result = parse_document(text, "schemas/broken.txt")
        # Errors found only when the tree is assembled (a missing parent) surface there.
        from codegen.jsonschema import build_schema
        from codegen.overlay import KindOverlay

        for doc in result.kinds:
            build_schema(doc, KindOverlay())
    assert str(caught.value).startswith(f"schemas/broken.txt:{line}: ")
    assert expected in str(caught.value)
