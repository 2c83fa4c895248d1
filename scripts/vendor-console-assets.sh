#!/usr/bin/env bash
# Refresh the browser assets the admin listener serves itself (the console and /docs work offline, no
# CDN). Run by a developer when bumping a version; the copied files are committed, so installs and
# `make serve` never need npm. Each package comes from the npm registry with `npm pack` (no install,
# no scripts run); VENDORED.md records version, licence and sha256 of every copied file.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=tabletopic/api/static/vendor
# package@version  files-in-the-tarball (relative to package/)
packages=(
  "htmx.org@2.0.11 dist/htmx.min.js LICENSE"
  "uplot@1.6.32 dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE"
  "swagger-ui-dist@5.35.0 swagger-ui-bundle.js swagger-ui.css favicon-32x32.png LICENSE NOTICE"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$dest" && mkdir -p "$dest"
{
  echo "# Vendored browser assets"
  echo
  echo "Copied by \`scripts/vendor-console-assets.sh\` from the npm registry; do not edit by hand."
  echo
  echo "| package | version | licence | file | sha256 |"
  echo "|---|---|---|---|---|"
} > "$dest/VENDORED.md"
for entry in "${packages[@]}"; do
  read -r spec files <<< "$entry"
  name=${spec%@*}; version=${spec##*@}
  (cd "$work" && npm pack --silent "$spec" >/dev/null)
  tarball=$(ls "$work"/*.tgz)
  mkdir -p "$work/x" && tar xzf "$tarball" -C "$work/x"
  licence=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["license"])' "$work/x/package/package.json")
  mkdir -p "$dest/$name"
  for f in $files; do
    cp "$work/x/package/$f" "$dest/$name/$(basename "$f")"
    sum=$(sha256sum "$dest/$name/$(basename "$f")" | cut -c1-16)
    echo "| $name | $version | $licence | $(basename "$f") | $sum… |" >> "$dest/VENDORED.md"
  done
  rm -rf "$work/x" "$tarball"
done
echo "vendored into $dest"
