"""The kernels of the PyTorch front-end: how fast things run, behind one boundary.

The modules state the maths and hold the state; everything that exists only to make it fast
lives here, one file per kernel family, each with one entry point per operation that chooses
between its fast path and the plain formula written next to it:

============  =======================================  =========================================
family        entry points                             fast path
============  =======================================  =========================================
``_cast``     ``cast_exact``, ``store``                 round-to-odd float32 step; chunked store
``_table``    ``sinusoidal_rows``, ``sinusoidal_at``,   the angle-addition engine (distinct
              ``rope_cos_sin``,                         phasors, complex products)
              ``multi_axis_cos_sin``
``_add``      ``add_encoding``, ``embed``               blocked gather + add + exact dropout
``_rope``     ``rotate``, ``phasors``                   chunked half pairs; complex products
============  =======================================  =========================================

The plain formulas are what ``torch.compile`` traces and what runs everywhere under
``posenc.set_fast_paths(False)`` (or ``POSENC_FAST_PATHS=0``). Tables and additions are the
same bits either way, and so are rotations on the CPU (off it, interleaved rotations agree
within one unit in the last place: the device's complex product); the fused dropout
draws its (exact-probability) mask differently from ``torch.nn.Dropout``. Large work is shared
among threads with one synchronisation per call (:mod:`._workers`). No fast path reads
tensor data off the CPU, so none synchronises the host with an accelerator.
"""
