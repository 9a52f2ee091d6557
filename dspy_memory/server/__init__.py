"""The memory service: a FastAPI app over one Memory (REST, API keys bound to tenants) and an
MCP server (docs/server.md)."""
