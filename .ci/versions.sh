#!/usr/bin/env bash
# The reference's and the checks' tests with one (Python, torch) pair, in a fresh virtual
# environment: the lowest pair pyproject.toml states, and Colab's. Nothing but qkv's declared
# dependencies and the test runner is installed. Not part of `make test`
# (.ci/run): it downloads torch. tests.yml's "versions" job runs it for both pairs.
#
#   bash .ci/versions.sh PYTHON TORCH [ENV_DIR]
#       PYTHON: the interpreter to test with (python3.11, /usr/bin/python3 ...)
#       TORCH:  the torch release to install (2.5.0 ...)
#       ENV_DIR: where the environment is made or reused (default /tmp/qkv-versions/<py>-torch<TORCH>)
#   bash .ci/versions.sh --debian-chroot DIR [TORCH]
#       as root: make a Debian 13 (trixie) root in DIR with debootstrap when missing (its
#       python3 is 3.13, Colab's), copy this checkout's HEAD into it and run the first form
#       there with its python3 and TORCH (default 2.11.0, Colab's).
#
# The tests are those of .ci/torch-only-tests.txt (a file that cannot be imported with this
# pair is reported, and the others still run), on a copy of HEAD (git archive) with
# the package from its src/ (no install: the copy is what is tested). torch comes from the
# index pip is given: on Linux PyPI's default torch wheel is a CUDA build (it runs on the CPU
# but pulls several GB of CUDA libraries); set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# for the CPU build where that index can be reached (tests.yml does).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

if [[ "${1:-}" == "--debian-chroot" ]]; then
    DIR="${2:?usage: $0 --debian-chroot DIR [TORCH]}"
    TORCH="${3:-2.11.0}"
    if [[ ! -x "$DIR/usr/bin/python3" ]]; then
        command -v debootstrap >/dev/null || apt-get install -y debootstrap
        debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            trixie "$DIR" http://deb.debian.org/debian
    fi
    cp /etc/resolv.conf "$DIR/etc/resolv.conf"
    for fs in proc sys dev; do
        mountpoint -q "$DIR/$fs" || mount --rbind "/$fs" "$DIR/$fs"
    done
    rm -rf "$DIR/work/qkv" && mkdir -p "$DIR/work/qkv"
    git -C "$ROOT" archive HEAD | tar -x -C "$DIR/work/qkv"
    # Only the index and the certificates pip needs cross into the root (the host's pip
    # configuration does not): a host behind a proxy with its own CA names it in PIP_CERT.
    cert=""
    if [[ -n "${PIP_CERT:-}" ]]; then
        cp "$PIP_CERT" "$DIR/etc/ssl/certs/qkv-host-ca.crt"
        cert=/etc/ssl/certs/qkv-host-ca.crt
    fi
    status=0
    chroot "$DIR" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
        ${PIP_EXTRA_INDEX_URL:+PIP_EXTRA_INDEX_URL="$PIP_EXTRA_INDEX_URL"} ${cert:+PIP_CERT="$cert"} \
        bash /work/qkv/.ci/versions.sh /usr/bin/python3 "$TORCH" "/opt/qkv-py3-torch$TORCH" || status=$?
    for fs in dev sys proc; do
        umount -R "$DIR/$fs"
    done
    exit "$status"
fi

PYTHON="${1:?usage: $0 PYTHON TORCH [ENV_DIR]}"
TORCH="${2:?usage: $0 PYTHON TORCH [ENV_DIR]}"
PYV="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ENV="${3:-/tmp/qkv-versions/py$PYV-torch$TORCH}"

# The copy under test: HEAD of this checkout, or this directory where it is not a git checkout
# (the --debian-chroot form runs on such a copy).
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    git -C "$ROOT" archive HEAD | tar -x -C "$WORK"
else
    WORK="$ROOT"
fi

if [[ ! -x "$ENV/bin/python" ]]; then
    "$PYTHON" -m venv "$ENV"
fi
# torch at the release asked, the package's other dependencies as pyproject.toml declares them
# (what a pip install of qkv would bring: one missing there fails here), and numpy, pytest and
# hypothesis at the versions requirements.txt pins.
mapfile -t deps < <("$ENV/bin/python" -c 'import sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if not d.startswith("torch")))' "$WORK/pyproject.toml")
mapfile -t pins < <(grep -E '^(numpy|pytest|hypothesis)==' "$WORK/requirements.txt")
"$ENV/bin/python" -m pip install --quiet "torch==$TORCH" "${deps[@]}" "${pins[@]}"

cd "$WORK"
mapfile -t TESTS < <(grep -v -E '^\s*(#|$)' .ci/torch-only-tests.txt)
"$ENV/bin/python" -c 'import sys, torch, numpy; print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, numpy {numpy.__version__}")'
# One thread per process: the tensors are small, and on a shared machine torch's threads wait
# on each other (a training test that takes seconds took over half an hour with two).
PYTHONPATH="$WORK/src:$WORK/tests/checks" MPLBACKEND=Agg OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    nice "$ENV/bin/python" -m pytest -q -p no:cacheprovider -o addopts= \
    --continue-on-collection-errors "${TESTS[@]}"
