"""Jumpstarter's released controller and router, run against a control plane as Jumpstarter's
0.9.0 operator configures them, for one namespace.

What the operator renders for an install (controller/deploy/operator, `jumpstarter_controller.go`
of the release), and what is done here in its place:

- the Secrets `jumpstarter-controller-secret` and `jumpstarter-router-secret` (key `key`),
  whose values the controller and the router get as `CONTROLLER_KEY` and `ROUTER_KEY`;
- the ConfigMap `jumpstarter-controller`: `config` (internal authentication with the prefix
  `internal:`, no JWT issuers, provisioning off, gRPC keepalive `minTime: 1s` and
  `permitWithoutStream: true`) and `router` (the `default` router's endpoint);
- the ConfigMap `jumpstarter-service-ca-cert` (`ca.crt`), the CA of the serving certificate
  both present (`EXTERNAL_CERT_PEM`, `EXTERNAL_KEY_PEM`): `jmp admin create client` and a
  pool's exporter config carry it;
- the environment: `NAMESPACE`, `GRPC_ENDPOINT`, `GRPC_ROUTER_ENDPOINT`, `GIN_MODE=release`.

The controller listens on fixed ports (`:8082` gRPC, `:8081` its probes, `127.0.0.1:8085`
its OIDC issuer, `:8086` its login service) and the router on `:8083`. So each pair runs in
a network namespace of its own (`harness.netns`), reached through relays on free ports of an
address of this machine: its loopback for the loopback tier, the node IP for the node tier,
where Pods dial it. Many run at once, one per namespace they serve.

Start waits until the controller accepts a token it issued (its internal issuer starts after
its gRPC server: an exporter that dials sooner is refused "oidc: authenticator not
initialized"), checked with the release's own client library (what `jmp get exporters`
runs), in this process.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import yaml

from certs.authority import CertificateSet, ensure_certificates
from harness.controlplane import ControlPlane, ControlPlaneError
from harness.jumpstarter_build import RELEASE, JumpstarterBuild, built
from harness.netns import NetworkNamespace

__all__ = [
    "CA_CONFIGMAP",
    "Jumpstarter",
    "create_client_config",
    "install_crds",
    "running_jumpstarter",
]

CONFIGMAP = "jumpstarter-controller"
CA_CONFIGMAP = "jumpstarter-service-ca-cert"
KEY_SECRETS = {
    "CONTROLLER_KEY": "jumpstarter-controller-secret",
    "ROUTER_KEY": "jumpstarter-router-secret",
}
CONTROLLER_PORT, ROUTER_PORT = 8082, 8083  # fixed in the release's source
READY_TIMEOUT_S = 90.0
BURST_IN_FLIGHT = 20  # requests of a burst in flight at once (`request_leases`)
# The operator's `buildConfig` with the defaults of a Jumpstarter resource: internal tokens.
CONFIG = {
    "authentication": {"internal": {"prefix": "internal:"}, "jwt": []},
    "provisioning": {"enabled": False},
    "grpc": {"keepalive": {"minTime": "1s", "permitWithoutStream": True}},
}


def install_crds(
    plane: ControlPlane, release: JumpstarterBuild | None = None, *, again: bool = True
) -> None:
    """Jumpstarter's own `jumpstarter.dev` CRDs of the release, as its operator installs them
    (they take the place of any other definition of those kinds); unless `again`, not when
    `plane` applied these last."""
    plane.apply_crds((release or built()).crds, "--force-conflicts", again=again)


def create_client_config(
    namespace: str, kubeconfig: Path, name: str, out: Path, *, ca_pem: str = ""
) -> Path:
    """A Jumpstarter `Client` in `namespace` and its ClientConfig file `out`: what the
    release's `jmp admin create client NAME --unsafe --out FILE --nointeractive` does,
    through the same library calls, in this process (a `jmp` start is 2-3 CPU-seconds
    of imports). The token is the credential the controller issues for the Client; the CA
    is the namespace's `jumpstarter-service-ca-cert`, or `ca_pem` where that is empty (an
    operator install without cert-manager)."""
    from jumpstarter.config.client import ClientConfigV1Alpha1
    from jumpstarter_kubernetes import ClientsV1Alpha1Api

    async def create() -> Any:
        async with ClientsV1Alpha1Api(namespace, str(kubeconfig), None) as api:
            await api.create_client(name, {}, None)
            return await api.get_client_config(name, allow=[], unsafe=True)

    try:
        config = asyncio.run(create())
    except Exception as error:
        raise ControlPlaneError(f"jmp admin create client {name} failed: {error!r}") from error
    config.drivers.unsafe, config.drivers.allow, config.tls.insecure = True, [], False
    if ca_pem and not config.tls.ca:
        config.tls.ca = base64.b64encode(ca_pem.encode()).decode()
    ClientConfigV1Alpha1.save(config, out)
    return out


@dataclass
class Jumpstarter:
    """A running controller and router serving `namespace`."""

    plane: ControlPlane
    namespace: str
    workdir: Path
    release: JumpstarterBuild
    address: str = "127.0.0.1"  # where its relays listen on this machine
    endpoint: str = ""  # what exporters and clients dial (GRPC_ENDPOINT)
    router_endpoint: str = ""
    certificates: CertificateSet | None = None
    netns: NetworkNamespace | None = None
    _env: dict[str, str] = field(default_factory=dict)
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def ca_pem(self) -> str:
        assert self.certificates is not None
        return self.certificates.ca_pem.decode()

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # -- what the operator renders ------------------------------------------------

    def _apply(self, *objects: dict[str, Any]) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        self.plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)

    def _configure(self) -> None:
        meta = {"namespace": self.namespace}
        keys = {var: secrets.token_urlsafe(32) for var in KEY_SECRETS}
        self._apply(
            *(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {**meta, "name": name},
                    "data": {"key": base64.b64encode(keys[var].encode()).decode()},
                }
                for var, name in KEY_SECRETS.items()
            ),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {**meta, "name": CONFIGMAP},
                "data": {
                    "config": yaml.safe_dump(CONFIG),
                    "router": yaml.safe_dump({"default": {"endpoint": self.router_endpoint}}),
                },
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {**meta, "name": CA_CONFIGMAP},
                "data": {"ca.crt": self.ca_pem},
            },
        )
        self._env.update(keys)

    # -- the processes ------------------------------------------------------------

    def _addresses(self) -> None:
        """Where the two listen and what they advertise, and the kubeconfig they use."""
        api = self.plane.address  # the kubeconfig's: loopback, or the node IP
        self.netns = NetworkNamespace.create([api] if api != "127.0.0.1" else [])
        self.netns.forward_out(self.plane.port, api)
        controller, router = (
            self.netns.forward_in(port, self.address) for port in (CONTROLLER_PORT, ROUTER_PORT)
        )
        self.endpoint = f"{self.address}:{controller}"
        self.router_endpoint = f"{self.address}:{router}"
        hosts = sorted({"127.0.0.1", self.address})
        self.certificates = ensure_certificates(
            self.workdir / "tls", "jumpstarter-grpc", self.namespace, hosts=hosts
        )

    def _command(self, name: str) -> list[str]:
        binary = str(self.release.controller if name == "controller" else self.release.router)
        assert self.netns is not None
        return self.netns.command([binary, f"--kubeconfig={self.plane.kubeconfig}"])

    def start(self, name: str) -> None:
        """Start `controller` or `router` (again, after `stop`)."""
        assert self.certificates is not None
        env = {
            **os.environ,
            **self._env,
            "NAMESPACE": self.namespace,
            "GRPC_ENDPOINT": self.endpoint,
            "GRPC_ROUTER_ENDPOINT": self.router_endpoint,
            "EXTERNAL_CERT_PEM": str(self.certificates.cert),
            "EXTERNAL_KEY_PEM": str(self.certificates.key),
            "GIN_MODE": "release",
        }
        log = self.log(name).open("ab")
        self._logs.append(log)
        self._processes[name] = subprocess.Popen(
            self._command(name),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, grace: float = 3.0) -> None:
        """Stop `controller` or `router` (SIGKILL: as a crash would). The release's controller
        does not exit on SIGTERM before its manager's shutdown timeout (its gRPC gateway's
        listener is never closed): after `grace` seconds it gets SIGKILL."""
        process = self._processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def check_alive(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                tail = self.log(name).read_text(errors="replace").splitlines()[-10:]
                raise ControlPlaneError(
                    f"jumpstarter {name} exited ({process.returncode}): " + "\n".join(tail)
                )

    # -- clients ------------------------------------------------------------------

    def client_config(self, name: str) -> Path:
        """A Jumpstarter `Client` in the namespace and its ClientConfig file
        (`create_client_config`), made once."""
        out = self.workdir / f"client-{name}.yaml"
        if out.exists():
            return out
        return create_client_config(self.namespace, self.plane.kubeconfig, name, out)

    def client(self, name: str = "dev") -> Any:
        """The release's client library, what `jmp` runs, as the Client `name` (made on
        first use): called in this process, a request costs a gRPC round trip instead of a
        `jmp` start (2-3 CPU-seconds of imports each: docs/measurements.md)."""
        from jumpstarter.config.client import ClientConfigV1Alpha1

        return ClientConfigV1Alpha1.from_file(self.client_config(name))

    def request_lease(
        self,
        selector: str,
        name: str,
        duration: timedelta = timedelta(minutes=30),
        *,
        exporter: str = "",
        begin: datetime | None = None,
    ) -> str:
        """What `jmp create lease -l SELECTOR --lease-id NAME` asks: a Lease the controller
        assigns (or pends, or ends); its name. With `exporter`, pinned to that Exporter
        (`--name`: its `spec.exporterRef`); with `begin`, booked for then (`--begin-time`:
        its `spec.beginTime`)."""
        try:
            self.client().create_lease(
                selector=selector, exporter_name=exporter or None, duration=duration,
                begin_time=begin, lease_id=name,
            )  # fmt: skip
        except Exception as error:  # the gRPC status says why, as jmp prints it
            raise ControlPlaneError(f"create lease {name} ({selector}): {error}") from error
        return name

    def request_leases(
        self, requests: Sequence[tuple[str, str]], duration: timedelta = timedelta(minutes=30)
    ) -> None:
        """A burst: `request_lease(selector, name)` for each pair, all in flight together
        (as many clients asking at once; at most BURST_IN_FLIGHT at a time)."""
        client = self.client()
        limit = asyncio.Semaphore(BURST_IN_FLIGHT)

        async def one(selector: str, name: str) -> None:
            async with limit:  # the library's call is a coroutine inside a running loop
                await client.create_lease(
                    selector=selector, exporter_name=None, duration=duration,
                    begin_time=None, lease_id=name,
                )  # fmt: skip

        async def burst() -> None:
            await asyncio.gather(*(one(selector, name) for selector, name in requests))

        try:
            asyncio.run(burst())
        except Exception as error:
            raise ControlPlaneError(f"create leases ({len(requests)}): {error}") from error

    def release_lease(self, name: str) -> None:
        """What `jmp delete lease NAME` asks: the client releases it (the controller ends it)."""
        try:
            self.client().delete_lease(name=name)
        except Exception as error:
            raise ControlPlaneError(f"delete lease {name}: {error}") from error

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Wait until the controller accepts a token it issued (what `jmp get exporters`
        asks); the seconds it took."""
        started = time.monotonic()
        while True:
            try:
                self.client().list_exporters()
                return time.monotonic() - started
            except Exception:  # refused until its issuer is up; no Client yet
                self.check_alive()
                if time.monotonic() - started > timeout:
                    raise ControlPlaneError(
                        f"jumpstarter controller not ready in {timeout:.0f} s "
                        f"(log: {self.log('controller')})"
                    ) from None
                time.sleep(0.5)

    def close(self) -> None:
        # SIGKILL at once: the controller would hold its SIGTERM for 3 s of `stop`'s grace
        # (above), at every test's end, and nothing here needs its graceful stop: it runs
        # without leader election, and what it did is in the apiserver.
        for name in list(self._processes):
            self.stop(name, signal.SIGKILL)
        if self.netns is not None:
            self.netns.close()
        for log in self._logs:
            log.close()


