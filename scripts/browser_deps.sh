#!/usr/bin/env bash
# Local copies of the files the built book loads from the jsdelivr CDN, so that the
# browser test (tests/test_book_html.py) runs offline. `npm pack` fetches each package's
# own tarball from the npm registry (no dependency tree); nothing is committed.
set -euo pipefail
dest=tests/browser/vendor
mkdir -p "$dest"
fetch() {
  local spec=$1
  [ -d "$dest/$spec" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" > /dev/null)
  mkdir -p "$dest/$spec"
  tar -xzf "$tmp"/*.tgz -C "$dest/$spec" --strip-components=1
  rm -rf "$tmp"
}
fetch mathjax@3
fetch requirejs@2.3.4
fetch @jupyter-widgets/html-manager@1.0.6
fetch axe-core@4.14.1  # the WCAG 2.1 A/AA rules the browser test runs on every page
