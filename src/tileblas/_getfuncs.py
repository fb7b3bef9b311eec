"""get_blas_funcs and find_best_blas_type for tileblas.blas."""

__all__: list[str] = []
