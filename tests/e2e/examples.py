"""What kubectl answers for `examples/` and `examples/invalid/`: one source for every tier
that applies them (the loopback tier here, the node tier in tests/node)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from api.rules import RULES
from harness.controlplane import REPO_ROOT
from tests.docpages import Ran
from tests.e2e.objects import exporter_set, virtual_target_class

EXAMPLES = REPO_ROOT / "examples"
RULES_BY_ID = {rule.id: rule for rule in RULES}


def in_namespace(path: Path, namespace: str) -> str:
    """The manifests of `path` moved into `namespace`, as a YAML stream for kubectl."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for document in documents:
        document["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(documents)


def invalid_examples() -> list[Path]:
    return sorted((EXAMPLES / "invalid").glob("*.yaml"))


def rule_of(path: Path) -> str:
    """The rule id on the example's `# violates: <rule id>` line."""
    first = path.read_text().splitlines()[0]
    return first.removeprefix("# violates:").strip()


def rule_examples() -> list[Path]:
    """The invalid examples whose rule the CRD carries as CEL."""
    return [p for p in invalid_examples() if rule_of(p) in RULES_BY_ID]


def assert_refused_by_its_rule(path: Path, result: subprocess.CompletedProcess[str]) -> None:
    """`kubectl apply` of an invalid example was refused with its rule's one message."""
    rule = RULES_BY_ID[rule_of(path)]
    assert result.returncode != 0, f"{path.name} was accepted: {result.stdout}"
    name = next(d for d in yaml.safe_load_all(path.read_text()) if d)["metadata"]["name"]
    assert result.stderr.startswith(f'The {rule.kind} "{name}" is invalid: '), result.stderr
    assert f"{rule.error_type.text}: " in result.stderr
    assert rule.message in result.stderr
    # One message for the one wrong field (several would come as a bracketed list).
    assert not result.stderr.split(" is invalid: ", 1)[1].startswith("["), result.stderr


def write_examples(folder: Path, namespace: str) -> Path:
    """`examples/*.yaml` moved into `namespace`, under the same file names, in `folder`."""
    for path in sorted(EXAMPLES.glob("*.yaml")):
        (folder / path.name).write_text(in_namespace(path, namespace))
    return folder


def missing_class_warning(namespace: str) -> str:
    """What the webhook warns when the examples' set arrives before its class."""
    (document,) = yaml.safe_load_all((EXAMPLES / "exporterset-qemu.yaml").read_text())
    name = document["spec"]["virtualTargetClassName"]
    return (
        f'Warning: VirtualTargetClass "{name}" not found in namespace "{namespace}"; '
        "no instances are created until it exists\n"
    )


def assert_examples_applied(result: subprocess.CompletedProcess[str] | Ran, namespace: str) -> None:
    """`kubectl apply -f` of the examples folder: in file-name order, the set before its
    class (so `kubectl delete -f` removes the set first), and the one warning that says so."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == missing_class_warning(namespace)
    created = [line.split("/")[0] for line in result.stdout.splitlines()]
    assert created.index("exporterset.virtualtarget.jumpstarter.dev") < created.index(
        "virtualtargetclass.virtualtarget.jumpstarter.dev"
    ), result.stdout


# A denial only the webhook can give (it reads another object): the set "warm" asks for a
# warm buffer of a class that keeps none. Apply the class, then the set.
CROSS_OBJECT_DENIAL = (
    'The ExporterSet "warm" is invalid: spec.minAvailableReplicas: Invalid value: 2: '
    'must be 0: VirtualTargetClass "lazy" has bindingMode WaitForFirstConsumer, '
    "which keeps no warm instances\n"
)


def cross_object_case(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The class and the set CROSS_OBJECT_DENIAL answers."""
    return (
        virtual_target_class("lazy", namespace, bindingMode="WaitForFirstConsumer"),
        exporter_set("warm", namespace, class_name="lazy", minAvailableReplicas=2),
    )
