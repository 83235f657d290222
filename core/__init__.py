"""advisorchain's core contracts: messages, requests, tools, advisors, the chain."""
