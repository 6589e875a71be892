"""What the product image must hold, checked on the built image run by runc as the
Deployments run it (their user, a read-only root filesystem, no capabilities, no
network): every command answers `--help`, nothing can be written outside /tmp, the
installed packages are exactly the lock's runtime ones, and what needs an extra says so."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.deploy_render import REPO, render_overlay
from harness.images import Unpacked
from harness.lock import LOCK
from tests.unit.test_lock import PYPROJECT, locked
from virtualtarget.cli import SUBCOMMANDS

pytestmark = pytest.mark.image

SCENARIO = REPO / "examples" / "scenarios" / "office-hours.yaml"


def deployments() -> list[dict[str, Any]]:
    return [o for o in render_overlay("cert-manager") if o["kind"] == "Deployment"]


DEPLOYED = sorted(
    {c["args"][0] for d in deployments() for c in d["spec"]["template"]["spec"]["containers"]}
)
# What the image is for: the Deployments' commands and what a user runs from it.
COMMANDS = [*DEPLOYED, "certs", "plan", "validate", "simulate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_answers_help(image: Unpacked, command: str) -> None:
    assert command in SUBCOMMANDS
    result = image.run([command, "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: virtualtarget {command}")


def test_the_exporter_set_controller_entrypoint_answers_help(image: Unpacked) -> None:
    result = image.run(["--help"], entrypoint=["/exporter-set-controller"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: exporter-set-controller"), result.stdout
    assert "--zap-log-level" in result.stdout


def test_the_exporter_set_controller_without_namespace_says_it_needs_it(image: Unpacked) -> None:
    """Jumpstarter's operator runs `/exporter-set-controller` with these flags and sets
    NAMESPACE; without it the command says so rather than serving the cluster."""
    flags = [
        "--provisioner=qemu.jumpstarter.dev",
        "--leader-elect",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=0",
    ]
    result = image.run(flags, entrypoint=["/exporter-set-controller"])
    assert result.returncode == 1, result.stderr
    assert "NAMESPACE environment variable is required" in result.stderr


def test_simulate_without_the_extra_writes_the_summary_and_says_what_to_install(
    image: Unpacked, tmp_path: Path
) -> None:
    """The image installs no extra: `simulate` still writes its summary, and says in one
    line how to get the plot."""
    tmp_path.chmod(0o777)  # written by the image's user
    mounts = {"/scenario": SCENARIO.parent, "/out": tmp_path}
    scenario = f"/scenario/{SCENARIO.name}"
    plotted = image.run(["simulate", "--scenario", scenario, "--out", "/out/a"], mounts=mounts)
    assert plotted.returncode == 1, plotted.stderr
    assert plotted.stderr.count("\n") == 1
    assert plotted.stderr.startswith("simulate: plotting needs matplotlib: ")
    assert "pip install 'virtualtarget[simulate]'" in plotted.stderr
    assert (tmp_path / "a" / "summary.md").is_file()
    assert not (tmp_path / "a" / "pool.png").exists()
    plain = image.run(
        ["simulate", "--scenario", scenario, "--out", "/out/b", "--no-plot"], mounts=mounts
    )
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    assert (tmp_path / "b" / "summary.md").is_file()


def test_runs_as_the_deployments_non_root_user_on_a_read_only_root(image: Unpacked) -> None:
    user = image.config["config"]["User"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0  # runAsNonRoot can only check a numeric user
    for deployment in deployments():
        context = deployment["spec"]["template"]["spec"]["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid))
    probe = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "for path in ('/opt/venv/probe', '/probe', '/tmp/probe'):\n"
        "    try:\n"
        "        open(path, 'w').close()\n"
        "        print(path, 'written')\n"
        "    except OSError as err:\n"
        "        print(path, err.strerror)\n"
    )
    result = image.run(["-c", probe], entrypoint=["python3"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{uid} {gid}",
        "/opt/venv/probe Read-only file system",
        "/probe Read-only file system",
        "/tmp/probe written",  # the Deployments' emptyDir
    ]


def installed(image: Unpacked) -> dict[str, str]:
    probe = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))\n"
    )
    result = image.run(["-c", probe], entrypoint=["python3"])
    assert result.returncode == 0, result.stderr
    return {canonicalize_name(k): v for k, v in json.loads(result.stdout).items()}


def runtime_lock() -> dict[str, str]:
    """What the image should install from the lock: every entry whose marker holds on
    CPython 3.11 on Linux, less the build requirements (removed after the wheel build)."""
    build_only = {
        canonicalize_name(Requirement(spec).name) for spec in PYPROJECT["build-system"]["requires"]
    }
    markers: dict[str, str] = {}
    for line in LOCK.read_text().replace("\\\n", " ").splitlines():
        name, _, rest = line.partition("==")
        if rest and ";" in rest:
            markers[canonicalize_name(name)] = rest.split(";", 1)[1].split("--hash")[0].strip()
    environment = {"python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux"}
    return {
        name: version
        for name, (version, _) in locked().items()
        if name not in build_only
        and (name not in markers or Marker(markers[name]).evaluate(environment))
    }


def test_installs_exactly_the_locked_runtime_without_extras_or_build_tools(
    image: Unpacked,
) -> None:
    expected = runtime_lock()
    expected["virtualtarget"] = PYPROJECT["project"]["version"]
    got = installed(image)
    print(f"{len(got)} distributions installed")
    assert got == expected
    # Neither the simulate extra nor the test tools, nor pip itself.
    for extra in PYPROJECT["project"]["optional-dependencies"].values():
        for spec in extra:
            name = canonicalize_name(Requirement(spec).name)
            assert name == "virtualtarget" or name not in got, name
    assert "pip" not in got and "matplotlib" not in got and "pytest" not in got
    probe = "import importlib.util as u; print(u.find_spec('matplotlib'), u.find_spec('pytest'))"
    assert image.run(["-c", probe], entrypoint=["python3"]).stdout.strip() == "None None"


# The product's packages as the image installs them: the two adapters, the pool's logic
# they share, and what both use. `harness/` (control planes, clusters, image and guest
# builds, the stand-in) is development tooling and stays in the checkout.
PRODUCT_PACKAGES = {"api", "certs", "pool", "reconciler", "scrape", "virtualtarget", "webhook"}


def test_the_image_holds_the_product_and_none_of_the_harness(image: Unpacked) -> None:
    probe = (
        "import importlib.metadata as m, importlib.util as u, json\n"
        "files = m.distribution('virtualtarget').files or []\n"
        "tops = sorted({f.parts[0] for f in files if f.suffix == '.py'})\n"
        "print(json.dumps([tops, u.find_spec('harness') is None]))\n"
    )
    result = image.run(["-c", probe], entrypoint=["python3"])
    assert result.returncode == 0, result.stderr
    tops, no_harness = json.loads(result.stdout)
    assert set(tops) == PRODUCT_PACKAGES
    assert no_harness
    # The harness's commands are refused, and the refusal lists what the image offers.
    for harness_command in ("cluster", "dev"):
        refused = image.run([harness_command])
        assert refused.returncode == 2, refused.stdout
        assert f"invalid choice: '{harness_command}'" in refused.stderr, refused.stderr
        offered = re.findall(r"'([a-z-]+)'", refused.stderr.split("choose from", 1)[1])
        assert offered == list(SUBCOMMANDS), refused.stderr
