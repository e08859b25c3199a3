# The lineage API (see docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY . .
# Editable: the service reads sql/ and migrations/ from this tree.
RUN pip install --no-cache-dir -e .
EXPOSE 8765
CMD ["lineage", "serve", "--host", "0.0.0.0"]
