"""tests/secure is a package so that its package-scoped clusters stop when its tests are done."""
