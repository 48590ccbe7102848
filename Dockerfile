# Confer gateway image. Migrations run on start (CONFER_MIGRATE_ON_START, default true).
# The web client is built in a Node stage; only its output enters the image.
FROM node:20-slim AS web
WORKDIR /src
COPY web/package.json web/package-lock.json ./web/
RUN cd web && npm ci --no-audit --no-fund
COPY web ./web
RUN mkdir -p gateway && cd web && npm run build

FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md alembic.ini ./
COPY gateway ./gateway
COPY a2a ./a2a
COPY did ./did
COPY models ./models
COPY alembic ./alembic
COPY --from=web /src/gateway/static ./gateway/static
# Editable, so the gateway finds alembic/ and alembic.ini beside it in /app.
RUN pip install --no-cache-dir -e .
RUN useradd --create-home confer && mkdir -p /app/.data && chown confer /app/.data
USER confer
VOLUME /app/.data
EXPOSE 8000
CMD ["confer", "serve", "--host", "0.0.0.0", "--port", "8000"]
