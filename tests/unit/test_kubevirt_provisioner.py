"""The `kubevirt.jumpstarter.dev` provisioner against Jumpstarter's pull request #927, read
from its vendored source (`tests/kubevirt_source.py`): the Go's constants, its parameter
tests (params_test cases of `kubevirt_test.go`) and driver-injection tests ported, the
VirtualMachine and Services as `kubevirt.go` builds them for the same parameters, the
injected driver config against the fields the vendored driver reads, every rendered
VM's template against the generated VirtualMachineInstance model, and the guide's class
and set through admission."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from api.modelcheck import model_errors
from api.models.kubevirt.virtualmachineinstance import VirtualMachineInstanceSpec
from api.provisioners import kubevirt as params_module
from api.provisioners.kubevirt import KubevirtParameters
from pool.model.access import ACCESS
from pool.model.jumpstarter import CONFIG_DIR, TCP_NETWORK_DRIVER
from pool.model.views import ProvisionedView
from pool.rendering.provisioners import RECONCILER_ACCESS, known, provisioner
from pool.rendering.provisioners import kubevirt as kv
from pool.rendering.provisioners import kubevirt_target as target
from pool.rendering.render import InstanceContext
from tests.kubevirt_source import driver_fields, go_constants, guide_documents
from tests.unit.test_webhook_support import review, schema_source
from webhook.admission import Admission
from webhook.clusterview import StaticView
from webhook.decode import decode_review
from webhook.routes import ENDPOINTS, Role

Obj = dict[str, Any]
PROVISIONER = kv.KubevirtProvisioner()
EXPORTER = "test-vm"  # kubevirt_test.go:31-36
BASE = {"namespace": "test-ns", "image": "quay.io/test/image:latest"}


def _errors(parameters: Obj, *, merged: bool = True) -> list[str]:
    return [str(e) for e in PROVISIONER.check_parameters(parameters, merged=merged).errors]


def _ctx(parameters: Obj, drivers: list[Obj] | None = None, **kw: Any) -> InstanceContext:
    return InstanceContext(
        namespace="lab",
        exporter=EXPORTER,
        exporter_uid="uid-1",
        labels={"app": "kubevirt-pool"},
        set_name="kubevirt-pool",
        parameters=parameters,
        images=kv.DEFAULT_IMAGES,
        recycle="ExitAndReplace",
        drivers=list(drivers or []),
        **kw,
    )


def _vm(parameters: Obj) -> Obj:
    return target.render_virtual_machine(EXPORTER, KubevirtParameters.model_validate(parameters))


# -- the Go's constants -----------------------------------------------------------------


def test_names_paths_and_defaults_are_the_go_provisioners() -> None:
    go, params = go_constants("kubevirt.go"), go_constants("params.go")
    assert PROVISIONER.name == go["ProvisionerName"]
    assert go["credentialsVolumeName"] == kv.CREDENTIALS_VOLUME
    assert go["credentialsMountPath"] == kv.CREDENTIALS_DIR
    assert go["kubeconfigFilename"] == kv.KUBECONFIG_KEY
    assert go["configMountPath"] == CONFIG_DIR
    assert go["kubevirtDriverType"] == kv.COMPOSITE_DRIVER
    assert (
        go["kubevirtPowerType"],
        go["kubevirtConsoleType"],
        go["kubevirtStorageType"],
    ) == kv.DRIVER_TYPES
    assert go["tcpDriverType"] == TCP_NETWORK_DRIVER
    assert target.target_labels("x") == {
        go["labelManagedBy"]: "jumpstarter",
        go["labelExporter"]: "x",
        go["labelProvenance"]: go["ProvisionerName"],
    }
    assert params["defaultCPU"] == params_module.DEFAULT_CPU
    assert params["defaultMemory"] == params_module.DEFAULT_MEMORY
    assert params["defaultDiskSize"] == params_module.DEFAULT_DISK_SIZE
    assert [t.value for t in params_module.StorageType] == [
        params["StorageTypeContainerDisk"],
        params["StorageTypeDataVolume"],
    ]
    # kubevirt.go:45 with `:latest` replaced by the version (kubevirt.go:87-96): the
    # published image, which has no KubeVirt driver; the default here is the image this
    # project builds with it (images/kubevirt-exporter).
    default = go["DefaultExporterImage"].removesuffix(":latest")
    assert params_module.PUBLISHED_EXPORTER_IMAGE.startswith(f"{default}:")
    assert kv.DEFAULT_IMAGES["exporter"].image == params_module.KUBEVIRT_EXPORTER_IMAGE


# -- parameters: the Go's TestParseParams_* cases, then what is checked beyond them --------


def test_parse_params_defaults() -> None:  # kubevirt_test.go:38-64
    assert _errors(BASE) == []
    vm = _vm(BASE)["spec"]["template"]["spec"]
    assert vm["domain"]["cpu"] == {"cores": 2}
    assert vm["domain"]["memory"] == {"guest": "4Gi"}
    assert target.disk_size(KubevirtParameters.model_validate(BASE)) == "20Gi"


def test_parse_params_requires_namespace_and_image() -> None:  # kubevirt_test.go:66-86
    assert _errors({"image": BASE["image"]}) == [
        "spec.parameters.namespace: Required value: the target cluster's namespace for the VMs"
    ]
    assert _errors({"namespace": "test-ns"}) == [
        "spec.parameters.image: Required value: the containerDisk image of the guest"
    ]
    data_volume = {"type": "dataVolume", "source": {"http": {"url": "https://x/disk.img"}}}
    assert _errors({"namespace": "test-ns", "storage": data_volume}) == []
    # A class may leave them to its sets: only the merged parameters must have them.
    assert _errors({}, merged=False) == []


def test_parse_params_overrides_resources() -> None:  # kubevirt_test.go:88-113
    parameters = {**BASE, "resources": {"cpu": 8, "memory": "16Gi", "storage": "100Gi"}}
    assert _errors(parameters) == []
    domain = _vm(parameters)["spec"]["template"]["spec"]["domain"]
    assert domain["cpu"] == {"cores": 8} and domain["memory"] == {"guest": "16Gi"}
    assert target.disk_size(KubevirtParameters.model_validate(parameters)) == "100Gi"


def test_parse_params_validates_ssh_access() -> None:  # kubevirt_test.go:115-134
    for valid in ("", "NodePort", "LoadBalancer"):
        assert _errors({**BASE, "sshAccess": valid}) == []
    assert _errors({**BASE, "sshAccess": "Invalid"}) == [
        "spec.parameters.sshAccess: Invalid value: \"Invalid\": Input should be '', 'NodePort' "
        "or 'LoadBalancer' (kubevirt.jumpstarter.dev, class and set parameters merged)"
    ]


def test_parse_params_rejects_invalid_memory() -> None:  # kubevirt_test.go:136-149
    (error,) = _errors({**BASE, "resources": {"memory": "not-a-quantity"}})
    assert error.startswith('spec.parameters.resources.memory: Invalid value: "not-a-quantity"')


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        ({"resources": {"cpu": 0}}, "spec.parameters.resources.cpu: Invalid value: 0"),
        ({"resources": {"cpu": 2**32}}, "spec.parameters.resources.cpu: Invalid value: 4294967296"),
        ({"resources": {"cpu": "4"}}, 'spec.parameters.resources.cpu: Invalid value: "4"'),
        ({"resources": {"memory": 4096}}, "spec.parameters.resources.memory: Invalid value: 4096"),
        ({"resources": {"storage": "0"}}, 'spec.parameters.resources.storage: Invalid value: "0"'),
        ({"forwardPorts": {"adb": 0}}, "spec.parameters.forwardPorts.adb: Invalid value: 0"),
        ({"forwardPorts": {"adb": 65536}}, "spec.parameters.forwardPorts.adb: Invalid value"),
        ({"forwardPorts": {"adb": "6520"}}, 'spec.parameters.forwardPorts.adb: Invalid value: "'),
        ({"forwardPorts": {"Web_1": 80}}, 'spec.parameters.forwardPorts.Web_1: Invalid value: "'),
        ({"forwardPorts": {"power": 80}}, "spec.parameters.forwardPorts.power: Invalid value"),
        (
            {"sshAccess": "NodePort", "forwardPorts": {"ssh": 2222}},
            "spec.parameters.forwardPorts.ssh: Invalid value",
        ),
        ({"namespace": "My_VMs"}, 'spec.parameters.namespace: Invalid value: "My_VMs"'),
        ({"storage": {"type": "disk"}}, 'spec.parameters.storage.type: Invalid value: "disk"'),
        ({"storage": {"size": "big"}}, 'spec.parameters.storage.size: Invalid value: "big"'),
        (
            {"storage": {"storageClassName": "Fast SSD"}},
            'spec.parameters.storage.storageClassName: Invalid value: "Fast SSD"',
        ),
        (
            {"storage": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}},
            "spec.parameters.storage.accessModes: Invalid value",
        ),
        (
            {"storage": {"type": "dataVolume"}},
            "spec.parameters.storage.source: Required value: storage type dataVolume requires",
        ),
        (
            {"storage": {"type": "dataVolume", "source": {"http": {}}}},
            "spec.parameters.storage.source.http.url: Required value",
        ),
        (
            {"storage": {"source": {"pvc": {"namespace": "x"}}}},
            "spec.parameters.storage.source.pvc.name: Required value",
        ),
        (
            {"storage": {"source": {"http": {"url": "u"}, "registry": {"image": "i"}}}},
            'spec.parameters.storage.source: Invalid value: "http, registry": a DataVolume has',
        ),
    ],
)
def test_each_wrong_parameter_is_refused_by_its_path(parameters: Obj, error: str) -> None:
    errors = _errors({**BASE, **parameters})
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_unknown_keys_are_warnings() -> None:
    found = PROVISIONER.check_parameters({**BASE, "colour": "red"})
    assert found.errors == ()
    assert found.warnings[0].startswith("spec.parameters.colour: unknown parameter")


# -- the class ---------------------------------------------------------------------------


def test_a_class_without_its_credentials_secret_is_refused() -> None:
    errors, _ = PROVISIONER.class_findings({"parameters": BASE})
    assert [str(e) for e in errors] == [
        "spec.credentialsSecretRef.name: Required value: kubevirt.jumpstarter.dev reaches the "
        "target cluster with the kubeconfig in this Secret's key `kubeconfig`"
    ]
    with_secret = {"credentialsSecretRef": {"name": "kubevirt-credentials"}, "parameters": BASE}
    assert PROVISIONER.class_findings(with_secret) == ([], [])


def test_what_a_class_leaves_to_its_sets_is_a_warning() -> None:
    spec = {"credentialsSecretRef": {"name": "c"}, "parameters": {"image": "i"}}
    assert PROVISIONER.class_findings(spec) == (
        [],
        ["spec.parameters.namespace: not set by the class: each ExporterSet must set it"],
    )


# -- the VirtualMachine: kubevirt.go:184-358 for the same parameters ---------------------


def test_the_container_disk_vm_is_the_go_provisioners() -> None:
    assert _vm(BASE) == {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": EXPORTER,
            "namespace": "test-ns",
            "labels": {
                "app.kubernetes.io/managed-by": "jumpstarter",
                "jumpstarter.dev/exporter": EXPORTER,
                "jumpstarter.dev/provisioner": "kubevirt.jumpstarter.dev",
            },
        },
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    "domain": {
                        "cpu": {"cores": 2},
                        "memory": {"guest": "4Gi"},
                        "devices": {
                            "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                            "interfaces": [{"name": "default", "masquerade": {}}],
                        },
                    },
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": [
                        {"name": "root", "containerDisk": {"image": "quay.io/test/image:latest"}}
                    ],
                }
            },
        },
    }


def test_the_guides_full_example_vm() -> None:
    """The guide's `kubevirt-full` class: a DataVolume from HTTP, SSH on a LoadBalancer,
    two forward ports and cloud-init (kubevirt.go:251-309, 321-355)."""
    parameters = guide_documents()[1]["spec"]["parameters"]
    vm = _vm(parameters)
    template = vm["spec"]["template"]["spec"]
    assert vm["spec"]["dataVolumeTemplates"] == [
        {
            "metadata": {"name": f"{EXPORTER}-root"},
            "spec": {
                "source": {"http": {"url": parameters["storage"]["source"]["http"]["url"]}},
                "storage": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "40Gi"}},
                },
            },
        }
    ]
    assert template["domain"]["cpu"] == {"cores": 4}
    assert template["domain"]["memory"] == {"guest": "8Gi"}
    assert template["domain"]["devices"]["disks"] == [
        {"name": "root", "disk": {"bus": "virtio"}},
        {"name": "cloudinit", "disk": {"bus": "virtio"}},
    ]
    assert template["domain"]["devices"]["interfaces"] == [
        {
            "name": "default",
            "masquerade": {},
            "ports": [
                {"name": "ssh", "port": 22, "protocol": "TCP"},
                {"name": "adb", "port": 6520, "protocol": "TCP"},
                {"name": "web", "port": 8080, "protocol": "TCP"},
            ],
        }
    ]
    assert template["volumes"] == [
        {"name": "root", "dataVolume": {"name": f"{EXPORTER}-root"}},
        {"name": "cloudinit", "cloudInitNoCloud": {"userData": parameters["cloudInit"]}},
    ]


def test_data_volume_sources_size_and_class_as_the_go_sets_them() -> None:
    def template(storage: Obj, **more: Any) -> Obj:
        vm = _vm({"namespace": "n", **more, "storage": {"type": "dataVolume", **storage}})
        spec: Obj = vm["spec"]["dataVolumeTemplates"][0]["spec"]
        return spec

    registry = template({"source": {"registry": {"image": "quay.io/disks/fedora:40"}}})
    assert registry["source"] == {"registry": {"url": "docker://quay.io/disks/fedora:40"}}
    pvc = template({"source": {"pvc": {"name": "golden"}}})
    assert pvc["source"] == {"pvc": {"namespace": "", "name": "golden"}}
    # storage.size defaults to 20Gi and wins over resources.storage (params.go:143-145, 166)
    sized = template({"source": {"pvc": {"name": "g"}}}, resources={"storage": "100Gi"})
    assert sized["storage"]["resources"] == {"requests": {"storage": "20Gi"}}
    classed = template(
        {
            "source": {"pvc": {"name": "g"}},
            "size": "40960Mi",  # printed as resource.Quantity prints it
            "storageClassName": "fast",
            "accessModes": ["ReadWriteMany"],
        }
    )
    assert classed["storage"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "40Gi"}},
        "storageClassName": "fast",
    }


@pytest.mark.parametrize(
    "parameters",
    [
        BASE,
        guide_documents()[0]["spec"]["parameters"],
        guide_documents()[1]["spec"]["parameters"],
        {**BASE, "resources": {"cpu": 64, "memory": "1536Mi"}, "sshAccess": "NodePort"},
        {"namespace": "n", "storage": {"type": "dataVolume", "source": {"pvc": {"name": "g"}}}},
        {**BASE, "forwardPorts": {"adb": 6520, "rootcanal": 6402}, "cloudInit": "#cloud-config"},
    ],
)
def test_every_rendered_vm_template_is_a_valid_virtual_machine_instance_spec(
    parameters: Obj,
) -> None:
    assert _errors(parameters) == []
    spec = _vm(parameters)["spec"]["template"]["spec"]
    assert model_errors(VirtualMachineInstanceSpec, spec) == []


def test_the_model_would_catch_a_wrong_template() -> None:
    spec = _vm(BASE)["spec"]["template"]["spec"]
    spec["domain"]["cpu"]["cores"] = "2"
    assert [str(e) for e in model_errors(VirtualMachineInstanceSpec, spec)] == [
        'domain.cpu.cores: Invalid value: "2": must be of type integer'
    ]


# -- the Services: kubevirt.go:363-445 ---------------------------------------------------


def test_services_of_ssh_and_forward_ports() -> None:
    parameters = KubevirtParameters.model_validate(
        {**BASE, "sshAccess": "LoadBalancer", "forwardPorts": {"adb": 6520}}
    )
    ssh, adb = target.render_services(EXPORTER, parameters, "vm-uid")
    assert ssh == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{EXPORTER}-ssh",
            "namespace": "test-ns",
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "name": EXPORTER,
                    "uid": "vm-uid",
                }
            ],
            "labels": target.target_labels(EXPORTER),
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": {"vm.kubevirt.io/name": EXPORTER},
            "ports": [{"name": "ssh", "port": 22000, "targetPort": 22, "protocol": "TCP"}],
        },
    }
    assert adb["metadata"]["name"] == f"{EXPORTER}-adb"
    assert adb["spec"]["type"] == "LoadBalancer"
    assert adb["spec"]["ports"] == [
        {"name": "adb", "port": 6520, "targetPort": 6520, "protocol": "TCP"}
    ]
    # forward ports alone: NodePort (kubevirt.go:374-377); nothing exposed, no Service
    alone = KubevirtParameters.model_validate({**BASE, "forwardPorts": {"adb": 6520}})
    assert [s["spec"]["type"] for s in target.render_services(EXPORTER, alone, "u")] == ["NodePort"]
    assert target.render_services(EXPORTER, KubevirtParameters.model_validate(BASE), "u") == []


def test_a_services_address_as_the_go_resolves_it() -> None:  # kubevirt.go:611-658
    node_port = {"spec": {"type": "NodePort", "clusterIP": "10.0.0.7", "ports": [
        {"port": 22000, "nodePort": 31022}]}}  # fmt: skip
    assert target.service_address(node_port, 22000) == ("10.0.0.7", 31022)
    balanced = {
        "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.8", "ports": [{"port": 6520}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "vm.example.com"}]}},
    }
    assert target.service_address(balanced, 6520) == ("vm.example.com", 6520)
    pending = {**balanced, "status": {}}
    assert target.service_address(pending, 6520) == ("10.0.0.8", 6520)
    assert target.service_address({"spec": {"clusterIP": "None"}}, 1) is None


# -- the drivers: kubevirt_test.go's TestEnrichExporterExport_* ----------------------------


def _names(drivers: list[Obj]) -> list[str]:
    return [d["name"] for d in drivers]


def test_enrich_injects_all_drivers() -> None:  # kubevirt_test.go:151-168
    drivers = PROVISIONER.drivers(_ctx({**BASE, "sshAccess": "NodePort"}))
    assert [(d["name"], d["type"]) for d in drivers] == list(
        zip(("power", "console", "storage"), kv.DRIVER_TYPES, strict=True)
    )


def test_enrich_forward_ports_not_injected_without_their_service() -> None:  # :170-193
    drivers = PROVISIONER.drivers(_ctx({**BASE, "forwardPorts": {"adb": 6520, "http": 8080}}))
    assert _names(drivers) == ["power", "console", "storage"]


def test_enrich_skips_a_forward_port_with_a_template_driver() -> None:  # :195-229
    adb = {"name": "adb", "type": "jumpstarter_driver_adb.driver.AdbServer"}
    ctx = _ctx({**BASE, "forwardPorts": {"adb": 6520}}, [adb])
    service = {"spec": {"type": "NodePort", "clusterIP": "10.0.0.9", "ports": [{"port": 6520}]}}
    drivers = kv.drivers_with_services(ctx, {f"{EXPORTER}-adb": service})
    assert [d for d in drivers if d["name"] == "adb"] == [adb]


def test_enrich_preserves_template_drivers() -> None:  # :231-251
    custom = {"name": "custom", "type": "my.custom.Driver"}
    assert PROVISIONER.drivers(_ctx(BASE, [custom]))[0] == custom


def test_enrich_does_not_duplicate_kubevirt() -> None:  # :253-273
    composite = {"name": "kubevirt", "type": kv.COMPOSITE_DRIVER}
    assert PROVISIONER.drivers(_ctx(BASE, [composite])) == [composite]


def test_enrich_namespace_in_config() -> None:  # :275-300
    power = PROVISIONER.drivers(_ctx({**BASE, "namespace": "remote-ns"}))[0]
    assert power["config"] == {
        "kubeconfig": "/etc/jumpstarter/kubevirt/kubeconfig",
        "namespace": "remote-ns",
        "vm_name": EXPORTER,
    }


def test_ssh_and_forward_ports_become_tcp_drivers_at_their_services_addresses() -> None:
    ctx = _ctx({**BASE, "sshAccess": "NodePort", "forwardPorts": {"web": 8080}})
    services = {
        f"{EXPORTER}-ssh": {"spec": {"type": "NodePort", "clusterIP": "10.0.0.5", "ports": [
            {"port": 22000, "nodePort": 30022}]}},
        f"{EXPORTER}-web": {"spec": {"type": "NodePort", "clusterIP": "10.0.0.6", "ports": [
            {"port": 8080, "nodePort": 30080}]}},
    }  # fmt: skip
    drivers = kv.drivers_with_services(ctx, services)
    assert drivers[3:] == [
        {"name": "ssh", "type": TCP_NETWORK_DRIVER, "config": {"host": "10.0.0.5", "port": 30022}},
        {"name": "web", "type": TCP_NETWORK_DRIVER, "config": {"host": "10.0.0.6", "port": 30080}},
    ]


def test_every_injected_config_key_is_a_field_the_vendored_driver_reads() -> None:
    fields = driver_fields()
    for driver in PROVISIONER.drivers(_ctx(BASE)):
        kind = driver["type"].rpartition(".")[2]
        assert set(driver["config"]) <= fields[kind], (kind, fields[kind])
        assert {"namespace", "vm_name", "kubeconfig"} <= set(driver["config"])


# -- the exporter Pod ----------------------------------------------------------------------


def test_the_exporter_pod_mounts_the_kubeconfig_where_the_drivers_read_it() -> None:
    ctx = _ctx(BASE, credentials_secret="kubevirt-credentials", node_selector={"zone": "a"})
    pod = PROVISIONER.render_pod(ctx)
    (exporter,) = pod["spec"]["containers"]
    assert exporter["name"] == "exporter"
    assert exporter["volumeMounts"] == [
        {"name": "exporter-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "kubevirt-credentials", "mountPath": kv.CREDENTIALS_DIR, "readOnly": True},
    ]
    assert exporter["envFrom"] == [{"secretRef": {"name": "kubevirt-credentials"}}]
    assert pod["spec"]["volumes"] == [
        {"name": "exporter-config", "secret": {"secretName": f"exporter-config-{EXPORTER}"}},
        {"name": "kubevirt-credentials", "secret": {"secretName": "kubevirt-credentials"}},
    ]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["nodeSelector"] == {"zone": "a"}
    assert pod["metadata"]["ownerReferences"][0]["name"] == EXPORTER
    assert "initContainers" not in pod["spec"]
    kubeconfig = PROVISIONER.drivers(ctx)[0]["config"]["kubeconfig"]
    mount = exporter["volumeMounts"][1]["mountPath"]
    assert kubeconfig == f"{mount}/{kv.KUBECONFIG_KEY}"


# -- watches, cleanup, registration --------------------------------------------------------


def test_nothing_is_watched_here_and_cleanup_takes_the_instances_vm_and_services() -> None:
    assert PROVISIONER.watches == ()
    # the generated RBAC of its reconciler grants the table alone
    assert RECONCILER_ACCESS[PROVISIONER.name] == ACCESS
    vm = ProvisionedView(target.VIRTUAL_MACHINES, EXPORTER, EXPORTER, uid="a")
    ssh = ProvisionedView(target.SERVICES, f"{EXPORTER}-ssh", EXPORTER, uid="b")
    other = ProvisionedView(target.VIRTUAL_MACHINES, "other", "other", uid="c")
    assert PROVISIONER.cleanup(EXPORTER, [vm, ssh, other]) == (vm, ssh)


def test_admission_and_the_reconciler_both_know_it() -> None:
    assert known("kubevirt.jumpstarter.dev") is not None
    assert provisioner("kubevirt.jumpstarter.dev").remote is not None
    assert provisioner("qemu.jumpstarter.dev").remote is None
    known_names = r"\(known: kubevirt.jumpstarter.dev, qemu.jumpstarter.dev\)"
    with pytest.raises(KeyError, match=known_names):
        provisioner("other.example.com")


# -- the guide's objects through admission -------------------------------------------------

_VALIDATE = {(e.kind.kind, e.role): e for e in ENDPOINTS}


def _admit(objects: list[Obj], obj: Obj) -> tuple[bool, list[str], list[str]]:
    request = decode_review(json.dumps(review(obj)).encode())
    endpoint = _VALIDATE[(request.kind, Role.VALIDATE)]
    admission = Admission(schema_source, StaticView(objects))
    outcome = asyncio.run(admission.review(endpoint, request, 1.0))
    return outcome.allowed, [str(e) for e in outcome.errors], outcome.warnings


def test_the_guides_classes_and_set_are_admitted_unchanged() -> None:
    basic, full, pool = guide_documents()
    for klass in (basic, full):
        assert _admit([], klass) == (True, [], [])
    assert _admit([full], pool) == (True, [], [])
    assert _admit([basic], {**pool, "spec": {**pool["spec"], "virtualTargetClassName": basic[
        "metadata"]["name"]}}) == (True, [], [])  # fmt: skip


def test_the_guides_class_broken_is_refused_naming_the_field() -> None:
    basic, _, pool = guide_documents()
    no_secret = {
        **basic,
        "spec": {k: v for k, v in basic["spec"].items() if k != "credentialsSecretRef"},
    }
    allowed, errors, _ = _admit([], no_secret)
    assert not allowed and errors[0].startswith("spec.credentialsSecretRef.name: Required value")
    bad = {**basic, "spec": {**basic["spec"], "parameters": {**BASE, "sshAccess": "Public"}}}
    allowed, errors, _ = _admit([], bad)
    assert not allowed and errors[0].startswith(
        'spec.parameters.sshAccess: Invalid value: "Public"'
    )
    # a class that leaves the namespace to its sets: admitted with a warning, a set that
    # does not give one refused
    open_class = {**basic, "spec": {**basic["spec"], "parameters": {"image": "i"}}}
    assert _admit([], open_class) == (
        True,
        [],
        ["spec.parameters.namespace: not set by the class: each ExporterSet must set it"],
    )
    on_open = {**pool, "spec": {**pool["spec"], "virtualTargetClassName": "kubevirt-basic"}}
    allowed, errors, _ = _admit([open_class], on_open)
    assert not allowed and errors[0].startswith("spec.parameters.namespace: Required value")
