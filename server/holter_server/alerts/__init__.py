"""Alerts to chat: pure pieces (what an alert says, how each channel shows it, which rule
matches, signing). Delivery lives in services/dispatch.py."""
