"""The embedded local model's packaging: llama.cpp's portable build (`build.py`), the
weights shipped as packages (`weights.py`) and the preflight run before the first load
(`preflight.py`). `providers.llamacpp.LlamaCppChatModel` is the chat model itself."""

__all__: list[str] = []
