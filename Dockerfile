# The image for both the webhook and the reconciler (deploy/base runs it with
# `webhook ...` or `reconcile ...`). Build: docker build -t ghcr.io/jumpstarter-dev/virtualtarget:0.3.0 .
# (BuildKit: the default since Docker 23; buildah bud works as well.)
#
# Stage 1 installs the locked dependencies (requirements.lock, every package pinned with
# its hashes: `make lock`) and the package into a virtual environment; only that
# environment reaches the final stage: no pip, no sources, no build tools.
#
#   --build-arg BASE=IMAGE   another base with python3 (3.11) and its venv module, e.g. a
#                            mirror of the default or a Debian bookworm with python3-venv
#   --secret id=pip-conf,src=FILE   a pip configuration file (index-url, extra-index-url,
#                            trusted-host, timeout) for the one step that downloads
#   --secret id=pip-ca,src=FILE     the CA bundle pip checks the index with (PIP_CERT)
# Secrets are mounted for that one RUN only; they are in no layer of either stage.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
WORKDIR /src
COPY requirements.lock ./
RUN --mount=type=secret,id=pip-conf --mount=type=secret,id=pip-ca \
    if [ -f /run/secrets/pip-conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip-conf; fi \
 && if [ -f /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && /opt/venv/bin/pip install --require-hashes --only-binary :all: -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY api api
COPY certs certs
COPY webhook webhook
COPY pool pool
COPY reconciler reconciler
COPY scrape scrape
COPY virtualtarget virtualtarget
# Offline, from the locked setuptools: nothing here is resolved again. Then the build
# tools go, and /exporter-set-controller names the operator's console script.
RUN /opt/venv/bin/pip install --no-index --no-build-isolation . \
 && /opt/venv/bin/pip uninstall -y pip setuptools \
 && mkdir /rootfs && ln -s /opt/venv/bin/exporter-set-controller /rootfs/exporter-set-controller

FROM ${BASE}
# The licence of pyproject.toml (tests/unit/test_licence.py holds every Dockerfile to it).
LABEL org.opencontainers.image.title="virtualtarget" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/jumpstarter-dev/virtualtarget"
COPY --from=build /src/LICENSE /usr/share/doc/virtualtarget/LICENSE
# The root filesystem is read-only in the cluster: no .pyc writes, logs straight out.
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
COPY --from=build /rootfs/ /
# The same numeric user as the Deployments' securityContext (runAsNonRoot needs a number).
USER 65532:65532
ENTRYPOINT ["virtualtarget"]
CMD ["--help"]
