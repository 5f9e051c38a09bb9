"""The workflow policy (docs/ci-security.md): no self-hosted runner is reachable from a pull request
without the approval gate, and every workflow keeps the baseline rules.

Parses every file of .github/workflows and fails, naming the job and the rule, when:

Rules for a job whose runs-on names `self-hosted` (or a runner group, or is decided at run time):
  1. its workflow is triggered only by schedule, workflow_dispatch, push to main or
     pull_request_target: pull_request, pull_request_review(_comment), issue_comment, workflow_run,
     merge_group and the rest are refused, since their runs are not approved commit by commit;
  2. under pull_request_target the job names an approval environment, holds no write permission,
     uses no secret, and compares the checked-out HEAD with the SHA of the event.
Rules for every workflow:
  3. top-level permissions are set and grant no write; no job asks for write-all;
  4. every `uses:` is pinned to a full commit SHA (or is a local ./ action);
  5. every actions/checkout has persist-credentials: false;
  6. a job that checks out pull-request code (head.sha, refs/pull/, head_sha...) puts it in a
     sub-directory, holds no write permission, and is an approved pull_request_target job;
  7. a pull_request_target workflow references no secret; reusable workflow calls are refused
     (not analysable here).

zizmor (`nox -s lint`) is necessary but not sufficient: its dangerous-triggers audit does not see a
`pull_request` workflow on a self-hosted runner, which is exactly the hole this test closes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
APPROVAL_ENVIRONMENTS = {"perf-gate"}
SELF_HOSTED_TRIGGERS = {"schedule", "workflow_dispatch", "push", "pull_request_target"}
PINNED = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
PR_CODE = re.compile(r"pull_request\.head\.(sha|ref)|refs/pull/|head_sha|head_branch")


def load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text) or {}
    if True in doc and "on" not in doc:  # YAML 1.1 reads the key `on` as True
        doc["on"] = doc.pop(True)
    return doc


def triggers(doc: dict[str, Any]) -> dict[str, Any]:
    on = doc.get("on")
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on or {})


def is_self_hosted(job: dict[str, Any]) -> bool:
    runs_on = job.get("runs-on", "")
    if isinstance(runs_on, dict):  # {group: ..., labels: ...}: a runner group
        return True
    if isinstance(runs_on, str) and runs_on.strip().startswith("${{"):
        return True  # decided at run time: counted as self-hosted
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return any("self-hosted" in str(label) for label in labels)


def writes(perms: Any) -> list[str]:
    if perms == "write-all":
        return ["write-all"]
    if isinstance(perms, dict):
        return [k for k, v in perms.items() if v == "write"]
    return []


def check_workflow(name: str, text: str) -> list[str]:
    doc = load(text)
    errors: list[str] = []
    trig = triggers(doc)
    top = doc.get("permissions")
    if top is None:
        errors.append(f"{name}: no top-level permissions (set {{}} and grant per job)")
    elif writes(top):
        errors.append(f"{name}: top-level permissions grant {writes(top)}")
    for job_id, job in (doc.get("jobs") or {}).items():
        where = f"{name}:{job_id}"
        if "uses" in job:
            errors.append(f"{where}: reusable workflow calls are not analysable; inline the job")
            continue
        perms = job.get("permissions", top)
        job_text = yaml.safe_dump(job)
        env = job.get("environment")
        env = env.get("name") if isinstance(env, dict) else env
        checks_out_pr = False
        for i, step in enumerate(job.get("steps") or []):
            uses = step.get("uses")
            if uses and not uses.startswith("./") and not PINNED.match(uses):
                errors.append(f"{where} step {i}: `{uses}` is not pinned to a commit SHA")
            if uses and uses.split("@")[0] == "actions/checkout":
                with_ = step.get("with") or {}
                if with_.get("persist-credentials") is not False:
                    errors.append(f"{where} step {i}: actions/checkout without persist-credentials: false")
                ref = str(with_.get("ref", "")) + str(with_.get("repository", ""))
                if PR_CODE.search(ref) or with_.get("allow-unsafe-pr-checkout"):
                    checks_out_pr = True
                    if not with_.get("path"):
                        errors.append(f"{where} step {i}: PR code checked out into the workspace root")
        if checks_out_pr and writes(perms):
            errors.append(f"{where}: checks out PR code and holds {writes(perms)}")
        if checks_out_pr and not ("pull_request_target" in trig and env in APPROVAL_ENVIRONMENTS):
            errors.append(f"{where}: checks out PR code outside an approved pull_request_target job")
        if not is_self_hosted(job):
            continue
        bad = sorted(set(trig) - SELF_HOSTED_TRIGGERS)
        if bad:
            errors.append(f"{where}: self-hosted job reachable from {bad}")
        push = trig.get("push")
        if "push" in trig and (not isinstance(push, dict) or push.get("branches") != ["main"]):
            errors.append(f"{where}: self-hosted job on push to branches other than main")
        if "pull_request_target" in trig:
            if env not in APPROVAL_ENVIRONMENTS:
                errors.append(f"{where}: self-hosted pull_request_target job without an approval environment")
            if writes(perms):
                errors.append(f"{where}: self-hosted PR job holds {writes(perms)}")
            if "secrets." in job_text:
                errors.append(f"{where}: self-hosted PR job uses secrets")
            if not ("rev-parse HEAD" in job_text and "HEAD_SHA" in job_text):
                errors.append(f"{where}: self-hosted PR job does not verify the checked-out SHA")
    if "secrets." in text and "pull_request_target" in trig:
        errors.append(f"{name}: pull_request_target workflow references secrets")
    return errors


def all_errors(directory: Path) -> list[str]:
    errors: list[str] = []
    for path in sorted(directory.glob("*.y*ml")):
        text = path.read_text(encoding="utf-8")
        if "jobs" in load(text):
            errors += check_workflow(path.name, text)
    return errors


def test_every_workflow_keeps_the_policy() -> None:
    files = sorted(p.name for p in WORKFLOWS.glob("*.y*ml"))
    assert {"ci.yml", "nightly.yml", "perf-gate.yml", "pr-comment.yml"} <= set(files)
    errors = all_errors(WORKFLOWS)
    assert not errors, "\n".join(errors)


def test_the_self_hosted_jobs_are_the_gate_the_nightly_benches_and_the_corpus_bisect_only() -> None:
    found = {(path.name, job_id)
             for path in WORKFLOWS.glob("*.y*ml")
             for job_id, job in (load(path.read_text()).get("jobs") or {}).items() if is_self_hosted(job)}
    assert found == {("perf-gate.yml", "gate"), ("nightly.yml", "bench"), ("corpus-nightly.yml", "bench"),
                     ("corpus-nightly.yml", "bisect")}


# -- the test can fail: each hole, made on purpose, is named ---------------------------------------

GATE = (WORKFLOWS / "perf-gate.yml").read_text()

# The gate as it was before docs/ci-security.md (commit 4462473): `pull_request` on a self-hosted
# runner, guarded only by an `if:` that the pull request itself controls.
OLD_GATE = """
name: perf-gate
on:
  pull_request:
    types: [opened, synchronize, reopened, labeled]
