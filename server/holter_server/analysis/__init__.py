"""Pure analysis across runs: seed groups and their bands, ablation verdicts and their
confounders, twin runs that share a data order, and what a config implies about a period.
Numbers and configs in, findings out: no database, no clock, no network (the services feed them).
"""
