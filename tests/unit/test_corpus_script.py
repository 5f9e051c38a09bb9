"""benchmarks/flaggems_corpus.py and what it draws on: the sample and projection
(harness/suite/projection.py), the cost timeline (harness/run/timeline.py) and the summary of a
sample's runs (harness/suite/costing.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.suite.inventory import read_inventory
from harness.suite.layout import locate_suite
from harness.suite.projection import category, lpt_makespan, parts_of, project, stratified_sample
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


def test_another_seed_draws_another_sample_of_the_same_proportions(tmp_path: Path) -> None:
    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path).benchmark))
    ops = all_ops(inventory)

    def per_stratum(sample: list) -> Counter[str]:
        return Counter(category(op, inventory.base_classes) for op in sample)

    unseeded = stratified_sample(ops, 8, inventory.base_classes)
    seeded = {seed: stratified_sample(ops, 8, inventory.base_classes, seed) for seed in ("s1", "s2", "s3")}
    assert stratified_sample(ops, 8, inventory.base_classes, "s1") == seeded["s1"]  # one seed, one sample
    assert all(per_stratum(s) == per_stratum(unseeded) for s in seeded.values())
    # 8 of 14 ops leave a choice within the larger strata: the seeds do not all draw the same ops
    drawn = {frozenset(o.id for o in s) for s in [unseeded, *seeded.values()]}
    assert len(drawn) > 1


def test_the_projection_gives_unsampled_ops_their_strata_mean_and_shards_longest_first(tmp_path: Path) -> None:
    assert lpt_makespan([5, 4, 3, 3], 2) == 8
    assert lpt_makespan([5, 4, 3], 8) == 5
    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path).benchmark))
    ops = all_ops(inventory)
    measured = {"add": 10.0, "softmax_backward": 100.0}
    result = project(ops, measured, inventory.base_classes, start_s=0.0)
    assert result["per_stratum_mean_s"] == {"BinaryPointwiseBenchmark": 10.0, "backward": 100.0}
    # broken_add shares add's stratum (10 s); the 11 others cost the mean of what was measured (55 s)
    assert result["hours"]["1"] == round((10 + 100 + 10 + 11 * 55) / 3600, 3)


def test_the_projection_interval_resamples_each_stratum_and_holds_the_projection(tmp_path: Path) -> None:
    from harness.suite.projection import project_interval

    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path).benchmark))
    ops = all_ops(inventory)
    # UnaryPointwiseBenchmark: two costed, two left to stand in for; UnaryReduction: one costed, amin left
    measured = {"bitwise_not": 10.0, "own_shapes": 30.0, "softmax": 100.0}
    point = project(ops, measured, inventory.base_classes, start_s=0.0)
    found = project_interval(ops, measured, inventory.base_classes, start_s=0.0, resamples=500)
    assert found["total_s"] == pytest.approx(point["hours"]["1"] * 3600, abs=2)  # the same estimator
    assert found["strata_resampled"] == ["UnaryPointwiseBenchmark"]
    assert found["strata_fixed"] == ["UnaryReductionBenchmark"]  # one costed op cannot be resampled
    low, high = found["hours"]["1"]
    assert low < point["hours"]["1"] < high  # 10 s and 30 s: an interval around the projection
    assert found == project_interval(ops, measured, inventory.base_classes, start_s=0.0, resamples=500)  # seeded
    alone = project_interval(ops, {"softmax_backward": 100.0}, inventory.base_classes, start_s=0.0, resamples=500)
    assert alone["strata_resampled"] == [] and alone["total_s"] == 100.0 * len(ops)  # the others at its cost
    assert alone["hours"]["1"][0] == alone["hours"]["1"][1]  # nothing to resample


def test_an_op_counts_once_with_the_status_it_ended_with() -> None:
    from harness.run.timeline import final_status

    rows = [{"op": "a", "status": "INTERRUPTED"}, {"op": "b", "status": "PASS"}, {"op": "c", "status": "PENDING"},
            {"op": "d", "status": "CRASH", "part": "1"}, {"op": "a", "status": "ERROR"}, {"op": "b", "status": "PENDING"},
            {"op": "d", "status": "PASS", "part": "2"}, {"op": "d", "status": "INTERRUPTED", "part": "3"},
            {"op": "e", "status": "INTERRUPTED", "part": "1"}, {"op": "e", "status": "PENDING", "part": "2"},
            {"op": "f", "status": "INTERRUPTED", "part": "1"}, {"op": "f", "status": "INTERRUPTED", "part": "2"}]
    final = final_status(rows)
    assert {op: r["status"] for op, r in final.items()} == {"a": "ERROR", "b": "PASS", "c": "PENDING", "d": "PASS",
                                                           "e": "INTERRUPTED", "f": "INTERRUPTED"}
    assert final["e"]["part"] == "1" and final["f"]["part"] == "2"  # e: part 2 never reached it; f: started again
    assert final["d"]["part"] == "2"  # run again on purpose: the later end decides; a later cut does not


def test_parts_sort_by_number(tmp_path: Path) -> None:
    import benchmarks.flaggems_corpus as corpus

    for k in (2, 10):
        (tmp_path / "c" / f"sample-{k}").mkdir(parents=True)
        (tmp_path / "c" / f"sample-{k}" / "ops_status.csv").write_text("op,status\n")
    (tmp_path / "c" / "sample-3").mkdir()  # no ops_status.csv: not a part
    assert [p.name for p in corpus.parts_in(tmp_path / "c")] == ["sample-2", "sample-10"]


def test_a_sample_part_is_a_shard_of_the_sample_and_a_carried_part_is_resumed(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """sampleK: ``--shard K/PARTS`` of one ops file (the whole sample), with --budget and the hard
    stop GRACE_S after it; a part an earlier call left in RUNS is resumed as it was started."""
    import benchmarks.flaggems_corpus as corpus

    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path / "tree").benchmark))
    sample = stratified_sample(all_ops(inventory), 8, inventory.base_classes)
    runs = tmp_path / "runs"
    runs.mkdir()
    started: list[tuple[list[str], float]] = []

    def bounded(cmd: list[str], budget_s: float, **_: object) -> tuple[int, float]:
        started.append((list(cmd), budget_s))
        return 130, 1.0

    monkeypatch.setattr(corpus, "bounded", bounded)
    monkeypatch.setattr(corpus, "RUNS", runs)
    monkeypatch.setattr(corpus, "PARTS", 3)
    monkeypatch.setattr(corpus, "SHARD_WEIGHTS", "last/ops_status.csv")
    monkeypatch.setattr(corpus, "HARNESS_ARGS", ["--ir", "off"])
    monkeypatch.setitem(corpus.BUDGETS, "sample", 300.0)
    corpus.step_sample(2, sample, inventory.base_classes)
    ((cmd, limit),) = started
    assert cmd[cmd.index("--budget") + 1] == "300" and limit == 300.0 + corpus.GRACE_S
    assert cmd[cmd.index("--out") + 1] == str(runs / "sample-2")
    assert cmd[-8:] == ["--ops-file", str(runs / "sample.txt"), "--shard", "2/3", "--shard-weights",
                        "last/ops_status.csv", "--ir", "off"]
    assert (runs / "sample.txt").read_text().split() == [op.id for op in sample]  # every part: the same plan
    (runs / "sample-2").mkdir()
    (runs / "sample-2" / "run.json").write_text("{}")
    corpus.step_sample(2, sample, inventory.base_classes)
    cmd, limit = started[1]
    # resumed with this call's budget (a resumed run would keep the one it started with)
    assert cmd[-6:] == ["--progress", "plain", "--budget", "300", "--resume", str(runs / "sample-2")]
    assert limit == 300.0 + corpus.GRACE_S


def test_the_timeline_splits_each_ended_op_into_before_during_and_after_its_session(tmp_path: Path) -> None:
    import json

    from harness.run.timeline import timeline

    run = tmp_path / "sample-1"
    (run / "specs").mkdir(parents=True)
    (run / "ops_status.csv").write_text("op,status,elapsed_s\nheld,PASS,10\nfresh,SKIP,4\ncut,INTERRUPTED,3\n")
    # pre-started, asked to run 1 s before its imports were done (it read the line after them);
    # fresh: started by the parent
    (run / "specs" / "held.times.json").write_text(json.dumps(
        {"started": 0, "preloaded": 101, "asked": 100, "go": 101, "pytest": 101, "session_start": 102,
         "session_end": 108, "returned": 108.5}))
    (run / "specs" / "fresh.times.json").write_text(json.dumps(
        {"started": 50, "pytest": 51, "session_start": 52.5, "session_end": 53, "returned": 53.2}))
    (run / "specs" / "cut.times.json").write_text(json.dumps({"started": 0, "pytest": 1}))  # never ended
    assert timeline([run]) == {"ops": 2, "elapsed_s": 14.0, "before_session_s": 3.5, "session_s": 6.5,
                                      "after_session_s": 3.0, "import_wait_s": 1.0}
    # warmed: ready ("held") only after the profiler's warm-up, which the op also waited for
    (run / "specs" / "held.times.json").write_text(json.dumps(
        {"started": 0, "preloaded": 99, "warmed": 101, "held": 101, "asked": 100, "go": 101, "pytest": 101,
         "session_start": 102, "session_end": 108, "returned": 108.5}))
    assert timeline([run])["import_wait_s"] == 1.0


def test_parts_run_side_by_side_on_a_device_count_their_statuses_but_not_their_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import benchmarks.flaggems_corpus as corpus
    from harness.run.timeline import part_span, side_by_side, union_s
    from harness.suite.costing import sample_summary

    spans = [("a", 0.0, 10.0, frozenset({"0"})), ("b", 5.0, 20.0, frozenset({"0"})),
             ("c", 5.0, 20.0, frozenset({"1"})), ("d", 30.0, 40.0, frozenset({"0"}))]
    assert side_by_side(spans) == {"a", "b"}  # c overlaps both in time, on another device
    assert union_s(spans) == 30.0  # 0-20 and 30-40
    assert union_s([]) == 0.0

    suite = write_fake_suite(tmp_path / "tree")
    monkeypatch.setattr(corpus, "SUITE", suite.benchmark)
    inventory = read_inventory(locate_suite(suite.benchmark))
    ops = [o.id for o in all_ops(inventory)]

    def part(k: int, start: str, end: str, op: str, elapsed: int) -> Path:
        folder = tmp_path / "c" / f"sample-{k}"
        folder.mkdir(parents=True)
        (folder / "ops_status.csv").write_text(f"op,status,elapsed_s,compile_s\n{op},PASS,{elapsed},{elapsed - 20}\n")
        (folder / "run.json").write_text(json.dumps({"started_at": f"2026-12-02T10:{start}+00:00",
                                                     "finished_at": f"2026-12-02T10:{end}+00:00", "devices": ["0"]}))
        return folder

    parts = [part(1, "00:00", "01:00", ops[0], 50), part(2, "02:00", "04:00", ops[1], 70),
             part(3, "03:00", "05:00", ops[2], 90)]
    summary = sample_summary(parts, all_ops(inventory), inventory.base_classes)
    assert summary["ops_ended"] == 3 and summary["ops_costed"] == 1
    assert summary["side_by_side_runs"] == ["sample-2", "sample-3"]
    assert summary["wall_s"] == 60 + 180  # parts 2 and 3 together took 10:02-10:05
    assert summary["projection"]["mean_op_s"] == 50.0  # only the part that ran alone
    assert summary["projection_without_compile"]["mean_op_s"] == 20.0 and summary["compile_s"] == 30.0
    low, high = summary["projection_interval"]["hours"]["1"]  # one costed op: nothing to resample
    assert low == high == summary["projection"]["hours"]["1"]
    # the script's corpus.json: that summary, with the tree it projects
    written = corpus.summarize(parts, tmp_path / "out", {"steps": ["sample1"]})
    on_disk = json.loads((tmp_path / "out" / "corpus.json").read_text())
    assert on_disk == json.loads(json.dumps(written)) and on_disk["suite"] == str(suite.benchmark)
    assert on_disk["ref"] and on_disk["steps"] == ["sample1"] and on_disk["ops_costed"] == 1
    # a part cut before it wrote its end: it ends when it last wrote a file
    import os

    (parts[2] / "run.json").write_text(json.dumps({"started_at": "2026-12-02T10:03:00+00:00", "devices": ["0"]}))
    end = part_span(parts[1])[2] + 60  # type: ignore[index]
    for path in parts[2].iterdir():
        os.utime(path, (end, end))
    assert part_span(parts[2])[2] == end  # type: ignore[index]
    assert side_by_side([s for p in parts if (s := part_span(p))]) == {str(parts[1]), str(parts[2])}


def test_a_part_resumed_in_a_later_call_is_not_beside_a_run_made_between_its_calls(tmp_path: Path) -> None:
    import json

    from harness.run.timeline import run_spans, side_by_side, union_s

    def run(name: str, start: str, end: str, ops: dict[str, tuple[float, float, float]], attempts: int = 1) -> Path:
        folder = tmp_path / name
        (folder / "specs").mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"started_at": f"2026-12-04T10:{start}+00:00",
                                                     "finished_at": f"2026-12-04T10:{end}+00:00", "devices": ["0"]}))
        (folder / "ops_status.csv").write_text("op,status,attempts,elapsed_s\n" + "".join(
            f"{op},PASS,{attempts},{elapsed}\n" for op, (_, _, elapsed) in ops.items()))
        for op, (began, returned, _) in ops.items():
            (folder / "specs" / f"{op}.times.json").write_text(json.dumps(
                {"started": began, "session_start": began + 1, "session_end": returned - 1, "returned": returned}))
        return folder

    t0 = 1796378400.0  # 2026-12-04T10:00:00Z
    # part 5: two ops in the first call, one more (resumed) in the third; warm-5 ran in between
    part = run("sample-5", "00:00", "20:00", {"a": (t0, t0 + 60, 60), "b": (t0 + 50, t0 + 120, 70),
                                              "c": (t0 + 1000, t0 + 1100, 100)})
    between = run("warm-5", "03:00", "05:00", {"a": (t0 + 180, t0 + 240, 60), "b": (t0 + 240, t0 + 300, 60)})
    spans = run_spans(part)
    assert [(s[1] - t0, s[2] - t0) for s in spans] == [(0, 120), (1000, 1100)]  # the pre-started b joins a
    assert side_by_side([*spans, *run_spans(between)]) == set()
    assert union_s([*spans, *run_spans(between)]) == 120 + 100 + 120
    # run.json's whole span would have put them side by side
    from harness.run.timeline import part_span
    assert side_by_side([s for d in (part, between) if (s := part_span(d))]) == {str(part), str(between)}
    # an ended op without a timeline: the whole span again
    (part / "specs" / "c.times.json").unlink()
    assert len(run_spans(part)) == 1 and side_by_side([*run_spans(part), *run_spans(between)]) == {str(part),
                                                                                                str(between)}
    # a retried op's timeline is its last attempt's: its interval reaches back over its elapsed time
    retried = run("sample-6", "00:00", "20:00", {"x": (t0 + 200, t0 + 260, 100)}, attempts=2)
    assert [(s[1] - t0, s[2] - t0) for s in run_spans(retried)] == [(160, 260)]


def test_a_parts_lead_pays_the_imports_once_and_its_cost_is_its_time_less_them(tmp_path: Path) -> None:
    import json

    from harness.child.process import times_path
    from harness.contract import RunFiles
    from harness.run.timeline import cost_rows, part_leads

    def part(k: int, timelines: dict[str, dict[str, float]], attempts: dict[str, int] | None = None) -> Path:
        folder = tmp_path / "c" / f"sample-{k}"
        (folder / "specs").mkdir(parents=True)
        (folder / "ops_status.csv").write_text("op,device,status,attempts,elapsed_s,compile_s\n" + "".join(
            f"{op},0,PASS,{(attempts or {}).get(op, 1)},{t['returned'] - t['started']},\n" for op, t in timelines.items()))
        for op, t in timelines.items():
            times_path(RunFiles(folder).exit_file(op)).write_text(json.dumps(t))
        return folder

    lead = {"started": 0.0, "pytest": 0.1, "session_start": 9.0, "session_end": 20.0, "returned": 20.0}  # 20 s
    held = {"started": 0.0, "go": 20.0, "session_start": 20.5, "session_end": 25.0, "returned": 25.0}  # 5 s after go
    retried = {"started": 25.0, "pytest": 25.1, "session_start": 33.0, "session_end": 40.0, "returned": 40.0}
    one = part(1, {"lead": lead, "next": held, "again": retried}, {"again": 2})
    assert part_leads(one) == {"lead": 8.5}  # 9 s before its session, less a held op's 0.5 s
    no_prestart = part(2, {"lead": lead, "next": {**lead, "started": 20.0, "session_start": 29.0, "session_end": 40.0,
                                                  "returned": 40.0}})
    assert part_leads(no_prestart) == {}  # nothing held: every op paid its imports, none is a lead
    rows = [{"op": "lead", "status": "PASS", "elapsed_s": "20", "part": str(one)},
            {"op": "next", "status": "PASS", "elapsed_s": "25", "part": str(one)},
            {"op": "next", "status": "PASS", "elapsed_s": "99", "part": "side"}]
    costs = cost_rows(rows, {"side"}, {str(one): part_leads(one)})
    assert costs == {"lead": 11.5, "next": 25.0}  # next: the side-by-side run is no cost


def test_throughput_keeps_an_earlier_calls_files_and_takes_the_next_ones(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """THROUGHPUT_PREVIOUS: a file an earlier call compared is kept as measured, not run again;
    the next files in the same order are taken."""
    import csv

    import benchmarks.flaggems_corpus as corpus

    suite = write_fake_suite(tmp_path / "tree")
    inventory = read_inventory(locate_suite(suite.benchmark))
    bf16 = [op for op in all_ops(inventory) if "bfloat16" in op.functions[0].dtypes and "::" not in op.id]
    files = sorted({op.functions[0].file for op in bf16}, key=corpus.file_order)
    assert len(files) >= 2, files
    sample = tmp_path / "runs" / "sample-1"
    sample.mkdir(parents=True)
    (sample / "ops_status.csv").write_text("op,status,elapsed_s,rows\n" + "".join(f"{op.id},PASS,5,1\n" for op in bf16))
    previous = tmp_path / "throughput.csv"
    # an older file with fewer columns: its row is kept as it is, the new rows keep every column
    previous.write_text(f"file,benchmarks,flaggems_wall_s,harness_op_wall_s,harness_over_flaggems\n{files[0]},1,20,5,0.25\n")
    ran: list[list[str]] = []

    def own(nodes: list[str], work: Path, budget: float, options: list[str]) -> tuple[list[dict[str, object]], float]:
        ran.append(nodes)
        return [{"op_name": "x", "result": [{}]}], 10.0

    monkeypatch.setattr(corpus, "flaggems_own", own)
    monkeypatch.setattr(corpus, "SUITE", suite.benchmark)
    monkeypatch.setattr(corpus, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(corpus, "THROUGHPUT_PREVIOUS", str(previous))
    monkeypatch.setattr(corpus, "THROUGHPUT_FILES", 1)
    corpus.step_throughput(tmp_path / "out")
    measured = [n for nodes in ran if "--collect-only" not in nodes for n in nodes]
    assert measured and all(files[1] in n for n in measured) and not any(files[0] in n for n in measured)
    table = list(csv.DictReader((tmp_path / "out" / "throughput.csv").open()))
    assert [r["file"] for r in table] == [files[0], files[1]]
    assert table[0]["harness_over_flaggems"] == "0.25" and table[0]["flaggems_rows"] == ""
    new = table[1]
    assert new["flaggems_rows"] == "1" and new["flaggems_wall_s"] == "10.0"
    assert float(new["harness_over_flaggems"]) == round(float(new["harness_op_wall_s"]) / 10.0, 3) > 0
    assert list(table[1]) == list(corpus.THROUGHPUT_COLUMNS)


def test_throughput_can_time_the_harness_side_in_a_run_of_its_own_led_by_an_op_outside_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """THROUGHPUT_HARNESS=run: the table's files (an earlier call's too) are timed again by one
    harness run, whose first op is a sample op outside the table; an earlier file keeps FlagGems'
    numbers of then."""
    import csv

    import benchmarks.flaggems_corpus as corpus

    suite = write_fake_suite(tmp_path / "tree")
    inventory = read_inventory(locate_suite(suite.benchmark))
    bf16 = [op for op in all_ops(inventory) if "bfloat16" in op.functions[0].dtypes and "::" not in op.id]
    files = sorted({op.functions[0].file for op in bf16}, key=corpus.file_order)
    runs = tmp_path / "runs"
    (runs / "sample-1").mkdir(parents=True)
    (runs / "sample-1" / "ops_status.csv").write_text(
        "op,status,elapsed_s,rows\n" + "".join(f"{op.id},PASS,{50 + k},1\n" for k, op in enumerate(bf16))
        + "short,PASS,3,1\nlong,PASS,13,1\nlonger,PASS,14,1\n")
    previous = tmp_path / "throughput.csv"
    previous.write_text(f"file,benchmarks,flaggems_wall_s,harness_op_wall_s,harness_over_flaggems\n{files[0]},1,20,50,2.5\n")
    table_ops = [op.id for op in bf16 if op.functions[0].file in files[:2]]
    asked: list[list[str]] = []
    budgets: list[float] = []

    def harness_run(name: str, extra: list[str], budget: float) -> Path:
        ops = Path(extra[extra.index("--ops-file") + 1]).read_text().split()
        asked.append(ops)
        budgets.append(budget)
        (runs / name).mkdir(parents=True, exist_ok=True)
        (runs / name / "ops_status.csv").write_text("op,status,elapsed_s,rows\n" + "".join(f"{op},PASS,4,2\n" for op in ops))
        return runs / name

    monkeypatch.setattr(corpus, "flaggems_own", lambda nodes, work, budget, options: ([{"result": [{}]}], 10.0))
    monkeypatch.setattr(corpus, "harness_run", harness_run)
    monkeypatch.setattr(corpus, "SUITE", suite.benchmark)
    monkeypatch.setattr(corpus, "RUNS", runs)
    monkeypatch.setattr(corpus, "THROUGHPUT_PREVIOUS", str(previous))
    monkeypatch.setattr(corpus, "THROUGHPUT_FILES", 1)
    monkeypatch.setattr(corpus, "THROUGHPUT_HARNESS", "run")
    corpus.step_throughput(tmp_path / "out")
    (ops,) = asked
    assert ops[0] == "long" and sorted(ops[1:]) == sorted(table_ops)  # the lead (12 s or more, least), the table
    table = {r["file"]: r for r in csv.DictReader((tmp_path / "out" / "throughput.csv").open())}
    old = table[files[0]]
    per_file = {f: sum(1 for op in bf16 if op.functions[0].file == f) for f in files[:2]}
    assert old["flaggems_wall_s"] == "20" and float(old["harness_op_wall_s"]) == 4 * per_file[files[0]]
    assert float(old["harness_over_flaggems"]) == round(4 * per_file[files[0]] / 20, 3)
    assert "re-measured" in old["note"]
    assert float(table[files[1]]["harness_op_wall_s"]) == 4 * per_file[files[1]]
    # the run's budget: half the step's where FlagGems' runner has a new file to run after it, the
    # whole of it where it has none (the harness side alone, THROUGHPUT_FILES=0)
    monkeypatch.setattr(corpus, "THROUGHPUT_FILES", 0)
    corpus.step_throughput(tmp_path / "harness-only")
    assert budgets[0] <= corpus.BUDGETS["throughput"] / 2 < budgets[1] <= corpus.BUDGETS["throughput"]
    # from:RUN_DIR: the same table from that run, nothing run again
    monkeypatch.setattr(corpus, "THROUGHPUT_HARNESS", f"from:{runs / 'tp-harness'}")
    monkeypatch.setattr(corpus, "THROUGHPUT_FILES", 0)
    monkeypatch.setattr(corpus, "harness_run", None)  # called: a TypeError
    corpus.step_throughput(tmp_path / "again")
    again = {r["file"]: r for r in csv.DictReader((tmp_path / "again" / "throughput.csv").open())}
    assert again[files[0]]["harness_op_wall_s"] == old["harness_op_wall_s"] and files[1] not in again
    # an op that did not pass there (a cut run): the earlier call's harness numbers stay
    (runs / "tp-harness" / "ops_status.csv").write_text("op,status,elapsed_s,rows\n")
    corpus.step_throughput(tmp_path / "cut")
    (cut,) = csv.DictReader((tmp_path / "cut" / "throughput.csv").open())
    assert cut["harness_op_wall_s"] == "50" and cut["harness_over_flaggems"] == "2.5" and "not re-measured" in cut["note"]
    # a file with no op to time counts as nothing measured, never as 0 s
    assert corpus.harness_side([], {}, 20.0) == {"harness_rows": None, "harness_op_wall_s": None,
                                                  "harness_over_flaggems": None}
    for bad in ("runs", "from", f"from:{tmp_path / 'nowhere'}"):
        monkeypatch.setattr(corpus, "THROUGHPUT_HARNESS", bad)
        with pytest.raises(SystemExit, match="expected sample, run, or from:RUN_DIR"):
            corpus.step_throughput(tmp_path / "bad")


def test_a_bounded_run_refreshes_the_archive_while_it_goes_and_stops_at_its_budget(tmp_path: Path) -> None:
    """bounded(): the tick runs every ``every_s`` while the command runs; past the budget the
    command is ended (SIGTERM) and its exit code returned."""
    import sys
    import time

    from benchmarks.flaggems_corpus import bounded

    ticks: list[float] = []
    code, wall = bounded([sys.executable, "-c", "import time; time.sleep(2.5)"], 30.0,
                         env={"PATH": "/usr/bin:/bin"}, tick=lambda: ticks.append(time.monotonic()), every_s=1.0)
    assert code == 0 and 1 <= len(ticks) <= 3 and wall < 20  # about 2 ticks; a loaded machine may see fewer
    code, wall = bounded([sys.executable, "-c", "import time; time.sleep(60)"], 2.0, env={"PATH": "/usr/bin:/bin"})
    assert code != 0 and wall < 30


def test_a_bounded_run_whose_tick_fails_is_ended_not_left_running(tmp_path: Path) -> None:
    import os
    import sys

    from benchmarks.flaggems_corpus import bounded

    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"

    def tick() -> None:
        raise RuntimeError("tick failed")

    with pytest.raises(RuntimeError, match="tick failed"):
        bounded([sys.executable, "-c", script], 30.0, env={"PATH": "/usr/bin:/bin"}, tick=tick, every_s=1.0)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (reaped by bounded), not left sleeping


def test_the_archive_holds_a_run_still_going_and_replaces_the_last_one_whole(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import tarfile

    import benchmarks.flaggems_corpus as corpus

    runs = tmp_path / "runs"
    run = runs / "sample-1"
    (run / "specs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"status": "running"}))
    (run / "records.jsonl").write_text("{}\n")
    (run / "specs" / "add.json").write_text("{}")  # a spec: left out
    (run / "specs" / "add.times.json").write_text("{}")  # a timeline: kept
    (run / "autotune").mkdir()
    (run / "autotune" / "add.json").write_text("{}")  # recorded configs, for --replay-from: kept
    (runs / "autotune-caches" / "x" / "autotune").mkdir(parents=True)  # a cache folder of the autotune step: not a run
    monkeypatch.setattr(corpus, "RUNS", runs)
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.tgz").write_bytes(b"an earlier archive")
    corpus.archive(out)
    with tarfile.open(out / "runs.tgz") as tar:
        names = set(tar.getnames())
    assert {"sample-1/run.json", "sample-1/records.jsonl", "sample-1/specs/add.times.json",
            "sample-1/autotune/add.json"} <= names
    assert not any(name.startswith("autotune-caches") for name in names)
    assert "sample-1/specs/add.json" not in names and not (out / "runs.tgz.partial").exists()
    # the periodic archive: a failure to write (here: its folder is a file) skips the turn, says so
    before = (out / "runs.tgz").read_bytes()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setattr(corpus, "ARCHIVE_TO", blocked)
    corpus.archive_now()
    assert any("not refreshed" in line for line in corpus.LOG) and (out / "runs.tgz").read_bytes() == before


def test_what_the_script_starts_does_not_see_its_harness_args(monkeypatch: pytest.MonkeyPatch) -> None:
    """HARNESS_ARGS is the script's variable; the harness would warn that it does not know it."""
    import benchmarks.flaggems_corpus as corpus

    monkeypatch.setenv("HARNESS_ARGS", "--ir off")
    monkeypatch.setenv("HARNESS_CAP_MS", "250")
    env = corpus.child_env()
    assert "HARNESS_ARGS" not in env and env["HARNESS_CAP_MS"] == "250"


