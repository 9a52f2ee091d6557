"""Governance (docs/governance.md): encrypted files, verified backups, export and import, the
hash-chained audit log, least-privilege agent tools, secret redaction."""
