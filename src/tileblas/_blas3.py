"""Level-3 routines of tileblas.blas (drop-in for scipy.linalg.blas)."""

__all__: list[str] = []
