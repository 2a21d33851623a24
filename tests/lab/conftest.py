"""The lab's tests import their shared helpers (labtest.py) from this folder, which pyproject.toml's
pytest pythonpath names."""
