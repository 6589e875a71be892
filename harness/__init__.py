"""The development and test harness: loopback control planes, the node cluster and what it
changes on the host, image and guest builds, the credential stand-in, the dev stack, and the
generators of the RBAC manifests and the lock. It runs from the checkout (`make run`,
`make cluster`, `make image`, `make crds`, the tests) and is in neither the wheel nor the
image: nothing of the product imports it (`.importlinter`, `product-without-harness`).
"""
