"""rofmd package."""
