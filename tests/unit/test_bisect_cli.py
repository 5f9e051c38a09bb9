"""`harness bisect`'s refusals of bad input (one line, exit 2, nothing run or written), its git
listing on a throwaway repository, and its outputs rendered from a simulated bisection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bisect.git import Repo, commit_link, github_base
from harness.bisect.report import render_markdown, result_json, summary_line
from harness.bisect.session import Commit, Settings, bisect
from harness.bisect.simulate import SimulatedRange, commits_of
from harness.cli import main
from tests.bisect_repo import OPS_MODULE, SHAPES, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

RUN_ARGS = ["--", "--backend", "cpu", "--ops-module", str(OPS_MODULE), "--ops", "libwork", "--dtypes", "fp32",
            "--shapes-file", str(SHAPES)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("lib") / "slowlib"
    return path, make_repo(path)


def test_the_range_holds_the_first_parent_commits_that_change_the_source(repo: tuple[Path, dict[str, str]]) -> None:
    path, shas = repo
    git = Repo(path)
    assert [s for s, _ in git.first_parent(shas["good"], shas["docs2"])] == \
        [shas[k] for k in ("docs", "tidy", "sleeps", "comment", "docs2")]
    listed = git.source_commits(shas["good"], shas["docs2"], "src")
    assert [(c.sha, c.subject) for c in listed] == [(shas["tidy"], "tidy slowlib"), (shas["sleeps"], "slowlib sleeps"),
                                                    (shas["comment"], "comment")]
    assert len({c.tree for c in listed}) == 3
    assert git.source_commits(shas["comment"], shas["docs2"], "src") == []
    assert git.subject(shas["docs2"]) == "docs again"


def test_the_export_holds_the_source_of_that_commit_once_per_tree(repo: tuple[Path, dict[str, str]],
                                                                tmp_path: Path) -> None:
    path, shas = repo
    git = Repo(path)
    one = git.export(shas["sleeps"], "src", tmp_path)
    assert "time.sleep(0.004)" in (one / "src" / "slowlib" / "__init__.py").read_text()
    assert git.export(shas["sleeps"], "src", tmp_path) == one
    assert git.export(shas["good"], "src", tmp_path) != one
    assert not (one / "README.md").exists()


def test_a_github_remote_gives_commit_links() -> None:
    assert github_base("https://github.com/flagos-ai/FlagGems.git") == "https://github.com/flagos-ai/FlagGems"
    assert github_base("git@github.com:flagos-ai/FlagGems.git") == "https://github.com/flagos-ai/FlagGems"
    assert github_base("https://gitlab.com/a/b.git") == ""
    assert commit_link("https://github.com/a/b", "abc") == "https://github.com/a/b/commit/abc"
    assert commit_link("", "abc") == ""


@pytest.mark.parametrize(("args", "says"), [
    (["--good", "nosuchref", "--bad", "bad"], "--good nosuchref: no such commit"),
    (["--good", "good", "--bad", "v9.9"], "--bad v9.9: no such commit"),
    (["--good", "bad", "--bad", "good"], "is not an ancestor of --bad good"),
    (["--good", "bad", "--bad", "docs"], "changes src/"),
    (["--good", "good", "--bad", "bad", "--source-path", "lib/"], "changes lib/"),
    (["--good", "good", "--bad", "bad", "--threshold", "0"], "--threshold 0: a threshold must be above 0"),
    (["--good", "good", "--bad", "bad", "--threshold", "-5"], "--threshold -5: a threshold must be above 0"),
    (["--good", "good", "--bad", "bad", "--threshold", "lots"], "--threshold 'lots' is not a number"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    repo: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str,
) -> None:
    path, _ = repo
    out, cache = tmp_path / "out", tmp_path / "cache"
    code = main(["bisect", "--repo", str(path), *args, "--allow-cpu", "--out", str(out), "--cache", str(cache),
                 *RUN_ARGS])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("harness: error: ") and says in err, err
    assert not out.exists() and not cache.exists()


def test_an_op_not_in_the_tree_is_refused_before_anything_runs(repo: tuple[Path, dict[str, str]], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = repo
    out = tmp_path / "out"
    code = main(["bisect", "--repo", str(path), "--good", "good", "--bad", "bad", "--allow-cpu", "--out", str(out),
                 "--cache", str(tmp_path / "cache"), "--", "--backend", "cpu", "--ops", "no_such_op"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no_such_op" in err, err
    assert not out.exists()


def test_speed_on_the_cpu_backend_needs_allow_cpu_and_not_a_repository_is_refused(
    repo: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = repo
    common = ["--good", "good", "--bad", "bad", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")]
    assert main(["bisect", "--repo", str(path), *common, *RUN_ARGS]) == 2
    assert "--allow-cpu" in capsys.readouterr().err
    assert main(["bisect", "--repo", str(tmp_path), *common, *RUN_ARGS]) == 2
    assert "not a git repository" in capsys.readouterr().err
    assert main(["bisect", "--repo", str(path), *common, "--allow-cpu", "--", "--out", "x", "--ops", "libwork"]) == 2
    assert "sets --out" in capsys.readouterr().err


def test_another_bisection_in_the_output_folder_is_refused(repo: tuple[Path, dict[str, str]], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = repo
    out = tmp_path / "out"
    out.mkdir()
    (out / "bisect-state.json").write_text(json.dumps({"format_version": 1, "key": {"good": "other"}}))
    code = main(["bisect", "--repo", str(path), "--good", "good", "--bad", "bad", "--allow-cpu", "--out", str(out),
                 "--cache", str(tmp_path / "cache"), *RUN_ARGS])
    err = capsys.readouterr().err
    assert code == 2 and "holds another bisection" in err
    (out / "bisect-state.json").unlink()
    (out / "notes.txt").write_text("mine")
    assert main(["bisect", "--repo", str(path), "--good", "good", "--bad", "bad", "--allow-cpu", "--out", str(out),
                 "--cache", str(tmp_path / "cache"), *RUN_ARGS]) == 2
    assert "not empty" in capsys.readouterr().err


def test_the_outputs_name_the_culprit_with_its_link_and_every_commit_tested() -> None:
    commits = commits_of(20)
    sim = SimulatedRange(commits, 11, run_sigma=0.003, broken={5}, seed=2)
    result = bisect(commits, Commit("f" * 40, "bad", "t"), sim, Settings(), key={})
    facts = {"repo": "lib", "good": "v1", "bad": "v2", "metric": "speed", "threshold_given": None,
             "source_path": "src", "run_args": ["--ops", "op"]}
    data = result_json(result, facts, "https://github.com/a/b")
    assert data["culprit"]["sha"] == commits[11].sha
    assert data["culprit"]["link"] == f"https://github.com/a/b/commit/{commits[11].sha}"
    assert [t["sha"] for t in data["tested"]] == [s["sha"] for s in result.steps]
    assert data["runs"] == sum(2 * r for _, r in sim.runs_made)
    line = summary_line(data)
    assert line.startswith(f"bisect: culprit {commits[11].sha[:12]} commit 11 (") and "\n" not in line
    md = render_markdown(data)
    assert "- metric: speed; threshold: " in md
    verdict = render_markdown({**data, "metric": "verdict"})  # judged by PASS against FAIL: no threshold said
    assert "- metric: verdict (PASS against FAIL or CRASH; no speed threshold)" in verdict and "threshold: " not in verdict
    assert f"[{commits[11].sha[:12]}](https://github.com/a/b/commit/{commits[11].sha})" in md
    assert md.count("\n| ") == len(result.steps) + 1  # the header and one row per commit tested
    json.dumps(data, allow_nan=False)


def test_cached_runs_serve_any_op_they_measured_whatever_the_device() -> None:
    from harness.bisect.runner import ops_of, run_key

    assert ops_of(["--ops", "softmax", "add"]) == ("add", "softmax")
    assert ops_of(["--level", "core"]) is None
    # The key leaves out the ops and the device: a second op over the same range finds the runs.
    assert run_key(["--ops", "add", "--devices", "0", "--level", "core"]) == run_key(["--level", "core", "--ops", "mm"])
    assert run_key(["--level", "core"]) != run_key(["--level", "smoke"])


def test_suite_op_names_are_the_ids_the_run_gives_its_rows(tmp_path: Path) -> None:
    from harness.bisect.runner import ops_of
    from tests.data.fake_flaggems_suite import write_fake_suite

    tree = str(write_fake_suite(tmp_path / "gems").benchmark)
    # add_ is the op mark of add_inplace: the rows the bisection tracks are add_inplace's
    assert ops_of(["--suite", tree, "--ops", "add_", "softmax"]) == ("add_inplace", "softmax")
    assert ops_of(["--suite", tree, "--ops", "add_,add_inplace"]) == ("add_inplace",)
    assert ops_of(["--suite", tree, "--ops", "no_such_op"]) == ("no_such_op",)  # the run refuses it, clearly


def test_a_step_folder_is_reused_only_for_ops_it_measured(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from harness.bisect.runner import ENTRY, AbStepRunner

    path, shas = repo
    good = Commit(shas["good"], "good", "tree-good")

    def cached(run_ops: list[str], measured: list[str] | None) -> bool:
        runner = AbStepRunner(Repo(path), good, "src", ["--backend", "cpu", "--ops", *run_ops], tmp_path, {})
        folder = tmp_path / "step"
        folder.mkdir(exist_ok=True)
        (folder / ENTRY).write_text(json.dumps({"ops": measured, "runs": 4, "seconds": 1.0}))
        return runner._cached(folder) is not None

    assert cached(["add"], ["add", "mm"])
    assert not cached(["add", "softmax"], ["add", "mm"])
    assert cached(["softmax"], None)  # runs of every op the arguments select
    (tmp_path / "step" / ENTRY).unlink()
    runner = AbStepRunner(Repo(path), good, "src", ["--ops", "add"], tmp_path, {})
    assert runner._cached(tmp_path / "step") is None  # an interrupted step: no entry
