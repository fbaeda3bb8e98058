"""The shim's own records: the per-user state directory's file protocol (state) and the rule of
whose record counts (records)."""
