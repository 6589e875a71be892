# The image for both the webhook and the reconciler (deploy/base runs it with
# `webhook ...` or `reconcile ...`). Build: docker build -t ghcr.io/jumpstarter-dev/virtualtarget:0.1.0 .
#
# Stage 1 installs the package and its pinned dependencies into a virtual environment;
# only that environment reaches the final stage: no pip, no sources, no build tools.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY api api
COPY certs certs
COPY webhook webhook
COPY reconciler reconciler
COPY scrape scrape
COPY virtualtarget virtualtarget
RUN /opt/venv/bin/pip install . \
 && /opt/venv/bin/pip uninstall -y pip setuptools

FROM python:3.11-slim-bookworm
# The root filesystem is read-only in the cluster: no .pyc writes, logs straight out.
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
# The same numeric user as the Deployments' securityContext (runAsNonRoot needs a number).
USER 65532:65532
ENTRYPOINT ["virtualtarget"]
CMD ["--help"]
