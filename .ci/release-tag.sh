#!/usr/bin/env bash
# Make sure the release the book's set-up cells install exists: tag the commit being published
# v<version> (pyproject.toml's version, the tag every chapter's Colab copy and every exercise
# installs: qkv_course.config.release_tag) and push the tag, when the remote has no such tag.
# An existing tag is left as it is: a release, once published, does not move. Run by
# .github/workflows/book.yml before it publishes; it needs push rights to the remote.
#
#   bash .ci/release-tag.sh [REMOTE]      (default: origin)
set -euo pipefail
cd "$(dirname "$0")/.."
REMOTE="${1:-origin}"
version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
tag="v$version"
if git ls-remote --exit-code --tags "$REMOTE" "refs/tags/$tag" >/dev/null; then
    echo "$tag exists on $REMOTE: the set-up cells install it"
    exit 0
fi
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    echo "$tag exists here but not on $REMOTE: pushing it"
else
    git -c user.name="qkv release" -c user.email="qkv-release@users.noreply.github.com" \
        tag -a "$tag" -m "qkv $version: the release the book's set-up cells install"
    echo "tagged $(git rev-parse --short HEAD) $tag"
fi
git push "$REMOTE" "refs/tags/$tag"
