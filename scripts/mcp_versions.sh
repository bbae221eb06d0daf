#!/usr/bin/env bash
# Run the MCP server's tests (tests/test_mcp.py: a real MCP client over stdio and HTTP) with each
# mcp release named, each in a venv of its own (.venv-mcp-VERSION), default: the lowest and the
# highest release the `mcp` extra accepts. ./dev test runs them with whichever release the dev
# environment resolved (strands-agents pins mcp<2.2, so 2.1.x there).
#   scripts/mcp_versions.sh [VERSION...]
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(2.1.1 2.3.0)
for v in "${versions[@]}"; do
  venv=".venv-mcp-$v"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip -q install -e '.[mcp,web,postgres]' pytest pytest-asyncio hypothesis pyyaml \
    "mcp==$v" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "== mcp $v"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_mcp.py
done
