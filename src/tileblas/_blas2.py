"""Level-2 routines of tileblas.blas (drop-in for scipy.linalg.blas)."""

__all__: list[str] = []
