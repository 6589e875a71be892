// Prints KubeVirt's VirtualMachine and VirtualMachineInstance CRDs as virt-operator
// installs them (pkg/virt-operator/resource/generate/components), as one JSON list.
package main

import (
	"encoding/json"
	"os"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
)

func main() {
	var crds []*extv1.CustomResourceDefinition
	for _, make := range []func() (*extv1.CustomResourceDefinition, error){
		components.NewVirtualMachineCrd, components.NewVirtualMachineInstanceCrd,
	} {
		crd, err := make()
		if err != nil {
			panic(err)
		}
		crds = append(crds, crd)
	}
	if err := json.NewEncoder(os.Stdout).Encode(crds); err != nil {
		panic(err)
	}
}
