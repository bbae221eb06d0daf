#!/usr/bin/env bash
# Run the MCP server's tests with each mcp release named, each in a throwaway venv of its own under
# ${MCP_VENVS:-/tmp} (threadline-mcp-VERSION; never the dev .venv), then check that clients see
# the same server on every release: scripts/mcp_wire.py prints the server's listing and answers
# as canonical JSON on each, and the outputs must be equal.
# Tests: tests/test_mcp.py and the MCP test of tests/test_damaged.py, a real MCP client over stdio
# and streamable HTTP (score_relevance needs the semantic extra).
# Default: the lowest and the highest release the `mcp` extra accepts (1.23 is the lowest
# strands-agents accepts; mcp 1.x serves through FastMCP, 2.x through MCPServer, see
# src/threadline/mcp/_compat.py). ./dev test runs the same tests with whichever release the dev
# environment resolved.
#   scripts/mcp_versions.sh [VERSION...]
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.23.0 2.3.0)
root="${MCP_VENVS:-/tmp}"
python="${PYTHON:-python3}"
first=""
for v in "${versions[@]}"; do
  venv="$root/threadline-mcp-$v"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # a regular install resolves threadline's own pins with mcp==VERSION (so it also checks that the
  # extra accepts VERSION); PYTHONPATH then puts this checkout's sources first
  "$venv/bin/python" -m pip -q install ".[mcp,web,semantic]" "mcp==$v" pytest pytest-asyncio \
    hypothesis httpx2 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "== mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  PYTHONPATH="$PWD/src" "$venv/bin/python" -m pytest -p no:cacheprovider \
    tests/test_mcp.py tests/test_damaged.py -k "mcp"
  PYTHONPATH="$PWD/src" "$venv/bin/python" scripts/mcp_wire.py >"$root/threadline-mcp-wire-$v.json"
  if [ -z "$first" ]; then
    first="$v"
  elif diff -u "$root/threadline-mcp-wire-$first.json" "$root/threadline-mcp-wire-$v.json"; then
    echo "clients see the same server on mcp $first and mcp $v"
  else
    echo "clients see a different server on mcp $first and mcp $v (diff above)" >&2
    exit 1
  fi
done