@contextlib.contextmanager
def running_jumpstarter(
    plane: ControlPlane, namespace: str, workdir: Path, *, address: str = "127.0.0.1"
) -> Iterator[Jumpstarter]:
    """Jumpstarter's release serving `namespace` (which must exist), ready when yielded, its
    CRDs installed on `plane` first (unless this plane object applied them last); reached at
    free ports of `address` of this machine."""
    release = built()
    workdir.mkdir(parents=True, exist_ok=True)
    install_crds(plane, release, again=False)
    running = Jumpstarter(plane, namespace, workdir, release, address=address)
    try:
        running._addresses()
        running._configure()
        running.start("controller")
        running.start("router")
        took = running.wait_ready()
        print(
            f"jumpstarter {RELEASE} controller and router for {namespace} at {running.endpoint}: "
            f"ready in {took:.1f} s",
            flush=True,
        )
        yield running
    finally:
        running.close()


class JumpstarterSupply:
    """Fresh namespaces, each already served by its own ready controller and router.

    A controller refuses every token for its first seconds (its issuer starts after it: about
    10 s here), so the next one is started in the background while a test uses the last:
    a test takes one that is ready. Each is stopped when its test gives it back."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        prefix: str = "t",
        *,
        address: str = "127.0.0.1",
        make_namespace: Callable[[str], object] | None = None,
    ) -> None:
        self.plane, self.workdir, self.prefix, self.address = plane, workdir, prefix, address
        self.make_namespace = make_namespace or (
            lambda name: plane.kubectl("create", "namespace", name)
        )
        self._next: concurrent.futures.Future[tuple[contextlib.ExitStack, Jumpstarter]] | None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._next = None

    def _prepare(self) -> tuple[contextlib.ExitStack, Jumpstarter]:
        namespace = f"{self.prefix}-{secrets.token_hex(4)}"
        self.make_namespace(namespace)
        stack = contextlib.ExitStack()
        try:
            running = stack.enter_context(
                running_jumpstarter(
                    self.plane, namespace, self.workdir / namespace, address=self.address
                )
            )
        except BaseException:
            stack.close()
            raise
        return stack, running

    @contextlib.contextmanager
    def take(self) -> Iterator[Jumpstarter]:
        """A ready one for the block; the next one starts meanwhile."""
        future = self._next or self._pool.submit(self._prepare)
        self._next = self._pool.submit(self._prepare)
        stack, running = future.result()
        with stack:
            yield running

    def close(self) -> None:
        if self._next is not None:
            with contextlib.suppress(Exception):
                stack, _ = self._next.result()
                stack.close()
        self._pool.shutdown()
