"""--node with the file named by its absolute path (the repository's root in full, as the old
driver took it) is mapped to the node relative to the suite's benchmark/ directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.suite.inventory import Inventory, read_inventory
from harness.suite.layout import locate_suite
from harness.suite.select import resolve_nodes, tree_node
from tests.data.fake_flaggems_suite import FakeSuite, write_fake_suite


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> FakeSuite:
    return write_fake_suite(tmp_path_factory.mktemp("v53"))


@pytest.fixture(scope="module")
def inventory(suite: FakeSuite) -> Inventory:
    return read_inventory(locate_suite(suite.benchmark))


def test_an_absolute_node_becomes_the_tree_relative_node(suite: FakeSuite, inventory: Inventory) -> None:
    absolute = f"{suite.benchmark.resolve()}/test_mm.py::test_mm[x-1]"
    (op,) = resolve_nodes(inventory, [absolute])
    assert op.id == "test_mm.py::test_mm[x-1]" and op.selected_nodes() == ("test_mm.py::test_mm[x-1]",)
    (same,) = resolve_nodes(inventory, ["benchmark/test_mm.py::test_mm[x-1]"])
    assert same.id == op.id


def test_an_absolute_node_through_a_link_to_the_tree_is_mapped_too(suite: FakeSuite, inventory: Inventory,
                                                                    tmp_path: Path) -> None:
    link = tmp_path / "checkout"
    link.symlink_to(suite.benchmark.resolve().parent)
    (op,) = resolve_nodes(inventory, [f"{link}/benchmark/test_mm.py::test_mm"])
    assert op.id == "test_mm.py::test_mm"


def test_an_absolute_node_outside_the_tree_is_refused_saying_so(inventory: Inventory, tmp_path: Path) -> None:
    other = tmp_path / "benchmark" / "test_mm.py"
    with pytest.raises(UsageError, match=f"--node {other}::test_mm: no such benchmark function "
                                         r"\(its file is not in the tree "):
        resolve_nodes(inventory, [f"{other}::test_mm"])


def test_tree_node_leaves_relative_nodes_relative(tmp_path: Path) -> None:
    assert tree_node("test_mm.py::test_mm", tmp_path) == "test_mm.py::test_mm"
    assert tree_node("benchmark/test_mm.py::test_mm[a::b]", tmp_path) == "test_mm.py::test_mm[a::b]"
    assert tree_node(f"{tmp_path}/sub/test_x.py::test_x[p]", tmp_path) == "sub/test_x.py::test_x[p]"
