FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --gid 10001 quotient \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin quotient

WORKDIR /src
COPY pyproject.toml README.md ./
COPY app/ ./app/
RUN pip install --no-cache-dir . && rm -rf /src

WORKDIR /
USER 10001:10001
EXPOSE 8888
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8888/livez', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["quotient"]
CMD ["serve", "--host", "0.0.0.0"]
