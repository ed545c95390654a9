"""liqo-peering-operator: declarative Liqo peerings."""

__version__ = "0.1.0"
