"""Admission webhook throughput and latency over TLS, against a bare echo endpoint.

wrk (Debian package `wrk`) drives, on loopback, the validate and mutate ExporterSet
endpoints (validate checks the set against its class, found in the server's cluster
view) and a bare FastAPI endpoint that only parses the review and answers `allowed`,
all served by one uvicorn process with the webhook's own TLS and server settings, at
1, 10 and 50 connections, interleaved so all three see the same machine. Every call
carries `?timeout=10s`, as kube-apiserver's do. A fourth point validates reviews whose
pool label and memory are new on every request, so no per-value memory helps.
Targets at 10 connections: throughput at least 0.8 of the echo's, p99 under 5 ms.

The server is CPU-bound, so beside req/s the table gives the server's CPU time per
request (from /proc), and a last table times each review through the ASGI app in this
process, where the VM's neighbours disturb least.

    python -m bench webhook
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from fastapi import FastAPI, Request, Response

from api.provisioners.qemu import QEMU_EXPORTER_IMAGE

ROOT = Path(__file__).resolve().parents[1]
CONNECTIONS = (1, 10, 50)
SECONDS = 1
# Short points in interleaved rounds: each ratio compares endpoints measured seconds apart,
# so a noisy neighbour slows both sides of it; the table reports medians over rounds.
ROUNDS = 15
ECHO = "/bench-echo"
# Validate with a pool label and memory never seen before on every request: what the
# webhook's per-value memories (label maps, parameters per class version) are worth.
UNSEEN = "validate, unseen values"
VALIDATE = "/validate-virtualtarget-jumpstarter-dev-v1alpha1-exporterset"
MUTATE = "/mutate-virtualtarget-jumpstarter-dev-v1alpha1-exporterset"
TARGET_RATIO, TARGET_P99_MS = 0.8, 5.0
# kube-apiserver appends the webhook's timeout to every admission call.
APISERVER_QUERY = "?timeout=10s"


def _review(defaulted: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "virtualTargetClassName": "qemu-x86",
        "selector": {"matchLabels": {"jumpstarter.dev/pool": "fedora-x86"}},
        "template": {
            "metadata": {"labels": {"jumpstarter.dev/pool": "fedora-x86", "board": "qemu"}},
            "spec": {
                "drivers": [
                    {"name": "qemu", "type": "jumpstarter_driver_qemu.driver.Qemu"},
                    {"name": "power", "ref": "qemu.power"},
                ]
            },
        },
        "images": {"exporter": {"image": QEMU_EXPORTER_IMAGE}},
        "parameters": {"resources": {"memory": "4Gi"}},
    }
    if defaulted:
        spec.update(
            minReplicas=1,
            maxReplicas=8,
            minAvailableReplicas=2,
            scaleDownCooldown="10m",
            recycleStrategy="ExitAndReplace",
        )
    obj = {
        "apiVersion": "virtualtarget.jumpstarter.dev/v1alpha1",
        "kind": "ExporterSet",
        "metadata": {"name": "fedora-x86", "namespace": "default", "uid": "0b3c"},
        "spec": spec,
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {
                "group": "virtualtarget.jumpstarter.dev",
                "version": "v1alpha1",
                "kind": "ExporterSet",
            },
            "resource": {
                "group": "virtualtarget.jumpstarter.dev",
                "version": "v1alpha1",
                "resource": "exportersets",
            },
            "operation": "CREATE",
            "namespace": "default",
            "name": "fedora-x86",
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


def _unseen(review: dict[str, Any]) -> dict[str, Any]:
    """The review as a template whose pool label and memory change on every request
    (see `_wrk`), so that no per-value memory of the webhook ever holds them."""
    text = json.dumps(review).replace('"fedora-x86"', f'"fedora-x86-{COUNTER}"')
    return dict(json.loads(text.replace('"4Gi"', f'"{MEMORY}Mi"')))


COUNTER, MEMORY = "@N@", "@M@"


def server_app() -> FastAPI:
    """The app under test: the webhook's, as `virtualtarget webhook` builds it in a cluster,
    plus the echo route."""
    from webhook.app import create_app
    from webhook.cli import server_admission
    from webhook.clusterview import StaticView

    # The set's class is in the cluster view, so validate runs the cross-object checks
    # (class lookup, merged qemu parameters). The view is the example class held in
    # memory, which costs what a watch-cache hit does, with the uid and resourceVersion
    # the apiserver gives every stored object.
    the_class = yaml.safe_load((ROOT / "examples" / "virtualtargetclass-qemu.yaml").read_text())
    the_class["metadata"].update(uid="9f6c3d2e-5a4b-4c1d-8e7f-0a1b2c3d4e5f", resourceVersion="1")
    app = create_app(server_admission(StaticView([the_class])))

    async def echo(request: Request) -> Response:
        review = json.loads(await request.body())
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(json.dumps(answer), media_type="application/json")

    app.router.add_route(ECHO, echo, methods=["POST"])  # mounted as the admission paths are
    return app


def reviews() -> dict[str, tuple[str, dict[str, Any]]]:
    """What each measured endpoint is sent: (path, review or review template)."""
    return {
        "echo": (ECHO, _review(True)),
        "validate": (VALIDATE, _review(True)),
        "mutate": (MUTATE, _review(False)),
        UNSEEN: (VALIDATE, _unseen(_review(True))),
    }


def serve(cert_dir: Path, port: int, fast: bool = True) -> None:
    """The server under test, with the webhook's own TLS and uvicorn settings."""
    from webhook.server import bind, run, tls_context

    run(
        server_app(),
        bind("127.0.0.1", port),
        tls_context(cert_dir),
        lambda: print("ready", flush=True),
        fast=fast,
    )


