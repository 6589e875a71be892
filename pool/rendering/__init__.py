"""What an instance is made of: its Exporter, config Secret and workload, rendered from the
set, its class and the credentials Jumpstarter's controller issued.

`render` holds what every provisioner shares, `provisioners/` each provisioner's workload,
`credentials` whether an instance can be rendered yet, `configsync` whether its config
Secret must be written, `imagecheck` whether its images are allowed. Pure; imports only
`pool.model`.
"""
