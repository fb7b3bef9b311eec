"""Level-1 routines of tileblas.blas (drop-in for scipy.linalg.blas)."""

__all__: list[str] = []
