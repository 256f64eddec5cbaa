#!/usr/bin/env bash
# Make sure the release the book's set-up cells install exists: tag the commit being published
# v<version> (pyproject.toml's version, the tag every chapter's Colab copy and every exercise
# installs: qkv_course.config.release_tag) and push the tag, when the remote has no such tag.
# An existing tag is left as it is: a release, once published, does not move. So when the package
# (src/, pyproject.toml) has changed since the tag, the script fails and asks for a new version,
# rather than publish notebooks that need a package their set-up cells do not install. Run by
# .github/workflows/book.yml before it publishes; it needs push rights to the remote.
#
#   bash .ci/release-tag.sh [REMOTE]      (default: origin)
set -euo pipefail
cd "$(dirname "$0")/.."
REMOTE="${1:-origin}"
version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
tag="v$version"
if git ls-remote --exit-code --tags "$REMOTE" "refs/tags/$tag" >/dev/null; then
    # The published chapters and exercises come from this commit, their set-up cells install the
    # tagged one: the package must be the same in both, or a Colab reader runs today's notebook
    # on an older qkv (a module it imports may not exist there yet).
    git fetch -q --no-tags "$REMOTE" "+refs/tags/$tag:refs/tags/$tag"
    changed="$(git diff --name-only "$tag" HEAD -- src pyproject.toml)"
    if [ -n "$changed" ]; then
        next="$(python3 -c 'import sys; v = sys.argv[1].split("."); v[-1] = str(int(v[-1]) + 1); print(".".join(v))' "$version" 2>/dev/null || echo "a higher version")"
        {
            echo "$tag on $REMOTE is the release the book's set-up cells install, but the package has changed since it was tagged:"
            echo "$changed" | head -n 20 | sed 's/^/    /'
            echo "Raise the version in pyproject.toml (for example to $next) and push: this script then tags the new release, and the book's set-up cells install it."
        } >&2
        exit 1
    fi
    echo "$tag exists on $REMOTE and the package is unchanged since: the set-up cells install it"
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