# (req/s, p99 ms, server CPU us per request) of one point.
Point = tuple[float, float, float]


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wrk(url: str, body_file: Path, connections: int, server: int) -> Point:
    script = body_file.with_suffix(".lua")
    lua = [
        'wrk.method = "POST"',
        'wrk.headers["Content-Type"] = "application/json"',
        f'local body = io.open({json.dumps(str(body_file))}):read("*a")',
    ]
    if COUNTER in body_file.read_text():
        lua += [
            "local counter = 0",
            "request = function()",
            "  counter = counter + 1",
            f'  local text = body:gsub("{COUNTER}", tostring(counter))',
            f'  text = text:gsub("{MEMORY}", tostring(1024 + counter % 200000))',
            "  return wrk.format(nil, nil, nil, text)",
            "end",
        ]
    else:
        lua.append("wrk.body = body")
    script.write_text("\n".join(lua) + "\n")
    cpu_before = _cpu_seconds(server)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{SECONDS}s", "--latency", "-s", str(script), url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cpu = _cpu_seconds(server) - cpu_before
    if re.search(r"Non-2xx or 3xx responses", out):
        raise RuntimeError(f"{url}: errors\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99_ms = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return rps, p99_ms, cpu / requests * 1e6


# The product's server, and uvicorn's pure-Python defaults for comparison.
STACKS = {"httptools on uvloop": [], "h11 on asyncio": ["h11"]}


def main() -> str:
    if shutil.which("wrk") is None:
        return "webhook: wrk not found; install it with `apt-get install -y wrk`"
    from certs.authority import ensure_certificates

    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        certs = ensure_certificates(work / "certs", "bench", "bench", ("127.0.0.1",))
        bodies = {}
        for index, (name, (_, review)) in enumerate(reviews().items()):
            bodies[name] = work / f"review-{index}.json"
            bodies[name].write_text(json.dumps(review))
        for stack, extra in STACKS.items():
            tables.append(_table(stack, _measure(certs.directory, bodies, extra)))
    tables.append(_in_process_table())
    return "\n\n".join(tables)


def _in_process_table() -> str:
    """Each review through the ASGI app in this process: no socket, no TLS, no noise
    from other processes. The minimum over interleaved batches of 300 requests."""
    import uvloop

    batches = uvloop.run(_in_process())
    # The baseline of the same run: the pool checks (an instance rendered to check what
    # the apiserver can store, the overlap with the namespace's other sets) left out.
    with (
        mock.patch("webhook.crossobject.storable_errors", lambda *_a, **_k: []),
        mock.patch("webhook.admission.check_set_overlap", _no_overlap),
    ):
        without = uvloop.run(_in_process())
    echo = min(batches["echo"])
    lines = [
        "## webhook in-process (`python -m bench webhook`): the ASGI app called directly, "
        f"fastest of {IN_PROCESS_BATCHES} interleaved batches of {IN_PROCESS_BATCH}",
        "",
        "| endpoint | us per review | us over the echo | us without the pool checks |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, times in batches.items():
        lines.append(
            f"| {name} | {min(times):.1f} | {min(times) - echo:.1f} | {min(without[name]):.1f} |"
        )
    return "\n".join(lines)


async def _no_overlap(*_args: Any) -> Any:
    from webhook.verdict import Verdict

    return Verdict()


IN_PROCESS_BATCHES, IN_PROCESS_BATCH = 60, 300


async def _in_process() -> dict[str, list[float]]:
    import time

    app = server_app()
    bodies: dict[str, list[bytes]] = {}
    for name, (_, review) in reviews().items():
        text = json.dumps(review)
        count = IN_PROCESS_BATCHES * IN_PROCESS_BATCH if COUNTER in text else 1
        bodies[name] = [
            text.replace(COUNTER, str(n)).replace(MEMORY, str(1024 + n)).encode()
            for n in range(count)
        ]
    paths = {name: path for name, (path, _) in reviews().items()}
    sent = dict.fromkeys(paths, 0)  # per endpoint: an unseen review is never sent twice

    async def call(path: str, body: bytes) -> None:
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return messages.pop() if messages else {"type": "http.disconnect"}

        async def send(_message: dict[str, Any]) -> None:
            return None

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "https",
            "path": path,
            "raw_path": path.encode(),
            "query_string": APISERVER_QUERY[1:].encode(),
            "root_path": "",
            "headers": [(b"content-type", b"application/json")],
            "server": ("127.0.0.1", 443),
            "client": ("127.0.0.1", 1),
        }
        await app(scope, receive, send)

    times: dict[str, list[float]] = {name: [] for name in bodies}
    for _ in range(IN_PROCESS_BATCHES):
        for name, path in paths.items():
            started = time.perf_counter()
            for _ in range(IN_PROCESS_BATCH):
                await call(path, bodies[name][sent[name] % len(bodies[name])])
                sent[name] += 1
            times[name].append((time.perf_counter() - started) / IN_PROCESS_BATCH * 1e6)
    return times


def _measure(
    cert_dir: Path, bodies: dict[str, Path], extra: list[str]
) -> list[dict[tuple[str, int], Point]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.webhook", str(cert_dir), str(port), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        paths = list({name: path for name, (path, _) in reviews().items()}.items())
        base = f"https://127.0.0.1:{port}"
        rounds = []
        for index in range(ROUNDS):
            # Every other round runs the endpoints in reverse, so that a drift within a
            # round does not always favour the endpoint measured first.
            order = paths if index % 2 == 0 else paths[::-1]
            rounds.append(
                {
                    (name, connections): _wrk(
                        base + path + APISERVER_QUERY, bodies[name], connections, server.pid
                    )
                    for connections in CONNECTIONS
                    for name, path in order
                }
            )
        return rounds
    finally:
        server.terminate()
        server.wait(timeout=10)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _table(stack: str, rounds: list[dict[tuple[str, int], Point]]) -> str:
    lines = [
        f"## webhook (`python -m bench webhook`), {stack}: wrk over TLS on loopback, "
        f"{ROUNDS} interleaved rounds of {SECONDS} s per point, medians",
        "",
        "| connections | endpoint | req/s | p99 ms | req/s vs echo (same round) "
        "| server CPU us/req | echo's CPU/req over this one's |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for connections in CONNECTIONS:
        for name in ("echo", "validate", "mutate", UNSEEN):
            points = [(r[(name, connections)], r[("echo", connections)]) for r in rounds]
            rps, p99, cpu = (_median([point[i] for point, _ in points]) for i in range(3))
            ratio = _median([point[0] / echo[0] for point, echo in points])
            cpu_ratio = _median([echo[2] / point[2] for point, echo in points])
            lines.append(
                f"| {connections} | {name} | {rps:.0f} | {p99:.2f} | {ratio:.2f} "
                f"| {cpu:.0f} | {cpu_ratio:.2f} |"
            )
            if connections == 10 and name in ("validate", "mutate"):
                ok = ratio >= TARGET_RATIO and p99 < TARGET_P99_MS
                verdicts.append(
                    f"{name} at 10 connections: {ratio:.2f} of echo (CPU: {cpu_ratio:.2f}), "
                    f"p99 {p99:.2f} ms: {'meets' if ok else 'MISSES'} the target "
                    f"(>= {TARGET_RATIO}, < {TARGET_P99_MS} ms)"
                )
    return "\n".join([*lines, "", *verdicts])


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]), fast=sys.argv[3:] != ["h11"])
