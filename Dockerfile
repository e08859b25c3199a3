# The lineage API (see docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY . .
# The package carries its SQL and migrations: a plain install is all it needs.
RUN pip install --no-cache-dir ".[otlp]"
EXPOSE 8765
CMD ["lineage", "serve", "--host", "0.0.0.0"]
