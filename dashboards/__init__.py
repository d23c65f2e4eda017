"""Grafana dashboards and alert rules as code (grafana-foundation-sdk)."""
