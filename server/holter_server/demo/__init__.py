"""Runs that show what Holter does, for `holter demo`."""
