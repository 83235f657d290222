"""advisorchain's core contracts: messages, requests, tools, advisors, the chain."""

__all__: list[str] = []
