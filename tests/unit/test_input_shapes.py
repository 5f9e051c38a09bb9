"""harness.child.input_shapes: how a --shapes-file entry reaches a benchmark that builds its own inputs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.child.input_shapes import entry_for, input_plan, planned_inputs


class Base:
    DEFAULT_SHAPES: list[tuple[int, ...]] = [(64, 64)]

    def __init__(self, op_name: str) -> None:
        self.op_name = op_name
        self.shapes: list[tuple[int, ...]] = list(self.DEFAULT_SHAPES)


class WalksShapes(Base):
    def get_input_iter(self, dtype: Any) -> Iterator[Any]:
        for shape in self.shapes:
            yield ("walk", shape, dtype)


class OwnList(Base):
    DEFAULT_SHAPES = [(1, 2, 6, 6, 3)]

    def input_fn(self, shape: tuple[int, ...], dtype: Any, device: Any) -> Iterator[Any]:
        yield ("fn", shape, dtype, device)

    def get_input_iter(self, dtype: Any) -> Iterator[Any]:
        for shape in self.DEFAULT_SHAPES:
            yield from self.input_fn(shape, dtype, "cpu")


class Fixed(Base):
    def get_input_iter(self, dtype: Any) -> Iterator[Any]:
        yield ("fixed", (4, 4), dtype)


def test_the_entry_is_found_by_op_name_then_class_chain() -> None:
    assert entry_for(OwnList("conv2d"), {"Base": [[1, 1]], "conv2d": [[2, 2]]}) == ("conv2d", ((2, 2),))
    assert entry_for(OwnList("conv2d"), {"Base": [[1, 1]]}) == ("Base", ((1, 1),))
    assert entry_for(OwnList("conv2d"), {"mm": [[1, 1]]}) is None


def test_a_benchmark_walking_self_shapes_gets_them_set() -> None:
    bench = WalksShapes("own")
    bench.shapes = [(3, 5)]  # its own set_shapes ran
    plan = input_plan(bench, "own", ((7, 9),), bench.get_input_iter)
    assert plan.how == "shapes" and "self.shapes" in plan.note
    assert list(planned_inputs(bench, plan, bench.get_input_iter, "f32")) == [("walk", (7, 9), "f32")]


def test_shapes_the_file_already_gave_need_nothing() -> None:
    bench = WalksShapes("softmax")
    bench.shapes = [(7, 9), (1, 1)]  # FlagGems' set_shapes read them, and added its more shapes
    plan = input_plan(bench, "softmax", ((7, 9),), bench.get_input_iter)
    assert plan.how == "file" and plan.note == ""
    assert [s for _, s, _ in planned_inputs(bench, plan, bench.get_input_iter, "f32")] == [(7, 9), (1, 1)]


def test_a_benchmark_walking_a_list_of_its_own_gets_them_through_its_input_fn() -> None:
    bench = OwnList("conv_like")
    plan = input_plan(bench, "conv_like", ((2, 2, 5, 5, 4), (1, 1, 3, 3, 1)), bench.get_input_iter)
    assert plan.how == "input_fn"
    assert [s for _, s, _, _ in planned_inputs(bench, plan, bench.get_input_iter, "f32")] == [
        (2, 2, 5, 5, 4), (1, 1, 3, 3, 1)]


def test_shapes_of_another_rank_are_not_given_and_the_note_says_why() -> None:
    bench = OwnList("conv_like")
    plan = input_plan(bench, "conv_like", ((4096, 4096),), bench.get_input_iter)
    assert plan.how == "kept" and "[2] dimension(s), its own have [5]" in plan.note
    assert [s for _, s, _, _ in planned_inputs(bench, plan, bench.get_input_iter, "f32")] == [(1, 2, 6, 6, 3)]


def test_inputs_made_from_sizes_of_its_own_cannot_take_shapes() -> None:
    bench = Fixed("fixed")
    plan = input_plan(bench, "fixed", ((8, 8),), bench.get_input_iter)
    assert plan.how == "kept" and "no shapes list, no per-shape input_fn" in plan.note
    assert list(planned_inputs(bench, plan, bench.get_input_iter, "f32")) == [("fixed", (4, 4), "f32")]
