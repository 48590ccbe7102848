# Confer gateway image. Migrations run on start (CONFER_MIGRATE_ON_START, default true).
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md alembic.ini ./
COPY gateway ./gateway
COPY a2a ./a2a
COPY did ./did
COPY models ./models
COPY alembic ./alembic
# Editable, so the gateway finds alembic/ and alembic.ini beside it in /app.
RUN pip install --no-cache-dir -e .
RUN useradd --create-home confer && mkdir -p /app/.data && chown confer /app/.data
USER confer
VOLUME /app/.data
EXPOSE 8000
CMD ["confer", "serve", "--host", "0.0.0.0", "--port", "8000"]
