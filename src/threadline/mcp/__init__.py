"""The MCP server (``threadline mcp``) and its tools. See :mod:`threadline.mcp.server`."""
