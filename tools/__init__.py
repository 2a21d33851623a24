"""Test and benchmark tooling, not part of the bot: nothing here is packaged (pyproject.toml's
package list leaves ``tools`` out) or imported by the runtime packages.

``synthetic`` generates metric lakes with incidents at any scale: the lake and Spark tests build
their fixtures with it, and scripts/bench_lake.py its benchmark data (``python -m tools.synthetic``).
"""
