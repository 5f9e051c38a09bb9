"""The pure parts of benchmarks/flaggems_corpus.py: the stratified sample, its parts, the projection."""

from __future__ import annotations

from pathlib import Path

from benchmarks.flaggems_corpus import category, lpt_makespan, parts_of, project, stratified_sample
from harness.suite.inventory import read_inventory
from harness.suite.layout import locate_suite
from harness.suite.select import all_ops
from tests.data.fake_flaggems_suite import write_fake_suite


def test_the_sample_covers_every_stratum_in_proportion_and_every_prefix_is_stratified(tmp_path: Path) -> None:
    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path).benchmark))
    ops = all_ops(inventory)
    strata = {category(o, inventory.base_classes) for o in ops}
    assert {"backward", "inplace", "BlasBenchmark", "GenericBenchmark*", "UnaryReductionBenchmark"} <= strata
    sample = stratified_sample(ops, 8, inventory.base_classes)
    assert sample == stratified_sample(list(reversed(ops)), 8, inventory.base_classes)  # deterministic
    first = {category(o, inventory.base_classes) for o in sample[: len(strata)]}
    assert first == strata  # one of each before a second of any
    one, two = parts_of(sample, [2.0, 1.0])
    assert one + two == sample and len(one) == round(len(sample) * 2 / 3)


def test_the_projection_gives_unsampled_ops_their_strata_mean_and_shards_longest_first(tmp_path: Path) -> None:
    assert lpt_makespan([5, 4, 3, 3], 2) == 8
    assert lpt_makespan([5, 4, 3], 8) == 5
    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path).benchmark))
    ops = all_ops(inventory)
    measured = {"add": 10.0, "softmax_backward": 100.0}
    result = project(ops, measured, inventory.base_classes, start_s=0.0)
    assert result["per_stratum_mean_s"] == {"BinaryPointwiseBenchmark": 10.0, "backward": 100.0}
    # broken_add shares add's stratum (10 s); the 10 others cost the mean of what was measured (55 s)
    assert result["hours"]["1"] == round((10 + 100 + 10 + 10 * 55) / 3600, 3)
