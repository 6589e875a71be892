"""The examples: valid ones pass the models and every rule; each invalid one breaks its rule.

Each invalid example names the rule it breaks in its first line (`# violates: <rule id>`),
and the rule is evaluated twice, as the webhook runs it (`check`) and as the apiserver
runs it (the CEL in the CRD, through cel-python).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import json_to_cel

from api.models.exporterset import ExporterSet
from api.models.jumpstarter.exporter import Exporter
from api.models.virtualtargetclass import VirtualTargetClass
from api.rules import RULES, Rule
from codegen.jsonschema import split_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODELS = {
    "ExporterSet": ExporterSet,
    "VirtualTargetClass": VirtualTargetClass,
    "Exporter": Exporter,
}
VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def _violates(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# violates: "), f"{path.name}: first line must name the rule"
    return first.removeprefix("# violates: ").strip()


def _nodes(obj: Any, scope: str, path: str = "") -> list[tuple[Any, str]]:
    """The nodes a rule sees at `scope`, with their field paths (one per list item)."""
    found: list[tuple[Any, str]] = [(obj, path)]
    for part in split_path(scope):
        step: list[tuple[Any, str]] = []
        for node, at in found:
            if part == "[]" and isinstance(node, list):
                step.extend((item, f"{at}[{i}]") for i, item in enumerate(node))
            elif isinstance(node, dict) and part in node:
                step.append((node[part], f"{at}.{part}" if at else part))
        found = step
    return found


_CEL = celpy.Environment()


def _breaks(rule: Rule, obj: dict[str, Any]) -> tuple[bool, bool]:
    """(check says broken, CEL says broken) for one rule on one object."""
    by_check = by_cel = False
    program = _CEL.program(_CEL.compile(rule.cel))
    for node, path in _nodes(obj, rule.scope):
        by_check |= bool(rule.check(node, path))
        by_cel |= not bool(program.evaluate({"self": json_to_cel(node)}))
    return by_check, by_cel


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_example_passes_model_and_every_rule(path: Path) -> None:
    obj = _load(path)
    MODELS[obj["kind"]].model_validate(obj)
    rules = [rule for rule in RULES if rule.kind == obj["kind"]]
    assert rules or obj["kind"] == "Exporter", obj["kind"]  # Jumpstarter's kind: none of ours
    for rule in rules:
        assert _breaks(rule, obj) == (False, False), rule.id


def test_valid_examples_cover_the_three_kinds() -> None:
    assert {_load(p)["kind"] for p in VALID} == set(MODELS)
    assert _load(EXAMPLES / "virtualtargetclass-qemu.yaml")["spec"]["provisioner"] == (
        "qemu.jumpstarter.dev"
    )


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_breaks_its_rule_in_check_and_cel(path: Path) -> None:
    rules = {rule.id: rule for rule in RULES}
    rule = rules[_violates(path)]
    obj = _load(path)
    assert obj["kind"] == rule.kind
    MODELS[obj["kind"]].model_validate(obj)  # well-typed: only the rule is broken
    assert _breaks(rule, obj) == (True, True)


def test_every_rule_has_an_invalid_example() -> None:
    covered = {_violates(path) for path in INVALID}
    assert {rule.id for rule in RULES} <= covered


def test_models_keep_fields_they_do_not_know() -> None:
    """A round trip through a generated model never drops data (extra="allow")."""
    from api.models.exporterset import ExporterSet

    sent = {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "ExporterSet",
        "metadata": {"name": "p"},
        "spec": {
            "virtualTargetClassName": "qemu",
            "selector": {"matchLabels": {"a": "b"}},
            "futureField": {"x": 1},
            "images": {"exporter": {"image": "i", "digest": "sha256:0"}},
        },
    }
    back = ExporterSet.model_validate(sent).model_dump(by_alias=True, exclude_unset=True)
    assert back["spec"]["futureField"] == {"x": 1}
    assert back["spec"]["images"]["exporter"]["digest"] == "sha256:0"
