# Quotient's image: python slim, dependencies pinned by deploy/constraints.txt, non-root.
# Build from the repository root:  docker build -t quotient:0.1.0 .

# --- build: install into a virtualenv (every dependency ships a manylinux wheel, so no
# compiler is needed; none is left in the image either way).
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/quotient
WORKDIR /src
COPY deploy/constraints.txt ./deploy/constraints.txt
COPY pyproject.toml README.md ./
COPY app/ ./app/
# -c: exact versions for the image; pyproject.toml keeps its ranges for everyone else.
RUN /opt/quotient/bin/pip install --only-binary=:all: -c deploy/constraints.txt . \
 && /opt/quotient/bin/pip uninstall -y pip setuptools \
 && find /opt/quotient -name '__pycache__' -prune -exec rm -rf {} +

# --- runtime: the interpreter, the virtualenv, nothing else.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/quotient/bin:$PATH
RUN groupadd --gid 10001 quotient \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin quotient
COPY --from=build /opt/quotient /opt/quotient
COPY deploy/healthcheck.py /usr/local/bin/quotient-healthcheck
RUN chmod 0755 /usr/local/bin/quotient-healthcheck

USER 10001:10001
WORKDIR /
EXPOSE 8888
# For docker/podman; Kubernetes uses the httpGet probes of deploy/base/quotient.yaml. With HTTPS set
# QUOTIENT_HEALTH_URL=https://127.0.0.1:8888 and QUOTIENT_HEALTH_CA/_CERT/_KEY.
HEALTHCHECK --interval=30s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "/usr/local/bin/quotient-healthcheck", "/livez"]
ENTRYPOINT ["quotient"]
# The bundled demo snapshot, reachable through a published port (`docker run -p 8888:8888`):
# no cluster behind it, so nothing a caller does leaves the process. deploy/base/quotient.yaml
# passes its own arguments (client certificates required).
CMD ["serve", "--host", "0.0.0.0", "--insecure-no-client-auth"]
