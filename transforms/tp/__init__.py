"""Tensor parallelism, the compiler's part: `annotate.py` (`tensor-parallel`:
each layer's case, from the shardings `rules.py` propagates), `rules.py` (the
one table of how each `tir` op carries a sharding), `partition.py`
(`tp-partition`: the per-device program, with its collectives) and
`sizing.py` (`device-memory=`: the smallest device count that fits), with
`experts.py` (a mixture's stacked experts' case), `sharing.py` (the passes
that share a program, in order) and `layer_records.py` (the cases carried
to the plan). The runtime (segments, weight files, runner, MPI) is
`split/`."""
