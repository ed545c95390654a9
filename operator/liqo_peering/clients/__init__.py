"""Talking to clusters: one small client per cluster (local consumer, remote provider)."""
