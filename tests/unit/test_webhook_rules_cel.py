"""Differential test: each rule's Python `check` and its CEL agree on generated nodes.

The CEL is evaluated with cel-python (`celpy`), the way the apiserver evaluates the
`x-kubernetes-validations` the generator writes from the same rule. Nodes are generated
per rule scope with the types the CRD schema guarantees (the apiserver checks types
before it runs CEL), biased towards the boundaries the rules care about.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import celpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules import RULES, Rule

KEYS = st.sampled_from(["a", "b", "example.com/c"])
VALUES = st.sampled_from(["x", "y", ""])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)
COUNT = st.integers(min_value=-3, max_value=8)
DURATION = st.one_of(
    st.sampled_from(
        [
            "0",
            "300s",
            "5m",
            "1h30m",
            "1.5h",
            ".5s",
            "10ms",
            "3us",
            "2µs",
            "1d",
            "5 m",
            "-5m",
            "5",
            "",
            "m",
            "5M",
            "1h-30m",
            "1.s",
            "01s",
            "0s",
            "+5m",
        ]
    ),
    st.text(alphabet="0123456789.hms-µun ", max_size=6),
)


CLASS_NAME = st.one_of(
    st.sampled_from(
        ["qemu-x86", "a", "a.b-c", "", "Qemu", "-a", "a-", "a..b", "a_b", "a\n", "a" * 253]
    ),
    st.text(alphabet="abz09-.A_", max_size=8),
    st.just("a" * 254),
)


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any subset of `fields`."""
    return st.fixed_dictionaries({}, optional=fields)


DRIVER = optional(
    name=st.sampled_from(["power", "serial", "net"]),
    type=st.just("jumpstarter_driver_qemu.driver.QemuPower"),
    ref=st.sampled_from(["power", "other"]),
    config=st.dictionaries(st.sampled_from(["baud", "port"]), st.integers(0, 9), max_size=2),
)

SCOPES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "spec": optional(
        minReplicas=COUNT,
        maxReplicas=COUNT,
        minAvailableReplicas=COUNT,
        scaleDownCooldown=DURATION,
        virtualTargetClassName=CLASS_NAME,
        selector=optional(matchLabels=LABELS),
        template=optional(metadata=optional(labels=LABELS)),
    ),
    "spec.template.spec": optional(drivers=st.lists(DRIVER, max_size=4)),
    "spec.template.spec.drivers[]": DRIVER,
    "spec.scheduling.tolerations[]": optional(
        key=st.sampled_from(["", "dedicated", "example.com/gpu"]),
        operator=st.sampled_from(["Exists", "Equal"]),
        value=st.sampled_from(["", "virtual-targets"]),
        effect=st.sampled_from(["NoSchedule", "NoExecute", ""]),
        tolerationSeconds=st.integers(0, 60),
    ),
}


@cache
def program(cel: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(cel))


def cel_allows(rule: Rule, node: dict[str, Any]) -> bool:
    result = program(rule.cel).evaluate({"self": celpy.json_to_cel(node)})
    assert isinstance(result, celpy.celtypes.BoolType), f"{rule.id}: CEL gave {result!r}"
    return bool(result)


def test_every_rule_scope_has_a_generator() -> None:
    assert {rule.scope for rule in RULES} <= set(SCOPES)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.id)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_check_and_cel_agree(rule: Rule, data: st.DataObject) -> None:
    node = data.draw(SCOPES[rule.scope], label="node")
    errors = rule.check(node, rule.scope.replace("[]", "[0]"))
    assert cel_allows(rule, node) == (errors == []), f"{rule.id} on {node}: {errors}"
    for error in errors:
        assert error.field.startswith(rule.scope.replace("[]", "[0]"))
