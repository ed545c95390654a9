"""The LiqoPeering API: the pydantic model is the source of truth; the CRD and docs are generated from it."""
