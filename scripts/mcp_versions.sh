#!/usr/bin/env bash
# Run the MCP server's tests (tests/test_mcp.py and the MCP test of tests/test_damaged.py: a real
# MCP client over stdio and streamable HTTP; score_relevance needs the semantic extra) with each
# mcp release named, each in a throwaway venv
# of its own under ${MCP_VENVS:-/tmp} (threadline-mcp-VERSION; never the dev .venv). Default: the
# lowest and the highest release the `mcp` extra accepts (1.23 is the lowest strands-agents
# accepts; mcp 1.x serves through FastMCP, 2.x through MCPServer: src/threadline/mcp/_compat.py).
# ./dev test runs the same tests with whichever release the dev environment resolved.
#   scripts/mcp_versions.sh [VERSION...]
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.23.0 2.3.0)
root="${MCP_VENVS:-/tmp}"
python="${PYTHON:-python3}"
for v in "${versions[@]}"; do
  venv="$root/threadline-mcp-$v"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # a regular install resolves threadline's own pins with mcp==VERSION (so it also checks that the
  # extra accepts VERSION); PYTHONPATH then puts this checkout's sources first
  "$venv/bin/python" -m pip -q install ".[mcp,web,semantic]" "mcp==$v" pytest pytest-asyncio hypothesis httpx2 \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "== mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  PYTHONPATH="$PWD/src" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_mcp.py tests/test_damaged.py -k "mcp"
done
