"""The two images of Jumpstarter main built here (`harness.main_images`), held to main's own
Containerfiles and provisioner, read from the vendored tarballs, without a build: where
each image holds what, how it starts, as which user."""

from __future__ import annotations

import json
import re
import shlex

import yaml

from api.provisioners.qemu import DEFAULT_IMAGES
from harness.images import QEMU_EXPORTER_CONTEXT
from harness.jumpstarter_build import MAIN_SOURCE
from harness.jumpstarter_images import release_file
from harness.main_images import EXEC_IN_IMAGE, EXPORTER, RUNTIME, main_file
from pool.model.jumpstarter import EXEC_BINARY, EXPORTER_UID, LAUNCHER_SOCKET
from tests.dockerfiles import final_stage_instructions, stages

QEMU_GO = "controller/internal/exporterset/provisioners/qemu/qemu.go"
E2E_MANIFEST = "e2e/manifests/exporterset-qemu-kind-x86_64.yaml"


def _ours(image: str) -> str:
    return (
        (EXPORTER.context if image == "exporter" else RUNTIME.context)
        .joinpath("Dockerfile")
        .read_text()
    )


def _go_constant(name: str) -> str:
    found = re.search(rf"\b{name}\s+(?:int64\s+)?=\s+(\S+)", release_file(QEMU_GO, MAIN_SOURCE))
    assert found, name
    return found[1].strip('"')


def _copies(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """COPY's target -> its source, its flags dropped."""
    copies = {}
    for word, rest in instructions:
        if word == "COPY":
            *sources, target = [w for w in shlex.split(rest) if not w.startswith("--")]
            copies[target] = sources[-1]
    return copies


def _config(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """The last USER, ENTRYPOINT, CMD and ENV PATH a stage sets, as written."""
    config = {}
    for word, rest in instructions:
        if word in {"USER", "ENTRYPOINT", "CMD"}:
            config[word] = rest
        elif word == "ENV" and rest.startswith("PATH="):
            config["PATH"] = rest.removeprefix("PATH=").strip('"')
    return config


def test_main_s_provisioner_copies_the_exec_binary_from_where_both_exporter_images_hold_it() -> (
    None
):
    main = _copies(final_stage_instructions(main_file(EXPORTER.containerfile)))
    ours = _copies(final_stage_instructions(_ours("exporter")))
    assert main[EXEC_IN_IMAGE].endswith("/release/jumpstarter-exec")  # the cargo build's
    assert ours[EXEC_IN_IMAGE] == "jumpstarter-exec"
    assert EXEC_IN_IMAGE == _go_constant("jmpExecBinaryPath") == EXEC_BINARY
    assert _go_constant("launcherSocketPath") == LAUNCHER_SOCKET
    assert int(_go_constant("exporterNonRootUID")) == EXPORTER_UID


def test_the_exporter_runs_as_main_s_does_with_jmp_on_the_venv_s_path() -> None:
    main = _config(final_stage_instructions(main_file(EXPORTER.containerfile)))
    ours = _config(final_stage_instructions(_ours("exporter")))
    # Neither sets a user, an entrypoint or a command: the Pod names `jmp run` and its user.
    assert {k: v for k, v in main.items() if k != "PATH"} == {}
    assert {k: v for k, v in ours.items() if k != "PATH"} == {}
    assert main["PATH"] == "/jumpstarter/bin:$PATH"
    assert ours["PATH"].startswith("/jumpstarter/bin:") and "$" not in ours["PATH"]
    # The same venv, made and filled the same way: uv and uvx in /bin, `uv venv
    # /jumpstarter`, `uv pip install` of main's wheels into it.
    for containerfile in (main_file(EXPORTER.containerfile), _ours("exporter")):
        assert "uv venv /jumpstarter " in containerfile
        assert "VIRTUAL_ENV=/jumpstarter uv pip install " in containerfile
    assert re.search(r"^COPY --from=\S+ /uv /uvx /bin/$", main_file(EXPORTER.containerfile), re.M)
    assert re.search(r"^COPY uv uvx /bin/$", _ours("exporter"), re.M)


def test_the_runtime_starts_as_main_s_serving_the_launcher_socket_as_its_user() -> None:
    main = _config(final_stage_instructions(main_file(RUNTIME.containerfile)))
    ours = _config(final_stage_instructions(_ours("runtime")))
    assert ours.pop("PATH") == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert ours == main  # Fedora's base image sets the PATH, main's Containerfile none
    assert json.loads(main["ENTRYPOINT"]) == ["/shared/jumpstarter-exec"]
    assert json.loads(main["CMD"]) == ["serve", "--socket", LAUNCHER_SOCKET]
    assert main["USER"] == "65532:65532"


def test_the_runtime_holds_the_firmware_main_s_provisioner_renders() -> None:
    go = release_file(QEMU_GO, MAIN_SOURCE)
    rendered = set(re.findall(r'"(/usr/share/[^"]+\.fd)"', go))
    assert rendered == {
        "/usr/share/AAVMF/AAVMF_CODE.fd",
        "/usr/share/AAVMF/AAVMF_VARS.fd",
        "/usr/share/edk2/ovmf/OVMF_CODE.fd",
        "/usr/share/edk2/ovmf/OVMF_VARS.fd",
    }
    runtime = _ours("runtime")
    # Fedora's OVMF paths are links to Debian's; AAVMF's are Debian's own (qemu-efi-aarch64).
    for path in sorted(p for p in rendered if "/edk2/" in p):
        assert re.search(rf"ln -s /usr/share/OVMF/\S+_4M\.fd {re.escape(path)}", runtime), path
    assert "qemu-efi-aarch64" in runtime and "ovmf" in runtime


def test_the_runtime_shares_the_qemu_exporter_s_qemu_layer() -> None:
    """Its first instructions are the QEMU exporter's final stage's, word for word, so
    buildah's layer cache builds Debian's QEMU once for both."""
    exporter = stages((QEMU_EXPORTER_CONTEXT / "Dockerfile").read_text())[-1]
    (runtime,) = stages(_ours("runtime"))
    assert runtime[:3] == exporter[:3]
    assert [word for word, _ in runtime[:3]] == ["FROM", "LABEL", "RUN"]


def test_the_images_have_the_names_main_s_e2e_manifest_runs() -> None:
    documents = list(yaml.safe_load_all(release_file(E2E_MANIFEST, MAIN_SOURCE)))
    (vtc,) = [d for d in documents if d and d["kind"] == "VirtualTargetClass"]
    images = vtc["spec"]["images"]
    assert images["exporter"]["image"] == EXPORTER.name
    assert images["runtime"]["image"] == RUNTIME.name
    assert {images[r]["imagePullPolicy"] for r in ("exporter", "runtime")} == {"IfNotPresent"}
    # This product's defaults are the same repositories, at the release's tag.
    for role, name in (("exporter", EXPORTER.name), ("runtime", RUNTIME.name)):
        assert DEFAULT_IMAGES[role].rpartition(":")[0] == name.rpartition(":")[0]
