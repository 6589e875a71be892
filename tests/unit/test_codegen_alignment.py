"""A description-only page placed on a reference schema: splits joined, duplicates settled
by the page's order, and the two ways a page fails (a paragraph that fits no field, an
ambiguity that order cannot settle), each with its error text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codegen.described import read_described
from codegen.fieldtree import KindDoc, SchemaDocError
from codegen.jsonschema import node_at
from codegen.overlay import OverlayError

PAGE = "schemas/thing.txt"
REFERENCE = "schemas/thing.swagger.json"
DEFINITIONS: dict[str, Any] = {
    "v1.Thing": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of the thing."},
            "kind": {"type": "string", "description": "Kind of the thing."},
            "metadata": {"$ref": "#/definitions/meta.ObjectMeta"},
            "spec": {"$ref": "#/definitions/v1.ThingSpec", "description": "Spec of the thing."},
        },
    },
    "meta.ObjectMeta": {
        "type": "object",
        "description": "Standard object metadata.",
        "properties": {"name": {"type": "string", "description": "Name of the object."}},
    },
    "v1.ThingSpec": {
        "type": "object",
        "properties": {
            "mode": {
                "type": "string",
                "enum": ["Fast", "Slow"],
                "description": "Mode is how it runs. The options are: - `Fast`: quick. - `Slow`:"
                ' careful.\n\nPossible enum values:\n - `"Fast"` is quick.\n - `"Slow"` is'
                " careful.",
            },
            "owner": {"$ref": "#/definitions/v1.Ref", "description": "Owner of the thing."},
            "source": {
                "$ref": "#/definitions/v1.Ref",
                "description": "Source of the thing.\n\nIt is read  once.",
            },
            "url": {"type": "string", "description": 'Served at "<scheme>://<host>". See *why*.'},
        },
    },
    "v1.Ref": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Name of the referent."},
            "uid": {"type": "string"},
        },
    },
}
PARAGRAPHS = [
    "APIVersion of the thing.",
    "Kind of the thing.",
    "Standard object metadata.",
    "Spec of the thing.",
    "Mode is how it runs. The options are:",
    "• 'Fast': quick.\n• 'Slow': careful.",
    "Owner of the thing.",
    "Source of the thing.",
    "It is read once.",
    'Served at "://". See why.',
    "Name of the referent.",
    "Name of the referent.",
]


def _read(paragraphs: list[str], abridged: tuple[str, ...] = (), **changes: Any) -> KindDoc:
    page = "#Thing [things.example.dev/v1]\n\n" + "\n\n".join(paragraphs) + "\n"
    definitions = json.loads(json.dumps(DEFINITIONS))
    for path, description in changes.items():
        definition, prop = path.split("__")
        definitions[definition.replace("_", ".")]["properties"][prop]["description"] = description
    reference = json.dumps({"swagger": "2.0", "definitions": definitions}, indent=1)
    return read_described(page, PAGE, reference, REFERENCE, abridged)


def _descriptions(doc: KindDoc) -> dict[str, str]:
    return {field.path: field.description for field in doc.fields}


def test_every_paragraph_is_placed_in_order_with_splits_joined() -> None:
    doc = _read(PARAGRAPHS)
    described = _descriptions(doc)
    assert list(described) == [
        "apiVersion",
        "kind",
        "spec",
        "spec.mode",
        "spec.owner",
        "spec.source",
        "spec.url",
        "spec.owner.name",
        "spec.source.name",
    ]
    # A bullet list and a second paragraph are joined again, in the page's own words.
    assert described["spec.mode"] == (
        "Mode is how it runs. The options are:\n\n• 'Fast': quick.\n• 'Slow': careful."
    )
    assert described["spec.source"] == "Source of the thing.\n\nIt is read once."
    assert described["spec.url"] == 'Served at "://". See why.'
    assert [f.line for f in doc.fields][:4] == [3, 5, 9, 11]
    schema = doc.schema
    assert schema is not None
    assert node_at(schema, "spec.source.name") == {
        "type": "string",
        "description": "Name of the referent.",
    }
    assert schema["properties"]["metadata"] == {"type": "object"}  # placed, but only typed
    assert doc.coverage is not None
    assert (doc.coverage.paragraphs, doc.coverage.described, doc.coverage.fields) == (12, 10, 12)
    assert doc.coverage.undescribed == (("spec.owner.uid", "string"), ("spec.source.uid", "string"))


@pytest.mark.parametrize(
    ("paragraphs", "expected"),
    [
        pytest.param(
            [*PARAGRAPHS[:7], "Origin of the thing.", *PARAGRAPHS[8:]],
            "schemas/thing.txt:18: expected a reference field that the paragraph 'Origin of "
            "the thing.' describes, in the page's order after spec.owner; found none (nearest: "
            "spec.source (75% alike), spec.owner.name (50% alike), spec.source.name (50% alike))",
            id="fits-no-field",
        ),
        pytest.param(
            [*PARAGRAPHS[:6], *PARAGRAPHS[7:9], PARAGRAPHS[6], *PARAGRAPHS[9:]],
            "schemas/thing.txt:20: expected a reference field that the paragraph 'Owner of the "
            "thing.' describes, in the page's order after spec.source; found none (nearest: "
            "spec.owner.name (50% alike), spec.source.name (50% alike), spec.url (0% alike); "
            "spec.owner has this text but comes earlier)",
            id="out-of-order",
        ),
        pytest.param(
            PARAGRAPHS[:-1],
            "schemas/thing.txt:24: expected one field for the paragraph 'Name of the "
            "referent.'; it fits spec.owner.name and spec.source.name, and the page's order "
            "does not settle which",
            id="unsettled-ambiguity",
        ),
    ],
)
def test_a_page_that_cannot_be_placed_stops_naming_the_paragraph(
    paragraphs: list[str], expected: str
) -> None:
    with pytest.raises(SchemaDocError) as caught:
        _read(paragraphs)
    assert str(caught.value) == expected


def test_an_abridged_field_is_placed_only_when_the_overlay_names_it() -> None:
    longer = {"v1_ThingSpec__owner": "Owner of the thing. Kept for audits."}
    with pytest.raises(SchemaDocError, match=r"thing\.txt:16: .*'Owner of the thing\.'"):
        _read(PARAGRAPHS, **longer)
    doc = _read(PARAGRAPHS, ("spec.owner",), **longer)
    assert _descriptions(doc)["spec.owner"] == "Owner of the thing."
    assert doc.coverage is not None and doc.coverage.abridged == ("spec.owner",)


@pytest.mark.parametrize(
    ("abridged", "expected"),
    [
        ("spec.owner", "spec.owner: the page gives its whole text; drop the entry"),
        ("spec.owner.uid", "spec.owner.uid: no paragraph of schemas/thing.txt describes it"),
    ],
)
def test_an_abridged_entry_that_is_not_needed_is_an_error(abridged: str, expected: str) -> None:
    with pytest.raises(OverlayError) as caught:
        _read(PARAGRAPHS, (abridged,))
    assert str(caught.value) == f"schemas/overlay.yaml: files.thing.txt.abridged: {expected}"
