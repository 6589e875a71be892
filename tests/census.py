"""Instances by pool as a `kubectl get --watch` sees them appear and go, and the most
ever seen at once: what a test needs to say no pool ever went over its ceiling. A pool's
standby Exporter (STANDBY_LABEL, no Pod) is no instance until it is promoted."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter

from harness.controlplane import ControlPlane
from pool.model.keys import SET_LABEL, STANDBY_LABEL


def watch_exporters(plane: ControlPlane, ns: str, *output: str) -> subprocess.Popen[str]:
    """`kubectl get exporters --watch` in `ns`, its events on stdout in the `output` form."""
    return subprocess.Popen(
        [
            str(plane.binaries["kubectl"]),
            f"--kubeconfig={plane.kubeconfig}",
            *("get", "exporters", "-n", ns, "--watch", *output),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


class Census:
    """Instances by pool as a watch sees them appear and go, and the most ever seen."""

    def __init__(self, plane: ControlPlane, ns: str) -> None:
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self._seen: dict[str, str] = {}
        self.ever: set[str] = set()  # every Exporter the watch has shown, standbys too
        self.status_fields: set[str] = set()  # every status field any of them carried
        self._watch = watch_exporters(plane, ns, "--output-watch-events", "-o", "json")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._watch.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._watch.stdout:
            buffer += line
            try:
                event, _ = decoder.raw_decode(buffer.strip())
            except ValueError:
                continue
            buffer = ""
            obj = event["object"]
            self.status_fields |= set(obj.get("status") or {})
            labels = obj["metadata"].get("labels") or {}
            name, pool = obj["metadata"]["name"], labels.get(SET_LABEL, "")
            if event["type"] == "DELETED":
                if self._seen.pop(name, None):
                    self.now[pool] -= 1
                continue
            self.ever.add(name)
            if name not in self._seen and labels.get(STANDBY_LABEL) != "true":
                self._seen[name] = pool
                self.now[pool] += 1
                self.most[pool] = max(self.most[pool], self.now[pool])

    def names(self, pool: str) -> list[str]:
        """The pool's instances the watch has seen and not seen go."""
        return [name for name, of in self._seen.items() if of == pool]

    def stop(self) -> None:
        self._watch.terminate()
        self._watch.wait()
