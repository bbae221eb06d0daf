"""Adapters that make threadline the session layer of agent frameworks, one module per
framework, each behind its own extra (DESIGN §1, §10)."""
