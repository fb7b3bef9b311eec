"""The decisions the runtime reads."""
