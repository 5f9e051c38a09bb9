"""`harness bisect`: the library commit that changed an op's speed or verdict (docs/bisect.md).

``plan`` is the bisection without I/O, ``session`` drives it over a step runner, ``git`` reads
the history, ``runner`` runs a step with `harness ab`, ``report`` writes the outputs, ``cli`` is
the command; ``simulate`` is a step runner over made-up timings, for tests and benchmarks."""
