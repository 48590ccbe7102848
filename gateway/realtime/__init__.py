"""Per-user event streams and the WebSocket connection registry."""
