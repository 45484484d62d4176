"""API schemas, one module per resource, named by role (`RunCreate`, `RunPublic`, ...)."""

# The largest integer both stores hold (a signed 64-bit BIGINT): steps, offsets and counts
# beyond it are a 422, not a database overflow.
MAX_BIGINT = 2**63 - 1
