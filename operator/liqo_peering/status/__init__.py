"""Pure helpers that compute the LiqoPeering status (no cluster I/O)."""
