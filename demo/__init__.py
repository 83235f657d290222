"""The order assistant demo (`advisorchain demo`): a real chain around a real model.

`app.run_demo` runs a session; `chain.build_chain` is where the chain is put together;
`tools` and `orders` are the shop behind it; `catalog` holds ~50 further tools for tool
search; `render` prints to the terminal.
"""

__all__: list[str] = []
