# draxr: the admission webhook and the allocation worker (`draxr serve`).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY examples ./examples
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# Non-root, matching the manifests' runAsUser/runAsGroup; the root filesystem can be read-only.
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 8443 8080
ENTRYPOINT ["draxr"]
CMD ["serve"]
