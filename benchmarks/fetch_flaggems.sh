#!/usr/bin/env bash
# FlagGems for `harness run --suite`, from a FlagGems git directory (a clone's .git or a bare
# mirror; this script does not fetch), for one tag:
#
#   benchmarks/fetch_flaggems.sh GIT_DIR TAG [--no-wheel]
#
# 1. Exports the tag's benchmark/ tree into .flaggems/TAG/benchmark (git-ignored) with a
#    FLAGGEMS_REF file next to it ("TAG (git describe, commit)"), which the harness reads as the
#    tree's ref (run.json, the version check against the installed flag_gems).
# 2. Builds a flag_gems wheel of the same tag into .whl/flaggems-TAG/ (git-ignored), for machines
#    without network (carry .whl/, .flaggems/TAG/benchmark and .flaggems/TAG/FLAGGEMS_REF there;
#    benchmarks/flaggems_corpus.py installs the wheel):
#    - the whole source of the tag is exported to a temporary directory: src/ and the packaging
#      files, and also tests/ and benchmark/, since v5.3's setup.py maps the packages
#      flaggems_tests -> tests/ and flaggems_benchmark -> benchmark/ and fails without them;
#    - the version comes from the tag (SETUPTOOLS_SCM_PRETEND_VERSION: the export has no .git);
#    - setuptools packs only folders with an __init__.py, so the wheel misses files such as
#      flag_gems/fused/DSA/*.py and utils/configs/*.yaml, and `import flag_gems` fails. They are
#      overlaid INTO the wheel (added to it with their RECORD lines), so the overlay travels with
#      the wheel and `pip install --no-deps` of that one file is the whole installation.
#    Building needs pip to reach PyPI for FlagGems' build requirements (setuptools, setuptools-scm,
#    wheel; pip's isolated build environment). Installing needs packaging>=26, sqlalchemy and
#    greenlet next to torch: benchmarks/fetch_device_wheels.sh downloads them.
set -euo pipefail

usage() { sed -n '2,24p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
git_dir=$1; tag=$2; shift 2
wheel=1
for arg in "$@"; do
  case $arg in
    --no-wheel) wheel=0 ;;
    *) usage ;;
  esac
done
cd "$(dirname "$0")/.."
g() { git --git-dir="$git_dir" "$@"; }
commit=$(g rev-parse --verify --quiet "${tag}^{commit}") || { echo "unknown tag or ref: $tag" >&2; exit 2; }
name=${tag//\//_}
dest=.flaggems/$name
rm -rf "$dest/benchmark"  # only what this script writes: a fuller export kept next to it stays
mkdir -p "$dest"
g archive "$commit" benchmark | tar -x -C "$dest"
described=$(g describe --tags --always "$commit" 2>/dev/null || echo "$commit")
printf '%s\n' "$tag ($described, $commit)" > "$dest/FLAGGEMS_REF"
echo "$dest/benchmark: $(find "$dest/benchmark" -name 'test_*.py' | wc -l) test files at $tag ($commit)"

(( wheel )) || exit 0
version=${tag#v}
if ! [[ $version =~ ^[0-9]+\.[0-9]+ ]]; then  # a branch (master): the version git describe gives
  version=$(echo "$described" | sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)$/.dev\1+g\2/')
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
paths=()
for p in src tests benchmark pyproject.toml setup.py setup.cfg MANIFEST.in CMakeLists.txt cmake requirements \
         include lib cpp triton_src README.md LICENSE; do
  if g cat-file -e "$commit:$p" 2>/dev/null; then paths+=("$p"); fi
done
g archive "$commit" "${paths[@]}" | tar -x -C "$work"
out=.whl/flaggems-$name
rm -rf "$out"
mkdir -p "$out"
SETUPTOOLS_SCM_PRETEND_VERSION=$version python3 -m pip wheel -q --no-deps -w "$out" "$work"
python3 - "$out" "$work/src" <<'PY'
"""Add to the wheel every file of src/<package>/ it lacks (folders without __init__.py), with
RECORD lines (sha256, size) as the wheel format wants them."""
import base64, csv, hashlib, io, pathlib, sys, zipfile

out, src = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(wheel,) = out.glob("*.whl")
with zipfile.ZipFile(wheel) as zf:
    names = set(zf.namelist())
    record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
    record = zf.read(record_name).decode()
missing = []
for package in (p for p in src.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and "__pycache__" not in rel and rel not in names:
            missing.append((rel, path.read_bytes()))
rows = list(csv.reader(io.StringIO(record)))
for rel, data in missing:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rows.insert(len(rows) - 1, [rel, f"sha256={digest}", str(len(data))])
text = io.StringIO()
csv.writer(text, lineterminator="\n").writerows(rows)
rebuilt = wheel.with_suffix(".tmp")
with zipfile.ZipFile(wheel) as old, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as new:
    for item in old.infolist():
        if item.filename != record_name:
            new.writestr(item, old.read(item.filename))
    for rel, data in missing:
        new.writestr(rel, data)
    new.writestr(record_name, text.getvalue())
rebuilt.replace(wheel)
print(f"{wheel}: {len(missing)} file(s) of folders without __init__.py overlaid into the wheel")
PY
ls -l "$out"
