"""Pure builders of the Liqo objects each peering stage creates (no I/O).

Names, labels and fields follow liqoctl v1.2 (see shared/reference/liqo-peering-facts.md); every
builder returns a plain dict ready for server-side apply.
"""
