"""The host side: a protocol client, a host simulator playing the bridge's part, and
what runs on it (the demo, replay of session logs, the deterministic simulation)."""
