"""File paths out of text a model, a log or a caller reads: `redact_paths`.

Error messages carry paths as the OS and `repr()` write them: POSIX, Windows drive and UNC
paths, quoted (backslashes doubled) or bare. `core.scrub.scrub_error_text` applies this
to every tool error unless the paths are a remote server's own.
"""

from __future__ import annotations

import re

URL_PATTERN = re.compile(
    r"(?<![\w+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,15})://"
    r"(?:(?P<userinfo>[^\s/@'\"<>?#]{1,256})@)?(?P<rest>[^\s'\"<>]*)"
)
"""A URL: `scheme`, the optional `userinfo` before `@`, and the `rest` (host, port, path)."""

# File paths in error messages, as the OS and repr() write them (backslashes doubled).
_PATH_PARTS = {"SEP": r"(?:\\{1,2}|/)", "SEG": r"[^\s\\/'\"<>|*?]+"}


def _path_pattern(template: str) -> re.Pattern[str]:
    return re.compile(re.sub("SEP|SEG", lambda m: _PATH_PARTS[m[0]], template))


_WINDOWS_ROOT = (
    r"(?:(?<![\w\\])[A-Za-z]:SEP"  # C:\  C:\\  C:/
    r"|(?<!\\)\\{2}(?:\\{2})?(?:[?.]\\{1,2}(?:[A-Za-z]:\\{1,2})?|SEGSEP))"  # \\?\C:\  \\server\
)
_QUOTED_PATH = _path_pattern(
    r"(?P<q>['\"])(?:" + _WINDOWS_ROOT + r"|/[^'\"\n/]+/)(?:(?!(?P=q))[^\n])*(?P=q)"
)
# Outside quotes, the names before a Windows path's last separator may have spaces.
_WINDOWS_PATH = _path_pattern(_WINDOWS_ROOT + r"(?:SEG(?: SEG)*SEP)*(?:SEG)?")
_POSIX_PATH = re.compile(r"/(?:[^\s/\\'\"]+[/\\])+[^\s/\\'\"]*")


def redact_paths(text: str) -> str:
    """`text` with every file path replaced by `<path>`: POSIX, Windows drive and UNC
    paths, quoted (as `repr` shows them, with doubled backslashes and spaces) or bare.
    URLs keep their scheme, host and path (a `file:` URL's path is a file path)."""
    out: list[str] = []
    last = 0
    for url in URL_PATTERN.finditer(text):
        out.append(_redact_bare_paths(text[last : url.start()]))
        if url["scheme"].lower() == "file":
            out.append(f"{url['scheme']}://<path>" if url["rest"] else url[0])
        else:
            out.append(url[0])
        last = url.end()
    out.append(_redact_bare_paths(text[last:]))
    return "".join(out)


def _redact_bare_paths(text: str) -> str:
    if not text:
        return text
    text = _QUOTED_PATH.sub(lambda m: f"{m['q']}<path>{m['q']}", text)
    return _POSIX_PATH.sub("<path>", _WINDOWS_PATH.sub("<path>", text))


__all__ = ["URL_PATTERN", "redact_paths"]
