"""The process edge: the `kbot` command line and `kbot run`. It may import every package; none
imports it.
"""
