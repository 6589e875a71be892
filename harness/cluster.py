"""`python -m harness.cluster` (what `make cluster` starts): a real cluster of one node
(`--nodes N`: N).

Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet with
containerd, the CNI bridge and kube-proxy (`harness.node`), prints the kubeconfig
and what to try, and on Ctrl-C (or SIGTERM) stops everything and undoes every change it
made to the machine. Needs root and Debian's container packages (docs/development.md,
"The node cluster").
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from harness.controlplane import REPO_ROOT, ControlPlaneError, binary_dir
from harness.entry import run_job
from harness.node import NodeCluster, NodeError, running_node_cluster
from harness.nodehost import MAX_NODES, HostError
from harness.nodeimages import ImageError

__all__ = ["configure", "run", "usage"]

DEFAULT_WORKDIR = REPO_ROOT / ".cluster"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="folder for all of the cluster's state, certificates and logs (emptied at start)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another node cluster on this machine to stop (default: none)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        choices=range(1, MAX_NODES + 1),
        default=1,
        help="how many nodes (kubelets, each with its containerd and bridge; default: 1)",
    )


def _phases(timings: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())


def usage(cluster: NodeCluster) -> str:
    busybox, net = cluster.images["busybox"], cluster.network
    run = f"kubectl run hello --image={busybox} --image-pull-policy=Never --restart=Never"
    web = (
        f"kubectl run web --image={busybox} --image-pull-policy=Never --port=8080 "
        "--expose -- sh -c 'echo hello from web > /i; exec httpd -f -p 8080 -h /'"
    )
    return "\n".join(
        [
            f"node cluster ready in {cluster.timings['start']:.1f} s "
            f"({_phases({k: v for k, v in cluster.timings.items() if k != 'start'})})",
            f"state and logs in {cluster.workdir}",
            "",
            f"  export KUBECONFIG={cluster.kubeconfig} PATH={binary_dir()}:$PATH",
            "  kubectl get nodes -o wide",
            f"  {run} -- echo hello from a Pod",
            "  kubectl logs hello    # once it has Completed",
            f"  {web}",
            "  curl http://$(kubectl get service web -o jsonpath='{.spec.clusterIP}'):8080/i"
            "   # through kube-proxy",
            *(
                f"  ctr --address {node.containerd_socket} -n k8s.io images import IMAGE.tar"
                for node in cluster.nodes
            ),
            "      # a docker-archive, into each node; Pods use it with imagePullPolicy: Never",
            "",
            *(
                f"{node.name}: Pods get {node.network.pod_cidr}, the node is {node.network.node_ip}"
                for node in cluster.nodes
            ),
            f"Services get {net.service_cidr}; traffic can reach only these and loopback",
            "(no DNS, no registry, no outside).",
            "Ctrl-C stops the cluster and undoes every change made to this machine.",
        ]
    )


def run(args: argparse.Namespace) -> int:
    def interrupt(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # once: the teardown runs to its end
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        with running_node_cluster(args.workdir, wait=args.wait, nodes=args.nodes) as cluster:
            print(usage(cluster), flush=True)
            try:
                while True:
                    time.sleep(1.0)
                    cluster.plane.check_alive()
            except KeyboardInterrupt:
                print("stopping", flush=True)
        stops = {
            k.removeprefix("stop "): v for k, v in cluster.timings.items() if k.startswith("stop ")
        }
        print(
            f"node cluster stopped in {cluster.timings['stop']:.1f} s ({_phases(stops)}); "
            "nothing of it is left on this machine",
            flush=True,
        )
    except KeyboardInterrupt:  # during the start: what had started is stopped and undone
        print("harness.cluster: interrupted; stopped", file=sys.stderr)
        return 130
    except (NodeError, HostError, ImageError, ControlPlaneError) as error:
        print(f"harness.cluster: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, previous)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(
        "python -m harness.cluster",
        "start a real cluster of one node (or --nodes N) on this machine (root)",
        configure,
        run,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
