"""A real kube-apiserver and etcd on loopback, for the end-to-end tests and `make run`.

The binaries are built from Go modules by `make control-plane` (see
`tools/control-plane/`). This module starts etcd and kube-apiserver on free loopback
ports in a private folder, authenticates an admin with a static token, waits until
`/readyz` answers, installs the generated CRDs and stops both processes (and removes
the folder) on exit, also when the caller fails.

No controllers run: there is no kube-controller-manager or scheduler, so Pods stay
Pending, namespaces stay Terminating and owned objects are not garbage collected.

For the fault tests, either process can be killed and started again on the same data
and ports, paused and resumed (SIGSTOP, SIGCONT), and etcd's history compacted; with
`audit=True` kube-apiserver writes an audit log of every write (who, what, when).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = [
    "REPO_ROOT",
    "ControlPlane",
    "ControlPlaneError",
    "binary_dir",
    "crd_files",
    "free_port",
    "require_binaries",
    "running_control_plane",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
BINARIES = ("etcd", "kube-apiserver", "kubectl")
ADMIN_USER = "admin"
START_TIMEOUT_S = 60.0


class ControlPlaneError(RuntimeError):
    """Something the person can act on: the message says what failed and what to run."""


def binary_dir() -> Path:
    """Where `make control-plane` puts the binaries (overridable for installed copies)."""
    return Path(os.environ.get("VIRTUALTARGET_BIN_DIR", REPO_ROOT / ".bin"))


def crd_files(root: Path = REPO_ROOT / "crds") -> list[Path]:
    """Every generated CRD: the top-level ones and those of the folders below."""
    return sorted(p for p in root.rglob("*.yaml") if p.name != "kustomization.yaml")


def jumpstarter_crds() -> list[Path]:
    """The generated CRDs but the `jumpstarter.dev` ones, and Jumpstarter's release CRDs."""
    from harness.jumpstarter_build import built  # it builds on this module

    ours = [p for p in crd_files() if p.parent.name != "jumpstarter"]
    return [*ours, *built().crds]


