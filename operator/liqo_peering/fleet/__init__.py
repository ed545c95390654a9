"""LiqoPeeringSets, pure: which LiqoPeerings a set wants, the next writes to get there, its status."""
