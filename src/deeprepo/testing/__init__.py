"""Test infrastructure shipped with the package: the loopback model server."""
