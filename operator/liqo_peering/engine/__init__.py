"""The peering engine: one module per stage, each a non-blocking step that does what it can and says
what it waits for. Watches on both clusters trigger the next reconcile (see triggers.py)."""