# Where `free_port` picks: below the kernel's ephemeral range (32768 and up unless
# ip_local_port_range says otherwise), whose ports any outgoing connection may take as its
# source port between the check and the listener's bind (a kube-apiserver once failed to
# start so: "bind: address already in use"), and below NodePorts' 30000-32767.
LISTEN_PORTS = range(20000, 30000)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` (loopback by default) that was free a moment ago, picked at
    random from `LISTEN_PORTS` (the kernel's own pick where that range overlaps its
    ephemeral one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if LISTEN_PORTS.stop <= _ephemeral_low():
            for _ in range(64):
                port = LISTEN_PORTS.start + secrets.randbelow(len(LISTEN_PORTS))
                try:
                    sock.bind((host, port))
                except OSError:  # in use: another pick
                    continue
                return port
        sock.bind((host, 0))
        picked: int = sock.getsockname()[1]
        return picked


def require_binaries(names: Sequence[str] = BINARIES) -> dict[str, Path]:
    """The paths of `names` in `binary_dir()`; a clear error naming the missing ones."""
    found = {name: binary_dir() / name for name in names}
    missing = [name for name, path in found.items() if not os.access(path, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"control plane: {', '.join(missing)} not found in {binary_dir()}; "
            "run `make control-plane` (builds them from Go modules)"
        )
    return found


def _write_service_account_key(path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
"""
# Every request of every client (reads and watches too), one event each when it ends; the
# apiserver's own loopback client is left out.
AUDIT_REQUESTS_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
"""


@dataclass
class ControlPlane:
    """A started etcd + kube-apiserver pair; use `running_control_plane()` to get one."""

    workdir: Path
    port: int
    token: str
    binaries: dict[str, Path]
    audit: bool = False
    audit_reads: bool = False  # with `audit`: every request, not only the writes
    etcd_port: int = 0
    # Where kube-apiserver listens and what it advertises (a node's IP for the node tier).
    address: str = "127.0.0.1"
    # kube-apiserver flags replacing (or, with None, removing) the loopback defaults.
    apiserver_flags: dict[str, str | None] = field(default_factory=dict)
    # More static-token users: name -> groups; their tokens are in `tokens` after start.
    token_users: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    # The CA that signed the serving certificate, when it is not the self-signed one.
    ca_path: Path | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)
    # name -> its arguments and its current process, so it can be started again
    _args: dict[str, list[str]] = field(default_factory=dict)
    _running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # name -> the binary it runs and what runs in the child before exec, for a restart
    _programs: dict[str, str] = field(default_factory=dict)
    _preexec: dict[str, Callable[[], object] | None] = field(default_factory=dict)
    # The processes another process on this machine runs for this plane, which this one
    # only uses (`harness.node.attached_node_cluster`): running, as far as it can tell.
    started_elsewhere: frozenset[str] = frozenset()
    # The CRD files this object applied last (`apply_crds`): the same again is a no-op.
    applied_crds: tuple[Path, ...] = ()

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        if self.ca_path is not None:
            return self.ca_path
        # kube-apiserver writes a self-signed serving certificate and its CA here.
        return self.workdir / "apiserver" / "apiserver.crt"

    @property
    def service_account_key(self) -> Path:
        """The key kube-apiserver signs and checks ServiceAccount tokens with."""
        return self.workdir / "sa.key"

    # -- start and stop -----------------------------------------------------------

    def spawn(
        self,
        name: str,
        args: Sequence[str],
        *,
        program: str | None = None,
        preexec_fn: Callable[[], object] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `self.binaries[program or name]` with `args` as `name` (a second kubelet
        is another name for the same program), its output in `<workdir>/<name>.log`."""
        log = (self.workdir / f"{name}.log").open("ab")
        self.logs.append(log)
        process = subprocess.Popen(
            [str(self.binaries[program or name]), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, not them
            preexec_fn=preexec_fn,
        )
        self.processes.append(process)
        self._args[name] = list(args)
        self._programs[name] = program or name
        self._preexec[name] = preexec_fn
        self._running[name] = process
        return process

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def start(self) -> None:
        self.etcd_port = free_port()
        etcd_port, peer_port = self.etcd_port, free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self.spawn(
            "etcd",
            [
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # a throwaway test store: durability buys nothing
                "--log-level=warn",
            ],
        )
        sa_key = self.service_account_key
        _write_service_account_key(sa_key)
        tokens = self.workdir / "tokens.csv"
        lines = [f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"']
        for user, groups in self.token_users.items():
            self.tokens[user] = secrets.token_hex(16)
            lines.append(f'{self.tokens[user]},{user},{user},"{",".join(groups)}"')
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        flags: dict[str, str | None] = {}
        if self.audit:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(AUDIT_REQUESTS_POLICY if self.audit_reads else AUDIT_POLICY)
            flags |= {
                "audit-policy-file": str(policy),
                "audit-log-path": str(self.audit_log),
                "audit-log-mode": "blocking",  # each event written before the answer
                # One file, never rotated: the readers read only it, and a long run's log
                # passes the default 100 MB (5,000 pools' fill lost all but its tail).
                "audit-log-maxsize": "0",
            }
        flags |= {
            "etcd-servers": etcd_url,
            "bind-address": self.address,
            "advertise-address": self.address,
            "secure-port": str(self.port),
            "cert-dir": str(self.workdir / "apiserver"),
            "token-auth-file": str(tokens),
            "authorization-mode": "RBAC",
            "service-cluster-ip-range": "10.96.0.0/24",
            "service-account-issuer": "https://kubernetes.default.svc.cluster.local",
            "service-account-key-file": str(sa_key),
            "service-account-signing-key-file": str(sa_key),
            # ServiceAccount admission needs the token controller to create each
            # namespace's default account; no controller runs here.
            "disable-admission-plugins": "ServiceAccount",
            "enable-admission-plugins": "MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            # On SIGTERM, drain the requests in flight, then give open watches 2 s, not
            # the request timeout (60 s): a client still watching must not hold the stop.
            "shutdown-send-retry-after": "true",
            "v": "1",
        }
        flags |= self.apiserver_flags
        self.spawn(
            "kube-apiserver",
            [f"--{name}={value}" for name, value in flags.items() if value is not None],
        )
        self._wait_ready()
        self._write_kubeconfig()

    # -- faults ---------------------------------------------------------------------

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL, timeout: float = 30) -> None:
        """Stop `name` (etcd or kube-apiserver) with `sig` and wait until it has exited;
        SIGKILL after `timeout` seconds."""
        process = self._running.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)

    def is_running(self, name: str) -> bool:
        """Whether `name` was started and not stopped since (`kill`), here or by the
        process this plane is attached to."""
        return name in self._running or name in self.started_elsewhere

    def running(self) -> list[str]:
        """The names of the processes started and not stopped since."""
        return sorted(self._running)

    def restart(self, name: str) -> None:
        """Start `name` again with the same arguments: same ports, same data."""
        if name in self._running:
            self.kill(name)
        self.spawn(
            name, self._args[name], program=self._programs[name], preexec_fn=self._preexec[name]
        )
        if name == "kube-apiserver":
            self._wait_ready()

    def pause(self, name: str) -> None:
        os.killpg(self._running[name].pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.killpg(self._running[name].pid, signal.SIGCONT)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (through its JSON gateway):
        watches resuming from an older version then get 410 Gone. The revision."""
        status = self._etcd("/v3/maintenance/status", {})
        revision = int(status["header"]["revision"])
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def advance_etcd(self, writes: int) -> None:
        """Write `writes` keys outside the apiserver's prefix: etcd's revision moves on
        while no Kubernetes object changes (ahead of a compaction, say)."""
        for index in range(writes):
            key = base64.b64encode(f"/virtualtarget-chaos/{index}".encode()).decode()
            self._etcd("/v3/kv/put", {"key": key, "value": key})

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.etcd_url + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events (metadata level: writes only, or every request with
        `audit_reads`), oldest first."""
        return list(self.iter_audit_events())

    def iter_audit_events(self) -> Iterator[dict[str, Any]]:
        """The same, one at a time (a long run's log holds hundreds of thousands)."""
        if not self.audit_log.is_file():
            return
        with self.audit_log.open() as log:
            for line in log:
                if line.strip():
                    yield json.loads(line)

    def pid(self, name: str) -> int:
        """The process id of `name` (etcd or kube-apiserver) as it runs now."""
        return self._running[name].pid

    def check_alive(self) -> None:
        """Raise with the last lines of its log when a started process has exited."""
        for process, log in zip(self.processes, self.logs, strict=True):
            if process.poll() is not None and process in self._running.values():
                tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-5:]
                name = Path(log.name).stem
                hint = " (is the port in use?)" if any("in use" in line for line in tail) else ""
                raise ControlPlaneError(
                    f"control plane: {name} exited with code {process.returncode}{hint}; "
                    f"last lines of {log.name}:\n  " + "\n  ".join(tail)
                )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the CA file appears only once it serves
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"}
        )
        last = "no answer"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as error:
                last = str(error)
            time.sleep(0.25)
        raise ControlPlaneError(
            f"control plane: kube-apiserver not ready after {START_TIMEOUT_S:.0f}s ({last}); "
            f"see {self.workdir / 'kube-apiserver.log'}"
        )

    def _write_kubeconfig(self) -> None:
        self.write_kubeconfig(self.kubeconfig, ADMIN_USER, self.token)

    def write_kubeconfig(self, path: Path, user: str, token: str) -> Path:
        """A kubeconfig for this apiserver that authenticates `user` with a bearer token."""
        path.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: loopback\n"
            "  cluster:\n"
            f"    server: {self.server}\n"
            f"    certificate-authority: {self.ca_file}\n"
            "users:\n"
            f"- name: {user}\n"
            "  user:\n"
            f"    token: {token}\n"
            "contexts:\n"
            "- name: loopback\n"
            "  context:\n"
            "    cluster: loopback\n"
            f"    user: {user}\n"
            "current-context: loopback\n"
        )
        path.chmod(0o600)
        return path

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        """A kubeconfig acting as a ServiceAccount, with a token from the TokenRequest API,
        so a test runs the product with exactly the permissions its RBAC grants."""
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=1h")
        return self.write_kubeconfig(
            path, f"system:serviceaccount:{namespace}:{name}", token.stdout.strip()
        )

    def stop(self) -> None:
        """Stop both processes by their ids, then close the logs: the apiserver first, and
        etcd once it has exited (without its store the apiserver's shutdown waits out the
        10 s below)."""
        for process in reversed(self.processes):
            if process.poll() is None:  # resumed first: a stopped process ignores SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGCONT)
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for log in self.logs:
            log.close()

    # -- use ----------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane; raise with its output when `check` fails."""
        result = subprocess.run(
            [
                str(self.binaries["kubectl"]),
                f"--kubeconfig={self.kubeconfig}",
                # Its discovery cache in the work folder, not in ~/.kube of whoever runs it.
                f"--cache-dir={self.workdir / 'kubectl-cache'}",
                *args,
            ],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def install_crds(self, files: Sequence[Path] | None = None) -> None:
        """Apply the CRDs and wait until each is Established."""
        files = crd_files() if files is None else list(files)
        if not files:
            raise ControlPlaneError("control plane: no CRDs found in crds/; run `make crds`")
        self.apply_crds(files)

    def apply_crds(self, files: Sequence[Path], *extra: str, again: bool = True) -> None:
        """`kubectl apply --server-side EXTRA` the CRD files and wait until each is
        Established; unless `again`, nothing when they are the files this object applied
        last (a test's Jumpstarter applies its release's on every start: about 0.5 CPU-s
        of kubectl and apiserver each time)."""
        if not again and tuple(files) == self.applied_crds:
            return
        args = [arg for path in files for arg in ("-f", str(path))]
        self.kubectl("apply", "--server-side", *extra, *args)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *args)
        self.applied_crds = tuple(files)

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` for the admin user."""
        from kubernetes import client, config  # imported here: the CLI does not need it

        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration)


@contextlib.contextmanager
def running_control_plane(
    workdir: Path | None = None,
    *,
    install_crds: bool = True,
    jumpstarter: bool = False,
    audit: bool = False,
    audit_reads: bool = False,
    token_users: dict[str, tuple[str, ...]] | None = None,
) -> Iterator[ControlPlane]:
    """Start etcd and kube-apiserver; stop them and remove the folder on exit. With
    `audit`, kube-apiserver logs every write (`ControlPlane.audit_events`); with
    `audit_reads`, every request. `token_users` are more static-token users (name ->
    groups), each then in `tokens`. With `jumpstarter`, the `jumpstarter.dev` kinds are
    Jumpstarter's release's own CRDs (`harness.jumpstarter_build`), as a cluster with
    Jumpstarter installed has them, in place of the generated Exporter CRD."""
    binaries = require_binaries()
    owned = workdir is None
    root = Path(tempfile.mkdtemp(prefix="virtualtarget-cp-")) if owned else workdir
    assert root is not None
    root.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(
        workdir=root,
        port=free_port(),
        token=secrets.token_hex(16),
        binaries=binaries,
        audit=audit or audit_reads,
        audit_reads=audit_reads,
        token_users=dict(token_users or {}),
    )
    try:
        plane.start()
        if install_crds:
            plane.install_crds(jumpstarter_crds() if jumpstarter else None)
        yield plane
    finally:
        plane.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)
