"""The package version (one place: the facade and the CLI read it)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