def test_a_summary_where_scipy_is_missing_says_why_it_has_no_interval(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU machine's Python may lack scipy: the call's corpus.json still holds the rest."""
    from harness.suite import costing

    def no_scipy(*args: object, **kwargs: object) -> dict[str, object]:
        raise ImportError("No module named 'scipy'")

    monkeypatch.setattr(costing, "project_interval", no_scipy)
    inventory = read_inventory(locate_suite(write_fake_suite(tmp_path / "tree").benchmark))
    run = tmp_path / "sample-1"
    run.mkdir()
    (run / "ops_status.csv").write_text("op,status,elapsed_s,compile_s\nadd,PASS,5,\nsoftmax,PENDING,0,\n")
    summary = costing.sample_summary([run], all_ops(inventory), inventory.base_classes)
    assert "scipy" in summary["projection_interval"]["skipped"]
    assert summary["ops_planned"] == 2 and summary["ops_ended"] == 1 and summary["unspanned"] == []
    assert summary["projection"]["measured_ops"] == 1


def test_flaggems_own_runner_compiles_into_empty_caches_of_its_own(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides of the throughput table cold: FlagGems' runner gets a Triton and FlagGems cache
    under its work folder, emptied before each call (a kernel of the file before is not reused)."""
    import benchmarks.flaggems_corpus as corpus

    work = tmp_path / "tp-own"
    (work / "cache" / "triton").mkdir(parents=True)
    (work / "cache" / "triton" / "kernel.cubin").write_text("left by the file before")
    seen: dict[str, str] = {}

    def bounded(cmd: list[str], budget_s: float, cwd: Path | None = None, log: Path | None = None,
                env: dict[str, str] | None = None, **_: object) -> tuple[int, float]:
        seen.update(env or {})
        assert not (work / "cache").exists()  # emptied before the runner starts
        return 0, 1.0

    monkeypatch.setattr(corpus, "bounded", bounded)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/warm")
    assert corpus.flaggems_own(["benchmark/test_x.py::test_x"], work, 10.0, []) == ([], 1.0)
    assert seen["TRITON_CACHE_DIR"] == str(work / "cache" / "triton")
    assert seen["FLAGGEMS_CACHE_DIR"] == str(work / "cache" / "flaggems")


def test_another_sample_seed_draws_the_throughput_files_in_another_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.flaggems_corpus as corpus

    files = [f"test_op{i}.py" for i in range(40)]
    monkeypatch.setattr(corpus, "SAMPLE_SEED", "")
    plain = sorted(files, key=corpus.file_order)
    monkeypatch.setattr(corpus, "SAMPLE_SEED", "nightly-b")
    seeded = sorted(files, key=corpus.file_order)
    assert sorted(seeded) == sorted(plain) and seeded[:12] != plain[:12]
    assert seeded == sorted(files, key=corpus.file_order)  # the same seed, the same draw