permissions:
  contents: read
jobs:
  gate:
    if: github.event.action == 'labeled' && github.event.label.name == 'perf-gate'
    runs-on: [self-hosted, linux, cuda]
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
        with:
          persist-credentials: false
      - run: nox -s gate
"""


def _errors(text: str) -> list[str]:
    return check_workflow("perf-gate.yml", text)


def test_the_gate_as_it_was_fails() -> None:
    assert "perf-gate.yml:gate: self-hosted job reachable from ['pull_request']" in _errors(OLD_GATE)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: t.replace("    environment: perf-gate\n", ""),
     "self-hosted pull_request_target job without an approval environment"),
    (lambda t: t.replace("    environment: perf-gate\n", "    environment: staging\n"),
     "self-hosted pull_request_target job without an approval environment"),
    (lambda t: t.replace("  pull_request_target:\n", "  pull_request:\n  pull_request_target:\n"),
     "self-hosted job reachable from ['pull_request']"),
    (lambda t: t.replace("on:  # zizmor", "on:\n  workflow_run:\n    workflows: [ci]\n  # zizmor"),
     "self-hosted job reachable from ['workflow_run']"),
    (lambda t: t.replace("      pull-requests: read # re-read", "      pull-requests: write # re-read"),
     "self-hosted PR job holds ['pull-requests']"),
    (lambda t: t.replace("          path: pr\n", ""), "PR code checked out into the workspace root"),
    (lambda t: t.replace('test "$(git -C pr rev-parse HEAD)" = "$HEAD_SHA"', "true").replace(
        'test "$(git -C trusted rev-parse HEAD)" = "$BASE_SHA"', "true").replace(
        'rev-parse HEAD^1', 'rev-parse X').replace('rev-parse HEAD^2', 'rev-parse Y'),
     "does not verify the checked-out SHA"),
    (lambda t: t.replace("GH_TOKEN: ${{ github.token }}", "GH_TOKEN: ${{ secrets.PAT }}"), "uses secrets"),
    (lambda t: t.replace("          persist-credentials: false\n          # checkout v7", "          # checkout v7"),
     "actions/checkout without persist-credentials: false"),
    (lambda t: t.replace("actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1", "actions/checkout@v7"),
     "is not pinned to a commit SHA"),
    (lambda t: t.replace("permissions: {}\n\nconcurrency", "permissions: write-all\n\nconcurrency"),
     "top-level permissions grant ['write-all']"),
])
def test_each_hole_made_on_purpose_is_named(change: Any, expected: str) -> None:
    changed = change(GATE)
    assert changed != GATE, "the mutation did not apply: update it to the workflow"
    assert any(expected in e for e in _errors(changed)), _errors(changed)


def test_a_pull_request_workflow_added_on_a_self_hosted_runner_fails() -> None:
    added = OLD_GATE.replace("runs-on: [self-hosted, linux, cuda]", "runs-on: ${{ matrix.runner }}")
    assert any("reachable from ['pull_request']" in e for e in _errors(added))
    grouped = OLD_GATE.replace("runs-on: [self-hosted, linux, cuda]", "runs-on:\n      group: gpus")
    assert any("reachable from ['pull_request']" in e for e in _errors(grouped))


# -- .ci/zizmor_explained.py --------------------------------------------------------------------------


def _finding(ident: str, comments: list[str], ignored: bool = True) -> dict[str, Any]:
    return {"ident": ident, "desc": "d", "ignored": ignored, "locations": [{
        "symbolic": {"key": {"Local": {"verbatim_path": ".github/workflows/x.yml"}}},
        "concrete": {"location": {"start_point": {"row": 3}}, "comments": comments}}]}


@pytest.mark.parametrize(("finding", "ok"), [
    (_finding("dangerous-triggers", ["# zizmor: ignore[dangerous-triggers] -- approved SHA only, see docs/ci-security.md"]), True),
    (_finding("dangerous-triggers", ["# zizmor: ignore[dangerous-triggers]"]), False),  # no reason
    (_finding("dangerous-triggers", ["# zizmor: ignore[dangerous-triggers] -- trust me, it is fine really"]), False),
    (_finding("self-hosted-runner", ["# zizmor: ignore[dangerous-triggers] -- long reason (docs/ci-security.md)"]), False),
    (_finding("artipacked", [], ignored=False), False),
])
def test_zizmor_findings_pass_only_with_an_explained_ignore(tmp_path: Path, finding: dict[str, Any], ok: bool) -> None:
    report = tmp_path / "auditor.json"
    report.write_text(json.dumps([finding]))
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "zizmor_explained.py"), str(report)],
                          capture_output=True, text=True)
    assert (done.returncode == 0) == ok, done.stdout
    assert ("0 unexplained" in done.stdout) == ok
