"""Diagnosis: the evidence the bot gathers (live reads, metric exporters, the lake's window) and the
rules that turn it into ranked causes. Commands ask it and build a Reply; it knows no command."""
