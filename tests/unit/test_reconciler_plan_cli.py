"""`virtualtarget plan` refuses bad input and an unreachable apiserver in one line (the
answers of a real apiserver are in tests/e2e/test_plan_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.controlplane import free_port
from virtualtarget.cli import main

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
users:
- name: someone
  user: {{token: not-a-token}}
contexts:
- name: nowhere
  context: {{cluster: nowhere, user: someone, namespace: lab}}
current-context: nowhere
"""


def refusal(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("plan: "), captured.err
    return code, captured.err.strip()


def test_missing_or_broken_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = refusal(capsys, "--kubeconfig", str(tmp_path / "absent"))
    assert code == 2 and err == f"plan: kubeconfig {tmp_path / 'absent'}: no such file"
    for text, says in (
        ("key: [", "not valid YAML"),
        ("[]", "not a kubeconfig"),
        ("{}", "current-context"),
    ):
        broken = tmp_path / "broken"
        broken.write_text(text)
        code, err = refusal(capsys, "--kubeconfig", str(broken))
        assert code == 2 and says in err


def test_kubeconfig_comes_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "from-env"))
    code, err = refusal(capsys)
    assert code == 2 and f"kubeconfig {tmp_path / 'from-env'}: no such file" in err


def test_unreachable_apiserver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # free a moment ago: nothing answers there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(port=port))
    for extra in ([], ["-n", "lab"], ["pool"], ["-o", "json"]):
        code, err = refusal(capsys, "--kubeconfig", str(kubeconfig), *extra)
        assert code == 2
        assert err.startswith(f"plan: cannot reach the apiserver https://127.0.0.1:{port}: ")
        assert "Connection refused" in err


def test_unknown_provisioner_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = refusal(capsys, "--provisioner", "nope.example.com")
    assert code == 2 and "unknown provisioner 'nope.example.com'" in err
    with pytest.raises(SystemExit) as exited:
        main(["plan", "-o", "yaml"])
    assert exited.value.code == 2
