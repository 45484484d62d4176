# The Holter service (API on one port). Built by docker-compose.yml.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY client ./client
COPY server ./server
COPY dashboard ./dashboard
COPY charts ./charts
COPY readers ./readers
COPY migrations ./migrations
RUN pip install --no-cache-dir ".[all]" \
    && useradd --create-home --uid 10001 holter
USER holter

ENV HOLTER_HOST=0.0.0.0 HOLTER_PORT=8765
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8765/api/v1/health', timeout=2).status != 200)"
# The service applies the schema migrations on start.
CMD ["holter", "serve"]
