#!/usr/bin/env bash
# Bring up a local docker engine and the local base image the container tests build on.
#
# No registry is reachable on the CI machine, so `FROM python:...` cannot be pulled:
# the cpu image is built FROM a Debian+Python image made here with mmdebstrap and
# `docker import`. Idempotent: each step is skipped when its result already exists,
# so a second call returns in well under a second.
#
# Run as root. `.ci/docker-up.sh --prune` instead frees disk after the tests: dangling
# images and build cache, and all but the newest image of each harness backend (every
# change to containers/<backend>/ makes a new content-tagged image of about 2 GB).
#
# Environment (optional):
#   HARNESS_LOCAL_BASE   name of the base image to create (default below)
#   DOCKERD_LOG          where dockerd writes its log (default /var/log/dockerd.log)
set -euo pipefail

BASE_IMAGE="${HARNESS_LOCAL_BASE:-harness-base/debian:bookworm-py}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
SUITE=bookworm
# Debian's client matches Debian's engine; another client earlier on PATH may be newer
# than the engine's API, so prefer /usr/bin/docker when it is there.
DOCKER=/usr/bin/docker

say() { printf 'docker-up: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    say "must run as root (installs packages, starts dockerd)"; exit 2
fi

apt_install() {
    say "installing $* from Debian"
    # Update the index at most once per call of this script.
    if [ -z "${_APT_UPDATED:-}" ]; then apt-get update -qq; _APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v dockerd >/dev/null 2>&1; then
    apt_install docker.io
fi
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"

engine_up() { "$DOCKER" info >/dev/null 2>&1; }

if [ "${1:-}" = "--prune" ]; then
    engine_up || { say "no engine running; nothing to prune"; exit 0; }
    for repo in $("$DOCKER" image ls --format '{{.Repository}}' 'triton-op-harness-*' | sort -u); do
        # `image ls` lists newest first; keep the first of each repository.
        "$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}' "$repo" | tail -n +2 \
            | xargs -r "$DOCKER" image rm >/dev/null
    done
    "$DOCKER" image prune -f >/dev/null
    "$DOCKER" builder prune -f >/dev/null 2>&1 || true
    say "pruned; $("$DOCKER" system df --format '{{.Type}} {{.Size}}' | tr '\n' ' ')"
    exit 0
fi

if ! engine_up; then
    say "starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
    for _ in $(seq 1 120); do
        engine_up && break
        sleep 0.5
    done
    if ! engine_up; then
        say "dockerd did not answer within 60 s; last lines of $DOCKERD_LOG:"
        tail -n 20 "$DOCKERD_LOG" >&2 || true
        exit 3
    fi
fi
say "engine up: $("$DOCKER" version --format '{{.Server.Version}}')"

if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base image $BASE_IMAGE present"
    exit 0
fi

command -v mmdebstrap >/dev/null 2>&1 || apt_install mmdebstrap
HOOKS=/usr/share/mmdebstrap/hooks
# The eatmydata hook skips fsync while unpacking; it needs eatmydata on the host.
command -v eatmydata >/dev/null 2>&1 || apt_install eatmydata

# The machine trusts extra CA certificates (a proxy in front of PyPI); without them
# pip inside the image finds "no matching distribution".
ca_hooks=()
shopt -s nullglob
extra_certs=(/usr/local/share/ca-certificates/*.crt)
shopt -u nullglob
if [ "${#extra_certs[@]}" -gt 0 ]; then
    ca_hooks+=(--customize-hook="copy-in ${extra_certs[*]} /usr/local/share/ca-certificates/")
    # shellcheck disable=SC2016  # mmdebstrap expands $1 (the chroot) itself
    ca_hooks+=(--customize-hook='chroot "$1" update-ca-certificates >/dev/null')
fi

say "building $BASE_IMAGE with mmdebstrap ($SUITE, python3)"
started=$(date +%s)
# The tarball goes through a file, not a pipe, so a failed mmdebstrap never
# leaves a half-imported image behind.
work_dir="$(mktemp -d "${TMPDIR_BASE:-/dev/shm}/harness-base.XXXXXX" 2>/dev/null || mktemp -d)"
trap 'rm -rf "$work_dir"' EXIT
# git: the harness records the commit of the mounted checkout in run.json.
# shellcheck disable=SC2016  # mmdebstrap expands $1 (the chroot) itself
if ! TMPDIR="$work_dir" mmdebstrap --variant=essential \
    --include=python3,python3-pip,ca-certificates,libstdc++6,git \
    --hook-dir="$HOOKS/merged-usr" --hook-dir="$HOOKS/eatmydata" \
    "${ca_hooks[@]}" \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
    "$SUITE" "$work_dir/rootfs.tar" >"$work_dir/mmdebstrap.log" 2>&1; then
    say "mmdebstrap failed; its log:"
    tail -n 40 "$work_dir/mmdebstrap.log" >&2
    exit 3
fi
"$DOCKER" import \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$work_dir/rootfs.tar" "$BASE_IMAGE" >/dev/null
say "made $BASE_IMAGE in $(( $(date +%s) - started )) s"
