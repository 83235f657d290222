"""`describe_exception`: file paths never reach the model, in any form an OS writes them."""

from __future__ import annotations

import pytest

from advisorchain.core.scrub import describe_exception

SECRETS = ("Users", "me", "secret", "Program Files", "server", "share", "srv", "home", "tmp")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # Windows OSError, as str() shows it: the path is a repr, backslashes doubled
        (
            r"[Errno 2] No such file or directory: 'C:\\Users\\me\\secret.txt'",
            "[Errno 2] No such file or directory: '<path>'",
        ),
        (
            r"[WinError 3] The system cannot find the path specified: 'D:\\data\\secret'",
            "[WinError 3] The system cannot find the path specified: '<path>'",
        ),
        (r"cannot open C:\Users\me\secret.txt now", "cannot open <path> now"),
        (r"cannot open C:\secret.txt", "cannot open <path>"),
        (r"cannot open c:/Users/me/secret.txt", "cannot open <path>"),
        # spaces: quoted (repr), and bare where a separator follows
        (
            r"denied: 'C:\\Program Files\\App Data\\secret.ini'",
            "denied: '<path>'",
        ),
        (r'denied: "C:\Program Files\App\secret.ini"', 'denied: "<path>"'),
        (r"denied: C:\Program Files\App\secret.ini", "denied: <path>"),
        (r"""open "C:\\Users\\O'Brien\\secret.txt" failed""", 'open "<path>" failed'),
        # UNC, extended-length and device paths
        (r"unreachable: \\server\share\dir\secret.txt", "unreachable: <path>"),
        (r"unreachable: '\\\\server\\share\\secret.txt'", "unreachable: '<path>'"),
        (r"long: \\?\C:\Users\me\secret.txt", "long: <path>"),
        (r"long: '\\\\?\\C:\\Users\\me\\secret.txt'", "long: '<path>'"),
        # POSIX, as before
        (
            "[Errno 13] Permission denied: '/home/me/secret.txt'",
            "[Errno 13] Permission denied: '<path>'",
        ),
        ("open /srv/share/secret failed", "open <path> failed"),
        ("in '/home/me/My Documents/secret.txt'", "in '<path>'"),
        ("ValueError at /tmp/x", "ValueError at <path>"),
    ],
)
def test_paths_are_redacted(message: str, expected: str) -> None:
    described = describe_exception(OSError(message))
    assert described == f"OSError: {expected}"
    for secret in SECRETS:
        assert secret not in described.removeprefix("OSError: ").replace("<path>", "")


@pytest.mark.parametrize(
    "message",
    [
        "amount must be 1/2 or 3/4 of the balance",
        "either/or is not a valid choice",
        "value 50\\50 is not a ratio",
        "expected 'a: b' at C: drive letter",
        "http error 404: not found",
        "key 'x' missing; use a:b or c:d",
        "took 1.5 s (limit 1 s)",
        "escape sequence \\n in 'text'",
        "'plain words in quotes' and \"more\"",
        "",
    ],
)
def test_plain_text_is_left_alone(message: str) -> None:
    expected = f"ValueError: {message}" if message else "ValueError"
    assert describe_exception(ValueError(message)) == expected


def test_long_messages_are_capped_after_redaction() -> None:
    message = "see 'C:\\\\Users\\\\me\\\\" + "x" * 10_000 + "' " + "y" * 10_000
    described = describe_exception(OSError(message))
    assert described == "OSError: see '<path>"
    described = describe_exception(OSError("y" * 10_000 + " /home/me/secret"))
    assert described == f"OSError: {'y' * 500}..."
