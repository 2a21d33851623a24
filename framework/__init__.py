"""The command framework: a command's spec, the router that parses /kafka text, the neutral Reply,
the request context, gated actions and the dispatcher that runs one line end to end. Commands
(`commands/`) are built on it; it knows none of them."""
