package mcpproxy
