"""The process edge: the `kbot` command line and `kbot run`.

It works out a process's configuration (the environment, plus the local dev cluster when nothing
else configures one) and hands it down; it may import every package, and none imports it.
"""
