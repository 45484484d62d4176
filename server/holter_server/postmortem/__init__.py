"""Post-mortem review: what happened in a run (timeline, summary, report), how it compares
with a trusted reference run, and which configuration parameters change the structure of a
failure across runs (the lever finder). The analysis modules are pure."""
