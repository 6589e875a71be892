"""`python -m harness.kubevirt_crds`: print KubeVirt's two CRDs (JSON), made and cached first."""

import json
import sys

from harness.kubevirt_crds import crds

json.dump(crds(), sys.stdout)
