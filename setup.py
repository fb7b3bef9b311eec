"""Build step for the compiled modules: tileblas.kernels._native (the generic GIL-free BLAS caller),
tileblas.kernels._pool (the threads of OpenBLAS's parallel calls), tileblas.blas._fastpath (the
small-call path of the drop-in routines) and tileblas.rblas._guard (compute mode's non-finite checks)."""
import numpy
from setuptools import Extension, setup

#: The files of tileblas.blas._fastpath (src/tileblas/blas/_fp.h says what each holds).
FASTPATH = ("_fastpath", "_fp_front", "_fp_arrays", "_fp_decide", "_fp_level3", "_fp_level12")

setup(
    ext_modules=[
        Extension(
            "tileblas.kernels._native",
            sources=["src/tileblas/kernels/_native.c"],
            depends=["src/tileblas/kernels/_pool.h"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "tileblas.kernels._pool",
            sources=["src/tileblas/kernels/_pool.c"],
            depends=["src/tileblas/kernels/_pool.h"],
            extra_compile_args=["-O2"],
            extra_link_args=["-pthread"],
        ),
        Extension(
            "tileblas.blas._fastpath",
            sources=[f"src/tileblas/blas/{f}.c" for f in FASTPATH],
            depends=["src/tileblas/blas/_fp.h", "src/tileblas/kernels/_pool.h"],
            include_dirs=[numpy.get_include(), "src/tileblas/blas", "src/tileblas/kernels"],  # _fp.h, _pool.h
            extra_compile_args=["-O2"],
        ),
        Extension(
            "tileblas.rblas._guard",
            sources=["src/tileblas/rblas/_guard.c"],
            depends=["src/tileblas/kernels/_pool.h"],
            include_dirs=[numpy.get_include(), "src/tileblas/kernels"],  # _pool.h
            extra_compile_args=["-O3"],  # the scans are vectorised at -O3
        ),
    ]
)
