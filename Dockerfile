# draxr: the admission webhook and the allocation worker (`draxr serve`).
# BASE: any image with Python >= 3.11 and its venv module. The default is what users pull; the e2e
# tests build on a Python base made from Debian packages (e2e/images), with no registry to pull from.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY examples ./examples
# A virtualenv, not `pip --prefix` copied to /usr/local: Debian's own python3 looks for packages in
# dist-packages there, python:*-slim in site-packages; a venv is found the same way on both.
RUN python3 -m venv /opt/draxr \
    && /opt/draxr/bin/pip install --no-cache-dir --disable-pip-version-check . \
    && /opt/draxr/bin/pip uninstall --yes --quiet pip

FROM ${BASE}
COPY --from=build /opt/draxr /opt/draxr
ENV PATH=/opt/draxr/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Non-root, matching the manifests' runAsUser/runAsGroup; the root filesystem can be read-only
# (bytecode was compiled at install time, and nothing is written at run time).
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["draxr"]
CMD ["serve"]
