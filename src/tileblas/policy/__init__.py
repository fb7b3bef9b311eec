"""The decisions the runtime reads.

Below the devices and the runtime, above the kernels; nothing here measures (:mod:`tileblas.perf` and
``tileblas tune`` do, and write what is read here).

* :mod:`~tileblas.policy._paths` -- where tuning data lives, and the path policy (native, recursive or
  tiled per routine family and precision class);
* :mod:`~tileblas.policy._recursion` -- whether the host's trmm/trsm take the recursion, with which
  stopping size (the kernels are told, they do not ask);
* the read side of the performance models: :mod:`~tileblas.policy._models` (stored models and their
  evaluation), :mod:`~tileblas.policy._repository` (the SQLite file), :mod:`~tileblas.policy._calls` and
  :mod:`~tileblas.policy._variants` (the calls algorithms make, and their traces),
  :mod:`~tileblas.policy._predictor` (predictions from the models) and :mod:`~tileblas.policy._suggest`
  (``suggest``: tile size, recursion stop and block size from the models).  Their public names are
  :mod:`tileblas.perf`'s.

Importing this package imports nothing; each module is imported by what uses it.
"""

__all__: list[str] = []  # a layer of private modules; their public names are tileblas.perf's
